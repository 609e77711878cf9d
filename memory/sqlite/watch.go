package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"sync"

	"github.com/nexus-mcp/nexus/memory"
)

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

// sync empties h (nil: no hot layer) if an invalidation was committed
// since the last look.
func (w *watcher) sync(ctx context.Context, h *memory.Hot) (memory.Look, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// The epoch is taken before looking, so a reset by this look or a
	// later one refuses what a read that starts now would put.
	var l memory.Look
	if h != nil {
		l.Epoch = h.Epoch()
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
	l.Moved = true
	if !maps.Equal(gens, w.seen) {
		w.seen = gens
		l.Invalidated = true
		if h != nil {
			h.Reset()
			l.Epoch = h.Epoch()
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
