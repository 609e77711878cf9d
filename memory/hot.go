package memory

import (
	"container/list"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"sync"
)

// DefaultHotBytes bounds the hot layer when Options.HotBytes is 0.
const DefaultHotBytes = 16 << 20

// hotOverhead is what one hot entry costs besides its key and result: the
// list element, the map slot and the entry's fields.
const hotOverhead = 160

// hot is the in-process layer in front of SQLite: the entries this process
// read recently, so that a repeated call costs a map lookup and one cheap
// coherence check instead of a SQLite read. It is bounded in bytes and
// evicts the least recently used entries.
//
// Coherence: another process sharing memory.db may invalidate entries at
// any moment, and the next call must see it. Before every lookup, the
// watcher reads the WAL-index header from a read-only mapping of the -shm
// file (every commit rewrites it); when it moved, it asks SQLite (PRAGMA
// data_version on a connection of its own) whether any other connection
// committed since the last look; only then does it read the invalidation
// generations, and only when one of them moved is the hot layer emptied. Stores, hit counters and evictions move
// data_version but not the generations, so they do not empty it. An entry
// evicted from SQLite by another process may still be served from here
// until its TTL ends, as it would have been had it stayed.
type hot struct {
	mu    sync.Mutex
	max   int64
	size  int64
	epoch uint64 // bumped by every reset: a read that began before one is not kept
	lru   list.List
	items map[string]*list.Element
}

type hotItem struct {
	key  string
	e    entry
	gen  int64
	size int64
}

func newHot(max int64) *hot {
	return &hot{max: max, items: make(map[string]*list.Element)}
}

// get returns the entry under key, if held.
func (h *hot) get(key []byte) (entry, int64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	el, ok := h.items[string(key)]
	if !ok {
		return entry{}, 0, false
	}
	h.lru.MoveToFront(el)
	it := el.Value.(*hotItem)
	return it.e, it.gen, true
}

// put keeps e under key, unless a reset happened since epoch (e may
// predate an invalidation) or e alone is over the bound.
func (h *hot) put(key []byte, e entry, gen int64, epoch uint64) {
	if e.tmpl == nil {
		e.tmpl = newMetaTemplate(e.result)
	}
	size := int64(len(key)+len(e.result)) + hotOverhead
	if e.tmpl != nil {
		size += int64(len(e.tmpl.prefix) + len(e.tmpl.suffix))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if epoch != h.epoch || size > h.max {
		return
	}
	if el, ok := h.items[string(key)]; ok {
		h.size -= el.Value.(*hotItem).size
		h.lru.Remove(el)
	}
	h.items[string(key)] = h.lru.PushFront(&hotItem{key: string(key), e: e, gen: gen, size: size})
	h.size += size
	for h.size > h.max {
		el := h.lru.Back()
		it := el.Value.(*hotItem)
		h.lru.Remove(el)
		delete(h.items, it.key)
		h.size -= it.size
	}
}

// drop forgets the entry under key.
func (h *hot) drop(key []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if el, ok := h.items[string(key)]; ok {
		h.size -= el.Value.(*hotItem).size
		h.lru.Remove(el)
		delete(h.items, string(key))
	}
}

// reset empties the layer.
func (h *hot) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.items = make(map[string]*list.Element)
	h.lru.Init()
	h.size = 0
	h.epoch++
}

// currentEpoch is the epoch a read must present to put.
func (h *hot) currentEpoch() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.epoch
}

// watcher tells the hot layer when another connection invalidated.
type watcher struct {
	mu      sync.Mutex
	conn    *sql.Conn // its own: data_version counts commits of every other connection
	version *sql.Stmt
	gens    *sql.Stmt
	last    int64
	seen    map[string]int64 // generations at the last look

	shm     *shmView // nil: ask SQLite on every look
	lastHdr [walHeaderWords]uint32
	hdrOK   bool // lastHdr was read before the last data_version
}

func newWatcher(ctx context.Context, db *sql.DB, path string) (*watcher, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("hot layer connection: %w", err)
	}
	w := &watcher{conn: conn}
	if w.version, err = conn.PrepareContext(ctx, `PRAGMA data_version`); err == nil {
		w.gens, err = conn.PrepareContext(ctx, `SELECT name, gen FROM generations`)
	}
	if err != nil {
		w.close()
		return nil, fmt.Errorf("hot layer statements: %w", err)
	}
	if err := w.version.QueryRowContext(ctx).Scan(&w.last); err != nil {
		w.close()
		return nil, fmt.Errorf("read data_version: %w", err)
	}
	if w.seen, err = w.readGens(ctx); err != nil {
		w.close()
		return nil, err
	}
	// Without the mapping (another platform, an odd file system) every
	// look asks SQLite: slower, as correct.
	w.shm, _ = openShm(path)
	return w, nil
}

func (w *watcher) readGens(ctx context.Context) (map[string]int64, error) {
	rows, err := w.gens.QueryContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("read generations: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var (
			name string
			gen  int64
		)
		if err := rows.Scan(&name, &gen); err != nil {
			return nil, fmt.Errorf("read generations: %w", err)
		}
		out[name] = gen
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read generations: %w", err)
	}
	return out, nil
}

// look is what the watcher saw since its last look.
type look struct {
	epoch       uint64 // what reads made now must present to hot.put
	moved       bool   // another connection committed
	invalidated bool   // ... and an invalidation generation moved
}

// sync empties h (nil: no hot layer) if an invalidation was committed
// since the last look.
func (w *watcher) sync(ctx context.Context, h *hot) (look, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// The epoch is taken before looking, so a reset by this look or a
	// later one refuses what a read that starts now would put.
	var l look
	if h != nil {
		l.epoch = h.currentEpoch()
	}
	var hdr [walHeaderWords]uint32
	if w.shm != nil {
		// No commit rewrote the WAL-index header since the last look:
		// data_version cannot have moved.
		if hdr = w.shm.header(); w.hdrOK && hdr == w.lastHdr {
			return l, nil
		}
	}
	var v int64
	if err := w.version.QueryRowContext(ctx).Scan(&v); err != nil {
		w.hdrOK = false
		return l, fmt.Errorf("read data_version: %w", err)
	}
	// The header was read before data_version: a commit in between makes
	// the next look ask again.
	w.lastHdr, w.hdrOK = hdr, w.shm != nil
	if v == w.last {
		return l, nil
	}
	gens, err := w.readGens(ctx)
	if err != nil {
		w.hdrOK = false
		return l, err
	}
	w.last = v
	l.moved = true
	if !maps.Equal(gens, w.seen) {
		w.seen = gens
		l.invalidated = true
		if h != nil {
			h.reset()
			l.epoch = h.currentEpoch()
		}
	}
	return l, nil
}

func (w *watcher) close() {
	if w.shm != nil {
		w.shm.close()
	}
	if w.version != nil {
		w.version.Close()
	}
	if w.gens != nil {
		w.gens.Close()
	}
	w.conn.Close()
}
