package memory

import (
	"container/list"
	"sync"
)

// DefaultHotBytes bounds the hot layer when Options.HotBytes is 0.
const DefaultHotBytes = 16 << 20

// hotOverhead is what one hot entry costs besides its key and result: the
// list element, the map slot and the entry's fields.
const hotOverhead = 160

// Hot is the in-process layer in front of the store: the entries this process
// read recently, so that a repeated call costs a map lookup and one cheap
// coherence check instead of a database read. It is bounded in bytes and
// evicts the least recently used entries.
//
// Coherence: another process sharing the store may invalidate entries at
// any moment, and the next call must see it. Before every lookup the store
// syncs (Store.Sync), and a hot hit is served only if Store.HotValid
// agrees.
//
// With SQLite, the watcher (memory/sqlite) reads the WAL-index
// header from a read-only mapping of the -shm file (every commit rewrites
// it); when it moved, it asks SQLite (PRAGMA data_version on a connection
// of its own) whether any other connection committed since the last look;
// only then does it read the invalidation generations, and only when one
// of them moved is the hot layer emptied. Stores, hit counters and
// evictions move data_version but not the generations, so they do not
// empty it. An entry evicted from SQLite by another process may still be
// served from here until its TTL ends, as it would have been had it
// stayed.
//
// With PostgreSQL, notifications empty the layer soon after another
// replica invalidates, but not before that replica answered; so hotValid
// also reads the tool's invalidation generation on every hot hit (see
// memory/postgres).
type Hot struct {
	mu    sync.Mutex
	max   int64
	size  int64
	epoch uint64 // bumped by every reset: a read that began before one is not kept
	lru   list.List
	items map[string]*list.Element
}

type hotItem struct {
	key  string
	e    Entry
	gen  int64
	size int64
}

func newHot(max int64) *Hot {
	return &Hot{max: max, items: make(map[string]*list.Element)}
}

// get returns the entry under key, if held.
func (h *Hot) get(key []byte) (Entry, int64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	el, ok := h.items[string(key)]
	if !ok {
		return Entry{}, 0, false
	}
	h.lru.MoveToFront(el)
	it := el.Value.(*hotItem)
	return it.e, it.gen, true
}

// put keeps e under key, unless a reset happened since epoch (e may
// predate an invalidation) or e alone is over the bound.
func (h *Hot) put(key []byte, e Entry, gen int64, epoch uint64) {
	if e.tmpl == nil {
		e.tmpl = newMetaTemplate(e.Result)
	}
	size := int64(len(key)+len(e.Result)) + hotOverhead
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
func (h *Hot) drop(key []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if el, ok := h.items[string(key)]; ok {
		h.size -= el.Value.(*hotItem).size
		h.lru.Remove(el)
		delete(h.items, string(key))
	}
}

// Len reports how many entries h holds.
func (h *Hot) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.items)
}

// Reset empties the layer; a Store calls it when another process
// invalidated.
func (h *Hot) Reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.items = make(map[string]*list.Element)
	h.lru.Init()
	h.size = 0
	h.epoch++
}

// Epoch is the epoch a read must present to put: a Reset since the read
// began refuses what it read.
func (h *Hot) Epoch() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.epoch
}
