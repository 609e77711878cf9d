package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/nexus-mcp/nexus/internal/sqlitedb"
	"github.com/nexus-mcp/nexus/memory"
)

// File is the memory.Backend of the SQLite database file at its path,
// e.g. $NEXUS_HOME/memory.db.
type File string

// Where returns the path.
func (f File) Where() string { return string(f) }

// Open opens (creating if needed) the database and migrates its schema.
func (f File) Open(ctx context.Context, o memory.StoreOptions) (memory.Store, error) {
	s, err := Open(ctx, string(f), o.BusyTimeout)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", string(f), err)
	}
	return s, nil
}

var _ memory.Store = (*Store)(nil)

// Store is the store in one SQLite file that every local process
// (gateways, CLI commands) shares.
type Store struct {
	db   *sql.DB
	path string
	// writeSem serialises this process's write transactions, so they queue
	// in Go (honouring contexts) instead of in SQLite's busy handler.
	writeSem chan struct{}

	lookupStmt *sql.Stmt
	// The statements every store of a result runs, prepared once: the
	// driver keeps no statement cache, and parsing them anew was a sixth
	// of the CPU of a call memory forwards and keeps.
	genStmt, upsertStmt, totalsStmt *sql.Stmt
	watch                           *watcher // nil if it could not be set up: no hot layer coherence

	// vecTables holds the dimensions whose vec0 table is known to exist.
	vecTables sync.Map // int -> bool
}

// Open opens path (see sqlitedb.Open), checks that the file is a
// database and migrates its schema. busy bounds how long one operation
// waits for a lock another process holds.
func Open(ctx context.Context, path string, busy time.Duration) (*Store, error) {
	db, err := sqlitedb.Open(path, busy)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	// A garbage file fails here ("file is not a database"); a database cut
	// short may pass and fail later, per query, which Call treats as a bypass.
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&n); err != nil {
		db.Close()
		return nil, fmt.Errorf("read schema: %w", err)
	}
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	s := &Store{db: db, path: path, writeSem: make(chan struct{}, 1)}
	s.lookupStmt, err = db.PrepareContext(ctx, `
		SELECT g.gen, e.id, e.result, e.created_at, e.duration_ms, e.stale
		FROM (SELECT coalesce(sum(gen), 0) AS gen FROM generations WHERE name IN (?1, ?2, '*')) AS g
		LEFT JOIN entries AS e ON e.key = ?3`)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("prepare lookup: %w", err)
	}
	for _, p := range []struct {
		name  string
		stmt  **sql.Stmt
		query string
	}{{"generation", &s.genStmt, genQuery}, {"store", &s.upsertStmt, upsertQuery}, {"totals", &s.totalsStmt, totalsQuery}} {
		if *p.stmt, err = db.PrepareContext(ctx, p.query); err != nil {
			s.Close()
			return nil, fmt.Errorf("prepare %s: %w", p.name, err)
		}
	}
	return s, nil
}

func (s *Store) Where() string { return s.path }

// Local is true: the store is a file of this machine.
func (s *Store) Local() bool { return true }

func (s *Store) Close() error {
	if s.watch != nil {
		s.watch.close()
	}
	for _, st := range []*sql.Stmt{s.lookupStmt, s.genStmt, s.upsertStmt, s.totalsStmt} {
		if st != nil {
			st.Close()
		}
	}
	return s.db.Close()
}

// Watch sets up the coherence watcher, which Sync asks; without it there
// is no hot layer and no similarity index.
func (s *Store) Watch(ctx context.Context, _ *memory.Hot) (bool, error) {
	w, err := newWatcher(ctx, s.db, s.path)
	if err != nil {
		return false, err
	}
	s.watch = w
	return false, nil
}

func (s *Store) Sync(ctx context.Context, h *memory.Hot) (memory.Look, error) {
	if s.watch == nil {
		return memory.Look{}, nil
	}
	return s.watch.sync(ctx, h)
}

// hotValid: sync already emptied the hot layer if another connection
// invalidated; this process's own invalidations are in the same file.
func (s *Store) HotValid(context.Context, memory.Tool, int64) (bool, error) { return true, nil }

