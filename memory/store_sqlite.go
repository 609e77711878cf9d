package memory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// sqliteStore is the store in one SQLite file that every local process
// (gateways, CLI commands) shares.
type sqliteStore struct {
	db   *sql.DB
	path string
	// writeSem serialises this process's write transactions, so they queue
	// in Go (honouring contexts) instead of in SQLite's busy handler.
	writeSem chan struct{}

	lookupStmt *sql.Stmt
	watch      *watcher // nil if it could not be set up: no hot layer coherence

	// vecTables holds the dimensions whose vec0 table is known to exist.
	vecTables sync.Map // int -> bool
}

// openSQLite opens path with WAL, synchronous=NORMAL (durable across process
// crashes; a power cut may lose the last commits, which for a cache is only
// misses) and a busy timeout, and checks that the file is a database.
func openSQLite(ctx context.Context, path string, busy time.Duration) (*sqliteStore, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("path %q: '?' and '#' are not supported in the memory database path", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create directory: %w", err)
	}
	// Create the file private to the user: cached results can be sensitive.
	// SQLite gives the -wal and -shm files the same mode.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create file: %w", err)
	}
	f.Close()

	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", max(busy.Milliseconds(), 1)))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	// Statement journals (every write with triggers needs one) stay in memory.
	q.Add("_pragma", "temp_store(MEMORY)")
	// 8 MiB of page cache per connection: a hit reads an index and a row.
	q.Add("_pragma", "cache_size(-8192)")
	// Write transactions take the write lock up front: a deferred
	// transaction that upgrades from read to write can fail with
	// SQLITE_BUSY without waiting, which would lose the write for nothing.
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
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
	s := &sqliteStore{db: db, path: path, writeSem: make(chan struct{}, 1)}
	s.lookupStmt, err = db.PrepareContext(ctx, `
		SELECT g.gen, e.id, e.result, e.created_at, e.duration_ms, e.stale
		FROM (SELECT coalesce(sum(gen), 0) AS gen FROM generations WHERE name IN (?1, ?2, '*')) AS g
		LEFT JOIN entries AS e ON e.key = ?3`)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("prepare lookup: %w", err)
	}
	return s, nil
}

func (s *sqliteStore) where() string { return s.path }

func (s *sqliteStore) close() error {
	if s.watch != nil {
		s.watch.close()
	}
	s.lookupStmt.Close()
	return s.db.Close()
}

// startWatch sets up the coherence watcher; without it there is no hot
// layer and no similarity index (see Open).
func (s *sqliteStore) startWatch(ctx context.Context) error {
	w, err := newWatcher(ctx, s.db, s.path)
	if err != nil {
		return err
	}
	s.watch = w
	return nil
}

func (s *sqliteStore) sync(ctx context.Context, h *hot) (look, error) {
	if s.watch == nil {
		return look{}, nil
	}
	return s.watch.sync(ctx, h)
}

// hotValid: sync already emptied the hot layer if another connection
// invalidated; this process's own invalidations are in the same file.
func (s *sqliteStore) hotValid(context.Context, Tool, int64) (bool, error) { return true, nil }

// claim: single flight across processes sharing one file is not done;
// each process coalesces its own identical calls.
func (s *sqliteStore) claim(context.Context, []byte, time.Duration, int64) (bool, bool, func(), error) {
	return true, false, func() {}, nil
}

func (s *sqliteStore) flightDone() <-chan struct{} { return nil }

func (s *sqliteStore) busy(err error) bool { return isBusy(err) }

// lookup returns the entry stored under key (found false if none) and the
// current invalidation generation of t.
func (s *sqliteStore) lookup(ctx context.Context, t Tool, key []byte) (e entry, found bool, gen int64, err error) {
	gt, gs := genNames(t)
	var (
		id, created, dur sql.NullInt64
		result           []byte
		stale            sql.NullBool
	)
	err = s.lookupStmt.QueryRowContext(ctx, gt, gs, key).Scan(&gen, &id, &result, &created, &dur, &stale)
	if err != nil {
		return entry{}, false, 0, fmt.Errorf("lookup: %w", err)
	}
	if !id.Valid {
		return entry{}, false, gen, nil
	}
	return entry{id: id.Int64, result: result, createdAt: created.Int64, durationMS: dur.Int64, stale: stale.Bool}, true, gen, nil
}