// claim: single flight across processes sharing one file is not done;
// each process coalesces its own identical calls.
func (s *Store) Claim(context.Context, []byte, time.Duration, int64) (bool, bool, func(), error) {
	return true, false, func() {}, nil
}

func (s *Store) FlightDone() <-chan struct{} { return nil }

func (s *Store) Busy(err error) bool { return isBusy(err) }

// lookup returns the entry stored under key (found false if none) and the
// current invalidation generation of t.
func (s *Store) Lookup(ctx context.Context, t memory.Tool, key []byte) (e memory.Entry, found bool, gen int64, err error) {
	gt, gs := memory.GenNames(t)
	var (
		id, created, dur sql.NullInt64
		result           []byte
		stale            sql.NullBool
	)
	err = s.lookupStmt.QueryRowContext(ctx, gt, gs, key).Scan(&gen, &id, &result, &created, &dur, &stale)
	if err != nil {
		return memory.Entry{}, false, 0, fmt.Errorf("lookup: %w", err)
	}
	if !id.Valid {
		return memory.Entry{}, false, gen, nil
	}
	return memory.Entry{ID: id.Int64, Result: result, CreatedAt: created.Int64, DurationMS: dur.Int64, Stale: stale.Bool}, true, gen, nil
}

// writeTx runs fn in one IMMEDIATE transaction.
func (s *Store) writeTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	select {
	case s.writeSem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.writeSem }()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

const genQuery = `SELECT coalesce(sum(gen), 0) FROM generations WHERE name IN (?1, ?2, '*')`

// currentGen reads t's generation with q, genQuery in the write's transaction.
func currentGen(ctx context.Context, q *sql.Stmt, t memory.Tool) (int64, error) {
	gt, gs := memory.GenNames(t)
	var gen int64
	err := q.QueryRowContext(ctx, gt, gs).Scan(&gen)
	if err != nil {
		return 0, fmt.Errorf("read generation: %w", err)
	}
	return gen, nil
}

// Replacing the result fires the vec_f<dims>_au trigger, which drops the old
// vector; the caller stores the new one.
const upsertQuery = `
	INSERT INTO entries (key, tool, server, scope, fingerprint, args, result, size,
		duration_ms, created_at, expires_at, last_used_at, hits,
		bucket, embedder, free_text, vec_dims)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?)
	ON CONFLICT (key) DO UPDATE SET
		result = excluded.result, size = excluded.size,
		duration_ms = excluded.duration_ms, created_at = excluded.created_at,
		expires_at = excluded.expires_at, last_used_at = excluded.last_used_at,
		stale = 0, bucket = excluded.bucket, embedder = excluded.embedder,
		free_text = excluded.free_text, vec_dims = excluded.vec_dims
	RETURNING id`

// upsert stores r with q (upsertQuery in the write's transaction), replacing
// an entry with the same key, and returns its id.
func upsert(ctx context.Context, q *sql.Stmt, r *memory.Record) (int64, error) {
	var (
		id                      int64
		bucket                  []byte
		embedder, text, vecDims any
	)
	if r.Text != nil && r.Text.Vec != nil {
		bucket, embedder, text, vecDims = r.Text.Bucket, r.Text.Embedder.ID(), r.Text.Text, len(r.Text.Vec)
	}
	err := q.QueryRowContext(ctx,
		r.Key, r.Tool.Name, r.Tool.Server, r.Scope, r.Fingerprint, string(r.Args), r.Result, len(r.Result),
		r.DurationMS, r.CreatedAt, r.ExpiresAt, r.CreatedAt, bucket, embedder, text, vecDims,
	).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("store entry: %w", err)
	}
	return id, nil
}

// invalidate deletes the entries matching patterns and bumps their
// generations, so results fetched before now are not stored after it.
func invalidate(ctx context.Context, tx *sql.Tx, patterns []string) (int64, error) {
	var total int64
	for _, p := range patterns {
		var (
			res sql.Result
			gen string
			err error
		)
		switch {
		case p == "*":
			gen = "*"
			res, err = tx.ExecContext(ctx, `DELETE FROM entries`)
		case strings.HasSuffix(p, ".*"):
			gen = "server:" + strings.TrimSuffix(p, ".*")
			res, err = tx.ExecContext(ctx, `DELETE FROM entries WHERE server = ?`, strings.TrimSuffix(p, ".*"))
		default:
			gen = "tool:" + p
			res, err = tx.ExecContext(ctx, `DELETE FROM entries WHERE tool = ?`, p)
		}
		if err != nil {
			return total, fmt.Errorf("invalidate %q: %w", p, err)
		}
		n, _ := res.RowsAffected()
		total += n
		if err := bumpGen(ctx, tx, gen); err != nil {
			return total, err
		}
	}
	return total, nil
}

// markStale marks the entries matching patterns stale (see write.soft) and
// bumps their generations, so hot layers drop them and results fetched
// before now are not stored after it.
func markStale(ctx context.Context, tx *sql.Tx, patterns []string) error {
	for _, p := range patterns {
		gen, column, value := memory.PatternGen(p)
		var err error
		if column == "" {
			_, err = tx.ExecContext(ctx, `UPDATE entries SET stale = 1 WHERE stale = 0`)
		} else {
			_, err = tx.ExecContext(ctx, `UPDATE entries SET stale = 1 WHERE stale = 0 AND `+column+` = ?`, value)
		}
		if err != nil {
			return fmt.Errorf("mark %q stale: %w", p, err)
		}
		if err := bumpGen(ctx, tx, gen); err != nil {
			return err
		}
	}
	return nil
}

func bumpGen(ctx context.Context, tx *sql.Tx, name string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO generations (name, gen) VALUES (?, 1)
		ON CONFLICT (name) DO UPDATE SET gen = gen + 1`, name)
	if err != nil {
		return fmt.Errorf("bump generation %q: %w", name, err)
	}
	return nil
}

// evictIfNeeded keeps the store within b. It reads the trigger-maintained
// totals (one row), so the common case costs one primary-key read. Once over
// a bound, it deletes expired entries and then least recently used ones
// down to 90% of the bound, so the next pass is many puts away. keep is an
// id never evicted (the entry just stored).
func evictIfNeeded(ctx context.Context, tx *sql.Tx, totals *sql.Stmt, b memory.Bounds, now, keep int64, beforeEvict func() error) (int64, error) {
	entries, size, err := readTotals(ctx, totals)
	if err != nil {
		return 0, err
	}
	if entries <= b.MaxEntries && size <= b.MaxBytes {
		return 0, nil
	}
	// Recent hits of this process are not in last_used_at yet.
	if err := beforeEvict(); err != nil {
		return 0, err
	}
	var evicted int64
	res, err := tx.ExecContext(ctx, `DELETE FROM entries WHERE id IN (
		SELECT id FROM entries WHERE expires_at <= ? AND id != ? LIMIT ?)`, now, keep, max(entries/10, 64))
	if err != nil {
		return 0, fmt.Errorf("evict expired: %w", err)
	}
	n, _ := res.RowsAffected()
	evicted += n
	lowEntries, lowBytes := b.MaxEntries*9/10, b.MaxBytes*9/10
	for {
		entries, size, err = readTotals(ctx, totals)
		if err != nil {
			return evicted, err
		}
		var k int64
		switch {
		case entries > lowEntries && entries > 1:
			k = entries - lowEntries
		case size > lowBytes && entries > 1:
			// Estimate from the mean size; the loop mops up the rest.
			k = max((size-lowBytes)/max(size/entries, 1), 1)
		default:
			return evicted, nil
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM entries WHERE id IN (
			SELECT id FROM entries WHERE id != ? ORDER BY last_used_at, id LIMIT ?)`, keep, k)
		if err != nil {
			return evicted, fmt.Errorf("evict least recently used: %w", err)
		}
		n, _ := res.RowsAffected()
		evicted += n
		if n == 0 {
			return evicted, nil
		}
	}
}