// writeTx runs fn in one IMMEDIATE transaction.
func (s *sqliteStore) writeTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
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

// currentGen reads t's generation inside tx.
func currentGen(ctx context.Context, tx *sql.Tx, t Tool) (int64, error) {
	gt, gs := genNames(t)
	var gen int64
	err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(gen), 0) FROM generations WHERE name IN (?1, ?2, '*')`, gt, gs).Scan(&gen)
	if err != nil {
		return 0, fmt.Errorf("read generation: %w", err)
	}
	return gen, nil
}

// upsert stores r, replacing an entry with the same key, and returns its id.
func upsert(ctx context.Context, tx *sql.Tx, r *record) (int64, error) {
	var (
		id                      int64
		bucket                  []byte
		embedder, text, vecDims any
	)
	if r.sem != nil && r.sem.vec != nil {
		bucket, embedder, text, vecDims = r.sem.bucket, r.sem.emb.ID(), r.sem.text, len(r.sem.vec)
	}
	// Replacing the result fires the vec_f<dims>_au trigger, which drops
	// the old vector; the caller stores the new one.
	err := tx.QueryRowContext(ctx, `
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
		RETURNING id`,
		r.key, r.tool.Name, r.tool.Server, r.scope, r.fingerprint, string(r.args), r.result, len(r.result),
		r.durationMS, r.createdAt, r.expiresAt, r.createdAt, bucket, embedder, text, vecDims,
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
		gen, column, value := patternGen(p)
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
func evictIfNeeded(ctx context.Context, tx *sql.Tx, b bounds, now, keep int64, beforeEvict func() error) (int64, error) {
	entries, size, err := readTotals(ctx, tx)
	if err != nil {
		return 0, err
	}
	if entries <= b.maxEntries && size <= b.maxBytes {
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
	lowEntries, lowBytes := b.maxEntries*9/10, b.maxBytes*9/10
	for {
		entries, size, err = readTotals(ctx, tx)
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

func readTotals(ctx context.Context, tx *sql.Tx) (entries, size int64, err error) {
	err = tx.QueryRowContext(ctx, `SELECT entries, bytes FROM totals WHERE id = 1`).Scan(&entries, &size)
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
func (s *sqliteStore) write(ctx context.Context, w *write) (int64, error) {
	rec := w.rec
	var storedID int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		if rec != nil {
			// An invalidation since the lookup means the result may predate it.
			cur, err := currentGen(ctx, tx, rec.tool)
			if err != nil {
				return err
			}
			if cur != w.gen {
				rec = nil
			}
		}
		if len(w.invals) > 0 {
			if _, err := invalidate(ctx, tx, w.invals); err != nil {
				return err
			}
		}
		if len(w.soft) > 0 {
			if err := markStale(ctx, tx, w.soft); err != nil {
				return err
			}
		}
		if err := writePending(ctx, tx, w.touches, w.tools); err != nil {
			return err
		}
		if w.purge {
			if _, err := purgeExpired(ctx, tx, w.now, purgeLimit); err != nil {
				return err
			}
		}
		if rec == nil {
			return nil
		}
		id, err := upsert(ctx, tx, rec)
		if err != nil {
			return err
		}
		storedID = id
		if rec.sem != nil {
			if err := s.storeVector(ctx, tx, id, rec.sem); err != nil {
				return err
			}
		}
		_, err = evictIfNeeded(ctx, tx, w.bounds, rec.createdAt, id, func() error {
			if w.beforeEvict == nil {
				return nil
			}
			touches, tools := w.beforeEvict()
			return writePending(ctx, tx, touches, tools)
		})
		return err
	})
	if err != nil {
		return 0, err
	}
	if rec != nil && rec.sem != nil {
		s.vecTables.Store(len(rec.sem.vec), true)
	}
	return storedID, nil
}

// clear deletes the entries of server and tool ("" = any).
func (s *sqliteStore) clear(ctx context.Context, server, tool string) (int64, error) {
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