const totalsQuery = `SELECT entries, bytes FROM totals WHERE id = 1`

// readTotals reads the totals with q, totalsQuery in the write's transaction.
func readTotals(ctx context.Context, q *sql.Stmt) (entries, size int64, err error) {
	err = q.QueryRowContext(ctx).Scan(&entries, &size)
	if err != nil {
		return 0, 0, fmt.Errorf("read totals: %w", err)
	}
	return entries, size, nil
}

// purgeExpired deletes up to limit entries whose stored expiry has passed.
func purgeExpired(ctx context.Context, tx *sql.Tx, now int64, limit int) (int64, error) {
	res, err := tx.ExecContext(ctx, `DELETE FROM entries WHERE id IN (
		SELECT id FROM entries WHERE expires_at <= ? LIMIT ?)`, now, limit)
	if err != nil {
		return 0, fmt.Errorf("purge expired: %w", err)
	}
	return res.RowsAffected()
}

// sqliteCode returns the primary SQLite result code in err, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() & 0xff
	}
	return 0
}

// isBusy reports a lock held elsewhere.
func isBusy(err error) bool {
	c := sqliteCode(err)
	return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
}

// write applies w in one IMMEDIATE transaction.
func (s *Store) Write(ctx context.Context, w *memory.Write) (int64, error) {
	rec := w.Record
	var storedID int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		if rec != nil {
			// An invalidation since the lookup means the result may predate it.
			cur, err := currentGen(ctx, tx.StmtContext(ctx, s.genStmt), rec.Tool)
			if err != nil {
				return err
			}
			if cur != w.Gen {
				rec = nil
			}
		}
		if len(w.Invalidate) > 0 {
			if _, err := invalidate(ctx, tx, w.Invalidate); err != nil {
				return err
			}
		}
		if len(w.Soft) > 0 {
			if err := markStale(ctx, tx, w.Soft); err != nil {
				return err
			}
		}
		if err := writePending(ctx, tx, w.Touches, w.Tools); err != nil {
			return err
		}
		if err := writeRefuted(ctx, tx, w.Refuted); err != nil {
			return err
		}
		if w.Purge {
			if _, err := purgeExpired(ctx, tx, w.Now, memory.PurgeLimit); err != nil {
				return err
			}
		}
		if rec == nil {
			return nil
		}
		id, err := upsert(ctx, tx.StmtContext(ctx, s.upsertStmt), rec)
		if err != nil {
			return err
		}
		storedID = id
		if rec.Text != nil {
			if err := s.storeVector(ctx, tx, id, rec.Text); err != nil {
				return err
			}
		}
		_, err = evictIfNeeded(ctx, tx, tx.StmtContext(ctx, s.totalsStmt), w.Bounds, rec.CreatedAt, id, func() error {
			if w.BeforeEvict == nil {
				return nil
			}
			touches, tools := w.BeforeEvict()
			return writePending(ctx, tx, touches, tools)
		})
		return err
	})
	if err != nil {
		return 0, err
	}
	if rec != nil && rec.Text != nil {
		s.vecTables.Store(len(rec.Text.Vec), true)
	}
	return storedID, nil
}

// clear deletes the entries of server and tool ("" = any).
func (s *Store) Clear(ctx context.Context, server, tool string) (int64, error) {
	var n int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var (
			res sql.Result
			err error
			gen string
		)
		switch {
		case tool != "" && server != "":
			gen = "tool:" + tool
			res, err = tx.ExecContext(ctx, `DELETE FROM entries WHERE tool = ? AND server = ?`, tool, server)
		case tool != "":
			gen = "tool:" + tool
			res, err = tx.ExecContext(ctx, `DELETE FROM entries WHERE tool = ?`, tool)
		case server != "":
			gen = "server:" + server
			res, err = tx.ExecContext(ctx, `DELETE FROM entries WHERE server = ?`, server)
		default:
			gen = "*"
			res, err = tx.ExecContext(ctx, `DELETE FROM entries`)
		}
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		return bumpGen(ctx, tx, gen)
	})
	return n, err
}
