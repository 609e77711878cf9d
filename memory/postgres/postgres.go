package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/nexus-mcp/nexus/memory"
)

// pgLockClass is the first key of Nexus's advisory locks; the second is a
// hash of the schema, so deployments sharing a database do not contend.
const pgLockClass = "74101"

// pgChannel is the LISTEN/NOTIFY channel. Notifications are per database,
// so every payload starts with the schema it is about.
const pgChannel = "nexus_memory"

// Replica leases: every pgHeartbeat a replica's listener connection
// extends its row in nexus_memory_replicas to pgLeaseDB ahead on the
// database's clock, and its own hot-layer lease to pgLeaseLocal ahead of
// when it asked, so its own lease ends first even if the two clocks drift
// a little.
const (
	pgHeartbeat  = 500 * time.Millisecond
	pgLeaseDB    = 3 * time.Second
	pgLeaseLocal = 2 * time.Second
)

// pgNowMS is the database's clock in unix ms: leases and flight claims are
// compared on one clock, whatever the replicas' clocks say.
const pgNowMS = `(extract(epoch FROM clock_timestamp()) * 1000)::bigint`

// pgDownBackoff is how long a store that lost its database fails fast
// before trying again: an outage costs one failed connection a second, not
// one per call.
const pgDownBackoff = time.Second

// Store is the store in a PostgreSQL database shared by every gateway
// replica.
//
// Coherence: NOTIFY is asynchronous, so a notification alone could reach
// another replica after the invalidating call was answered, and that
// replica could serve a stale hot entry in between. So an invalidation
// bumps an epoch in the same transaction, and after committing, the
// invalidating replica waits (awaitAcks) until every live replica has
// acknowledged that epoch, which each does on its listener connection
// right after emptying its hot layer. A replica is live while its lease
// in nexus_memory_replicas (pgLeaseDB ahead, renewed every pgHeartbeat
// by the same connection that listens) runs; it serves hot hits without
// asking the database only while its own, shorter lease runs (hotValid),
// and otherwise reads the tool's generation on every hot hit. A replica that
// hangs or loses its connection thus stops serving from its hot layer
// before its row stops making invalidations wait for it: an invalidation
// costs a notification round trip (about a millisecond on a LAN), at
// worst pgLeaseDB when a replica died, and a hot hit costs nothing.
// Measured on loopback (tests/bench_replica_test.go), reading the
// generation on every hot hit instead made the hit p50 2.8x SQLite's.
//
// Single flight: a replica about to make a child call claims the key in
// nexus_memory_flights for Options.FlightLease, on the database's clock;
// a replica that finds it claimed waits for the entry (woken by a
// notification, polling in case one is lost) and claims it itself if the
// claim lapses or is released without an entry (a failure result, which
// is not stored).
//
// Stores and invalidations serialise on an advisory lock (shared for
// stores, exclusive for invalidations), so a result fetched before an
// invalidation is never stored after it.
type Store struct {
	pool   *pgxpool.Pool
	cfg    *pgxpool.Config
	desc   string // the DSN without its password
	owner  string // this store's name in nexus_memory_flights
	busyTO time.Duration
	log    *slog.Logger

	migrateMu sync.Mutex
	ready     atomic.Bool // schema checked and migrated

	downUntil atomic.Int64 // unix nanos: fail fast until then

	hot        atomic.Pointer[memory.Hot] // emptied by the listener on invalidation
	leaseUntil atomic.Int64               // unix nanos: hot hits need no check until then
	// beforeApply, when set (tests), runs before the listener applies an
	// invalidation: a test blocks it to play a replica that hangs.
	beforeApply atomic.Pointer[func()]

	// Set by the listener, taken by sync.
	moved, invalidated atomic.Bool
	wakeMu             sync.Mutex
	wake               chan struct{} // closed when a flight may have landed

	stopListen context.CancelFunc
	listenDone chan struct{}
}

var errPgDown = errors.New("postgres unreachable; retrying shortly")

// DSN is the memory.Backend of the PostgreSQL database of a connection
// string (a URL or key=value string, as libpq takes), shared by gateway
// replicas.
type DSN string

// Where returns the DSN without its password.
func (d DSN) Where() string { return redactDSN(string(d)) }

// Open prepares the store; see Open.
func (d DSN) Open(ctx context.Context, o memory.StoreOptions) (memory.Store, error) {
	s, err := Open(ctx, string(d), o.BusyTimeout, o.Logger)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return s, nil
}

var _ memory.Store = (*Store)(nil)

// Open prepares a pool for dsn. It does not connect: a database that is
// down when the gateway starts makes memory step aside until it comes up,
// and the schema is migrated at the first use that reaches the database.
// busy bounds how long one operation waits for the database.
func Open(ctx context.Context, dsn string, busy time.Duration, log *slog.Logger) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse dsn %s: %w", redactDSN(dsn), redactErr(err, dsn))
	}
	cfg.MaxConns = 16
	cfg.ConnConfig.ConnectTimeout = max(busy, time.Second)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pool %s: %w", redactDSN(dsn), redactErr(err, dsn))
	}
	var id [8]byte
	rand.Read(id[:])
	s := &Store{
		pool: pool, cfg: cfg, desc: redactDSN(dsn), owner: hex.EncodeToString(id[:]),
		busyTO: busy, log: log, wake: make(chan struct{}), listenDone: make(chan struct{}),
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.stopListen = cancel
	go s.listen(lctx)
	return s, nil
}

func (s *Store) Where() string { return s.desc }

// Local is false: the store is a database on the network.
func (s *Store) Local() bool { return false }

func (s *Store) Close() error {
	s.stopListen()
	<-s.listenDone
	// Invalidations stop waiting for this replica.
	ctx, cancel := context.WithTimeout(context.Background(), s.busyTO)
	s.pool.Exec(ctx, `DELETE FROM nexus_memory_replicas WHERE id = $1`, s.owner)
	cancel()
	s.pool.Close()
	return nil
}

// Watch gives the listener the hot layer to empty on invalidation. Sync
// sees another replica's commits only through notifications, so the
// similarity index catches up on every lookup (always).
func (s *Store) Watch(_ context.Context, h *memory.Hot) (bool, error) {
	s.hot.Store(h)
	return true, nil
}

// begin checks that the database is worth trying and its schema is
// current, and bounds the operation: a database that stopped answering
// must not hold a call longer than the busy timeout.
func (s *Store) begin(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if time.Now().UnixNano() < s.downUntil.Load() {
		return nil, nil, errPgDown
	}
	ctx, cancel := context.WithTimeout(ctx, 2*s.busyTO)
	if !s.ready.Load() {
		if err := s.migrate(ctx); err != nil {
			cancel()
			return nil, nil, s.failed(ctx, err)
		}
	}
	return ctx, cancel, nil
}

// failed records err: a connection failure (not an error the server
// reported) makes the store fail fast for pgDownBackoff.
func (s *Store) failed(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	serverSaid := errors.As(err, &pe)
	timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
	if timedOut || (!serverSaid && ctx.Err() == nil) {
		s.downUntil.Store(time.Now().Add(pgDownBackoff).UnixNano())
		s.ready.Store(false) // the database may come back empty
	}
	return err
}

func (s *Store) migrate(ctx context.Context) error {
	s.migrateMu.Lock()
	defer s.migrateMu.Unlock()
	if s.ready.Load() {
		return nil
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Release()
	if err := pgMigrate(ctx, conn.Conn()); err != nil {
		return err
	}
	s.ready.Store(true)
	return nil
}

// listen follows notifications on a connection of its own, reconnecting
// after a failure. A notification that may have been missed (while
// disconnected) counts as an invalidation: the hot layer empties and the
// index prunes, which costs reads, never correctness.
func (s *Store) listen(ctx context.Context) {
	defer close(s.listenDone)
	for ctx.Err() == nil {
		err := s.listenOnce(ctx)
		s.leaseUntil.Store(0)
		if ctx.Err() != nil {
			return
		}
		s.log.Debug("memory: postgres notifications interrupted; reconnecting", "store", s.desc, "err", err)
		s.moved.Store(true)
		s.invalidated.Store(true)
		s.signal()
		select {
		case <-ctx.Done():
			return
		case <-time.After(pgDownBackoff):
		}
	}
}

// listenOnce listens, registers this replica, and then applies and
// acknowledges invalidations and renews the lease until the connection
// fails or ctx ends.
func (s *Store) listenOnce(ctx context.Context) error {
	if !s.ready.Load() {
		if err := s.migrate(ctx); err != nil {
			return err
		}
	}
	conn, err := pgx.ConnectConfig(ctx, s.cfg.ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var schema string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `LISTEN `+pgChannel); err != nil {
		return err
	}
	// Register: invalidations checking from now on wait for this
	// replica. Those committed before are covered by emptying the hot
	// layer after registering.
	asked := time.Now()
	if _, err := conn.Exec(ctx, `INSERT INTO nexus_memory_replicas (id, acked, alive_until)
		SELECT $1, e, `+pgNowMS+` + $2 FROM nexus_memory_epoch
		ON CONFLICT (id) DO UPDATE SET acked = excluded.acked, alive_until = excluded.alive_until`,
		s.owner, pgLeaseDB.Milliseconds()); err != nil {
		return fmt.Errorf("register replica: %w", err)
	}
	s.applyInvalidation()
	s.leaseUntil.Store(asked.Add(pgLeaseLocal).UnixNano())
	// Rows of replicas gone for good.
	conn.Exec(ctx, `DELETE FROM nexus_memory_replicas WHERE alive_until < `+pgNowMS+` - 3600000`)

	prefix := schema + "|"
	next := asked.Add(pgHeartbeat)
	for {
		wctx, cancel := context.WithDeadline(ctx, next)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !pgconn.Timeout(err) {
			return err
		}
		if err != nil || !time.Now().Before(next) {
			asked := time.Now()
			tag, err := conn.Exec(ctx, `UPDATE nexus_memory_replicas SET alive_until = `+pgNowMS+` + $2 WHERE id = $1`,
				s.owner, pgLeaseDB.Milliseconds())
			if err != nil {
				return fmt.Errorf("renew lease: %w", err)
			}
			if tag.RowsAffected() == 0 {
				return errors.New("replica row gone; registering again")
			}
			s.leaseUntil.Store(asked.Add(pgLeaseLocal).UnixNano())
			next = asked.Add(pgHeartbeat)
		}
		if n == nil {
			continue
		}
		kind, ok := strings.CutPrefix(n.Payload, prefix)
		if !ok {
			continue // another deployment's schema
		}
		switch {
		case strings.HasPrefix(kind, "invalidate:"):
			epoch, err := strconv.ParseInt(strings.TrimPrefix(kind, "invalidate:"), 10, 64)
			if err != nil {
				continue
			}
			if hook := s.beforeApply.Load(); hook != nil {
				(*hook)()
			}
			s.applyInvalidation()
			if _, err := conn.Exec(ctx, `UPDATE nexus_memory_replicas SET acked = greatest(acked, $2) WHERE id = $1`, s.owner, epoch); err != nil {
				return fmt.Errorf("acknowledge invalidation: %w", err)
			}
		case kind == "store":
			s.moved.Store(true)
		}
		s.signal()
	}
}

// applyInvalidation empties the hot layer (reads in progress cannot put
// what they read: the reset changes its epoch) and marks the index.
func (s *Store) applyInvalidation() {
	if h := s.hot.Load(); h != nil {
		h.Reset()
	}
	s.moved.Store(true)
	s.invalidated.Store(true)
}

// awaitAcks waits until every live replica applied invalidation epoch e
// to its hot layer, or stopped being live. It gives up only when the
// database cannot be asked.
func (s *Store) awaitAcks(ctx context.Context, e int64) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pgLeaseDB+2*s.busyTO)
	defer cancel()
	poll := 200 * time.Microsecond
	for {
		var waiting int
		err := s.pool.QueryRow(ctx, `SELECT count(*) FROM nexus_memory_replicas WHERE acked < $1 AND alive_until > `+pgNowMS, e).Scan(&waiting)
		if err != nil {
			return s.failed(ctx, fmt.Errorf("wait for replicas to apply invalidation %d: %w", e, err))
		}
		if waiting == 0 {
			return nil
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("wait for replicas to apply invalidation %d: %w", e, ctx.Err())
		case <-t.C:
		}
		poll = min(2*poll, 10*time.Millisecond)
	}
}

// signal wakes the followers waiting for another replica's flight.
func (s *Store) signal() {
	s.wakeMu.Lock()
	close(s.wake)
	s.wake = make(chan struct{})
	s.wakeMu.Unlock()
}

func (s *Store) FlightDone() <-chan struct{} {
	s.wakeMu.Lock()
	defer s.wakeMu.Unlock()
	return s.wake
}

func (s *Store) Sync(_ context.Context, h *memory.Hot) (memory.Look, error) {
	var l memory.Look
	if h != nil {
		l.Epoch = h.Epoch()
	}
	if s.invalidated.Swap(false) {
		l.Invalidated, l.Moved = true, true // the listener emptied h
	}
	if s.moved.Swap(false) {
		l.Moved = true
	}
	return l, nil
}

const pgGenQuery = `SELECT coalesce(sum(gen), 0)::bigint FROM nexus_memory_generations WHERE name IN ($1, $2, '*')`

func (s *Store) HotValid(ctx context.Context, t memory.Tool, gen int64) (bool, error) {
	if time.Now().UnixNano() < s.leaseUntil.Load() {
		// Every invalidation answered so far was applied to h.
		return true, nil
	}
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return false, err
	}
	defer cancel()
	gt, gs := memory.GenNames(t)
	var cur int64
	if err := s.pool.QueryRow(ctx, pgGenQuery, gt, gs).Scan(&cur); err != nil {
		return false, s.failed(ctx, fmt.Errorf("read generation: %w", err))
	}
	return cur == gen, nil
}

func (s *Store) Lookup(ctx context.Context, t memory.Tool, key []byte) (memory.Entry, bool, int64, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return memory.Entry{}, false, 0, err
	}
	defer cancel()
	gt, gs := memory.GenNames(t)
	var (
		gen              int64
		id, created, dur *int64
		result           []byte
		stale            *bool
	)
	err = s.pool.QueryRow(ctx, `
		SELECT g.gen, e.id, e.result, e.created_at, e.duration_ms, e.stale
		FROM (`+pgGenQuery+`) AS g (gen)
		LEFT JOIN nexus_memory_entries AS e ON e.key = $3`, gt, gs, key).Scan(&gen, &id, &result, &created, &dur, &stale)
	if err != nil {
		return memory.Entry{}, false, 0, s.failed(ctx, fmt.Errorf("lookup: %w", err))
	}
	if id == nil {
		return memory.Entry{}, false, gen, nil
	}
	return memory.Entry{ID: *id, Result: result, CreatedAt: *created, DurationMS: *dur, Stale: stale != nil && *stale}, true, gen, nil
}

// tx runs fn in one transaction.
func (s *Store) tx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.failed(ctx, fmt.Errorf("begin: %w", err))
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := fn(tx); err != nil {
		return s.failed(ctx, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return s.failed(ctx, fmt.Errorf("commit: %w", err))
	}
	return nil
}

// lockGens takes the generations lock: shared to store (several stores
// may run at once), exclusive to invalidate (no store in between its
// generation check and its commit).
func lockGens(ctx context.Context, tx pgx.Tx, exclusive bool) error {
	fn := "pg_advisory_xact_lock_shared"
	if exclusive {
		fn = "pg_advisory_xact_lock"
	}
	if _, err := tx.Exec(ctx, `SELECT `+fn+`(`+pgLockClass+`, hashtext(current_schema()))`); err != nil {
		return fmt.Errorf("lock generations: %w", err)
	}
	return nil
}

func (s *Store) Write(ctx context.Context, w *memory.Write) (int64, error) {
	rec := w.Record
	var storedID, epoch int64
	err := s.tx(ctx, func(tx pgx.Tx) error {
		invalidates := len(w.Invalidate) > 0 || len(w.Soft) > 0
		if rec != nil || invalidates {
			if err := lockGens(ctx, tx, invalidates); err != nil {
				return err
			}
		}
		if rec != nil {
			gt, gs := memory.GenNames(rec.Tool)
			var cur int64
			if err := tx.QueryRow(ctx, pgGenQuery, gt, gs).Scan(&cur); err != nil {
				return fmt.Errorf("read generation: %w", err)
			}
			if cur != w.Gen {
				rec = nil
			}
		}
		for _, p := range w.Invalidate {
			if err := pgInvalidate(ctx, tx, p); err != nil {
				return err
			}
		}
		for _, p := range w.Soft {
			if err := pgMarkStale(ctx, tx, p); err != nil {
				return err
			}
		}
		if invalidates {
			e, err := s.bumpEpoch(ctx, tx)
			if err != nil {
				return err
			}
			epoch = e
		}
		if err := pgWritePending(ctx, tx, w.Touches, w.Tools); err != nil {
			return err
		}
		for _, r := range w.Refuted {
			if _, err := tx.Exec(ctx, `INSERT INTO nexus_memory_refuted (tool, asked, stored, rewrites, refuted_at)
				VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`, r.Tool, r.Asked, r.Stored, strings.Join(r.Rewrites, " "), r.At); err != nil {
				return fmt.Errorf("keep refuted pair of %q: %w", r.Tool, err)
			}
		}
		if w.Purge {
			if _, err := tx.Exec(ctx, `DELETE FROM nexus_memory_entries WHERE id IN (
				SELECT id FROM nexus_memory_entries WHERE expires_at <= $1 LIMIT $2)`, w.Now, memory.PurgeLimit); err != nil {
				return fmt.Errorf("purge expired: %w", err)
			}
		}
		if rec == nil {
			return nil
		}
		id, err := pgUpsert(ctx, tx, rec)
		if err != nil {
			return err
		}
		storedID = id
		if err := s.notify(ctx, tx, "store"); err != nil {
			return err
		}
		return pgEvictIfNeeded(ctx, tx, w, id)
	})
	if err != nil {
		return 0, err
	}
	if epoch > 0 {
		s.confirm(ctx, epoch)
	}
	return storedID, nil
}

// bumpEpoch counts an invalidation and tells the replicas, when tx
// commits, to apply it; the caller then waits for them (awaitAcks).
func (s *Store) bumpEpoch(ctx context.Context, tx pgx.Tx) (int64, error) {
	var e int64
	if err := tx.QueryRow(ctx, `UPDATE nexus_memory_epoch SET e = e + 1 WHERE id = 1 RETURNING e`).Scan(&e); err != nil {
		return 0, fmt.Errorf("bump epoch: %w", err)
	}
	return e, s.notify(ctx, tx, "invalidate:"+strconv.FormatInt(e, 10))
}

// notify tells the other replicas, when tx commits, that kind happened.
func (s *Store) notify(ctx context.Context, tx pgx.Tx, kind string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, current_schema() || '|' || $2)`, pgChannel, kind); err != nil {
		return fmt.Errorf("notify %s: %w", kind, err)
	}
	return nil
}

func pgInvalidate(ctx context.Context, tx pgx.Tx, p string) error {
	gen, column, value := memory.PatternGen(p)
	var err error
	if column == "" {
		_, err = tx.Exec(ctx, `DELETE FROM nexus_memory_entries`)
	} else {
		_, err = tx.Exec(ctx, `DELETE FROM nexus_memory_entries WHERE `+column+` = $1`, value)
	}
	if err != nil {
		return fmt.Errorf("invalidate %q: %w", p, err)
	}
	return pgBumpGen(ctx, tx, gen)
}

// pgMarkStale is markStale for PostgreSQL.
func pgMarkStale(ctx context.Context, tx pgx.Tx, p string) error {
	gen, column, value := memory.PatternGen(p)
	var err error
	if column == "" {
		_, err = tx.Exec(ctx, `UPDATE nexus_memory_entries SET stale = true WHERE NOT stale`)
	} else {
		_, err = tx.Exec(ctx, `UPDATE nexus_memory_entries SET stale = true WHERE NOT stale AND `+column+` = $1`, value)
	}
	if err != nil {
		return fmt.Errorf("mark %q stale: %w", p, err)
	}
	return pgBumpGen(ctx, tx, gen)
}

func pgBumpGen(ctx context.Context, tx pgx.Tx, name string) error {
	_, err := tx.Exec(ctx, `INSERT INTO nexus_memory_generations (name, gen) VALUES ($1, 1)
		ON CONFLICT (name) DO UPDATE SET gen = nexus_memory_generations.gen + 1`, name)
	if err != nil {
		return fmt.Errorf("bump generation %q: %w", name, err)
	}
	return nil
}

func pgUpsert(ctx context.Context, tx pgx.Tx, r *memory.Record) (int64, error) {
	var (
		bucket, vec    []byte
		embedder, text *string
		dims           *int
		part           *int64
		expires        *int64
		emb, txt       string
		nDims          int
		nPart          int64
		hasVec         = r.Text != nil && r.Text.Vec != nil
	)
	if hasVec {
		emb, txt, nDims, nPart = r.Text.Embedder.ID(), r.Text.Text, len(r.Text.Vec), r.Text.Part
		bucket, embedder, text, dims, part, vec = r.Text.Bucket, &emb, &txt, &nDims, &nPart, memory.EncodeVector(r.Text.Vec)
	}
	if r.ExpiresAt.Valid {
		expires = &r.ExpiresAt.Int64
	}
	var id int64
	err := tx.QueryRow(ctx, `
		INSERT INTO nexus_memory_entries (key, tool, server, scope, fingerprint, args, result, size,
			duration_ms, created_at, expires_at, last_used_at, hits,
			bucket, embedder, free_text, vec_dims, part, vec)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $10, 0, $12, $13, $14, $15, $16, $17)
		ON CONFLICT (key) DO UPDATE SET
			result = excluded.result, size = excluded.size,
			duration_ms = excluded.duration_ms, created_at = excluded.created_at,
			expires_at = excluded.expires_at, last_used_at = excluded.last_used_at,
			stale = false, bucket = excluded.bucket, embedder = excluded.embedder,
			free_text = excluded.free_text, vec_dims = excluded.vec_dims,
			part = excluded.part, vec = excluded.vec, xid = excluded.xid
		RETURNING id`,
		r.Key, r.Tool.Name, r.Tool.Server, r.Scope, r.Fingerprint, string(r.Args), r.Result, len(r.Result),
		r.DurationMS, r.CreatedAt, expires, bucket, embedder, text, dims, part, vec,
	).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("store entry: %w", err)
	}
	return id, nil
}

// pgEvictIfNeeded keeps the store within w.bounds, like evictIfNeeded.
func pgEvictIfNeeded(ctx context.Context, tx pgx.Tx, w *memory.Write, keep int64) error {
	var entries, size int64
	read := func() error {
		if err := tx.QueryRow(ctx, `SELECT entries, bytes FROM nexus_memory_totals WHERE id = 1`).Scan(&entries, &size); err != nil {
			return fmt.Errorf("read totals: %w", err)
		}
		return nil
	}
	if err := read(); err != nil {
		return err
	}
	b := w.Bounds
	if entries <= b.MaxEntries && size <= b.MaxBytes {
		return nil
	}
	if w.BeforeEvict != nil {
		touches, tools := w.BeforeEvict()
		if err := pgWritePending(ctx, tx, touches, tools); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, `DELETE FROM nexus_memory_entries WHERE id IN (
		SELECT id FROM nexus_memory_entries WHERE expires_at <= $1 AND id <> $2 LIMIT $3)`, w.Now, keep, max(entries/10, 64)); err != nil {
		return fmt.Errorf("evict expired: %w", err)
	}
	lowEntries, lowBytes := b.MaxEntries*9/10, b.MaxBytes*9/10
	for {
		if err := read(); err != nil {
			return err
		}
		var k int64
		switch {
		case entries > lowEntries && entries > 1:
			k = entries - lowEntries
		case size > lowBytes && entries > 1:
			k = max((size-lowBytes)/max(size/entries, 1), 1)
		default:
			return nil
		}
		tag, err := tx.Exec(ctx, `DELETE FROM nexus_memory_entries WHERE id IN (
			SELECT id FROM nexus_memory_entries WHERE id <> $1 ORDER BY last_used_at, id LIMIT $2)`, keep, k)
		if err != nil {
			return fmt.Errorf("evict least recently used: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return nil
		}
	}
}

// pgWritePending writes batched recency and counters in one round trip.
func pgWritePending(ctx context.Context, tx pgx.Tx, touches map[int64]memory.Touch, tools map[string]*memory.Counters) error {
	if len(touches) == 0 && len(tools) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, id := range slices.Sorted(maps.Keys(touches)) {
		t := touches[id]
		b.Queue(`UPDATE nexus_memory_entries SET last_used_at = greatest(last_used_at, $1), hits = hits + $2 WHERE id = $3`, t.LastUsed, t.Hits, id)
	}
	for _, name := range slices.Sorted(maps.Keys(tools)) {
		c := tools[name]
		b.Queue(`
			INSERT INTO nexus_memory_tool_stats AS t (tool, server, hits, misses, bypasses, coalesced, saved_ms,
				semantic_hits, gray_accepted, gray_rejected, gray_unverified, guard_rejections, embed_failures,
				semantic_checks, false_hits, exact_checks, stale_answers)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
			ON CONFLICT (tool) DO UPDATE SET server = excluded.server,
				hits = t.hits + excluded.hits, misses = t.misses + excluded.misses,
				bypasses = t.bypasses + excluded.bypasses, coalesced = t.coalesced + excluded.coalesced,
				saved_ms = t.saved_ms + excluded.saved_ms,
				semantic_hits = t.semantic_hits + excluded.semantic_hits,
				gray_accepted = t.gray_accepted + excluded.gray_accepted,
				gray_rejected = t.gray_rejected + excluded.gray_rejected,
				gray_unverified = t.gray_unverified + excluded.gray_unverified,
				guard_rejections = t.guard_rejections + excluded.guard_rejections,
				embed_failures = t.embed_failures + excluded.embed_failures,
				semantic_checks = t.semantic_checks + excluded.semantic_checks,
				false_hits = t.false_hits + excluded.false_hits,
				exact_checks = t.exact_checks + excluded.exact_checks,
				stale_answers = t.stale_answers + excluded.stale_answers`,
			name, c.Server, c.Hits, c.Misses, c.Bypasses, c.Coalesced, c.SavedMS,
			c.SemanticHits, c.GrayAccepted, c.GrayRejected, c.GrayUnverified, c.GuardRejections, c.EmbedFailures,
			c.SemanticChecks, c.FalseHits, c.ExactChecks, c.Stale)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("write counters: %w", err)
	}
	return nil
}

func (s *Store) Clear(ctx context.Context, server, tool string) (int64, error) {
	var n, epoch int64
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if err := lockGens(ctx, tx, true); err != nil {
			return err
		}
		var (
			tag pgconn.CommandTag
			err error
			gen string
		)
		switch {
		case tool != "" && server != "":
			gen = "tool:" + tool
			tag, err = tx.Exec(ctx, `DELETE FROM nexus_memory_entries WHERE tool = $1 AND server = $2`, tool, server)
		case tool != "":
			gen = "tool:" + tool
			tag, err = tx.Exec(ctx, `DELETE FROM nexus_memory_entries WHERE tool = $1`, tool)
		case server != "":
			gen = "server:" + server
			tag, err = tx.Exec(ctx, `DELETE FROM nexus_memory_entries WHERE server = $1`, server)
		default:
			gen = "*"
			tag, err = tx.Exec(ctx, `DELETE FROM nexus_memory_entries`)
		}
		if err != nil {
			return fmt.Errorf("clear: %w", err)
		}
		n = tag.RowsAffected()
		if err := pgBumpGen(ctx, tx, gen); err != nil {
			return err
		}
		epoch, err = s.bumpEpoch(ctx, tx)
		return err
	})
	if err != nil {
		return 0, err
	}
	s.confirm(ctx, epoch)
	return n, nil
}

// confirm waits for the replicas to apply invalidation epoch, which is
// committed whatever happens here. If the database cannot be asked, the
// failure is logged: replicas that cannot reach it either stop trusting
// their hot layers within pgLeaseLocal, the others get the notification.
func (s *Store) confirm(ctx context.Context, epoch int64) {
	if err := s.awaitAcks(ctx, epoch); err != nil {
		s.log.Warn("memory: invalidation committed, but not confirmed by every replica", "store", s.desc, "err", err)
	}
}

// claim takes key in nexus_memory_flights unless another replica holds an unexpired
// claim on it, and says whether the entry under key changed since the
// caller's lookup (a leader that finished between the two).
func (s *Store) Claim(ctx context.Context, key []byte, lease time.Duration, seen int64) (bool, bool, func(), error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return false, false, nil, err
	}
	defer cancel()
	var stored int64
	err = s.pool.QueryRow(ctx, `
		WITH now AS (SELECT `+pgNowMS+` AS ms)
		INSERT INTO nexus_memory_flights AS f (key, owner, until_ms) SELECT $1, $2, ms + $3 FROM now
		ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, until_ms = excluded.until_ms
			WHERE f.until_ms < (SELECT ms FROM now)
		RETURNING coalesce((SELECT created_at FROM nexus_memory_entries WHERE key = $1), -1)`,
		key, s.owner, lease.Milliseconds()).Scan(&stored)
	if err == pgx.ErrNoRows {
		return false, false, nil, nil
	}
	if err != nil {
		return false, false, nil, s.failed(ctx, fmt.Errorf("claim flight: %w", err))
	}
	release := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*s.busyTO)
		defer cancel()
		_, err := s.pool.Exec(ctx, `
			WITH gone AS (DELETE FROM nexus_memory_flights WHERE key = $1 AND owner = $2)
			SELECT pg_notify($3, current_schema() || '|flight')`, key, s.owner, pgChannel)
		if err != nil {
			// The claim lapses at its deadline; followers wait until then.
			s.log.Debug("memory: flight not released", "store", s.desc, "err", err)
		}
	}
	return true, stored != seen, release, nil
}

// vectorsSince reads the vectors written by transactions from cursor on.
// Ids are not a cursor here (a transaction may commit a lower id after a
// higher one), so the cursor is the oldest transaction still running at
// the last read: everything older was visible to it, everything from it
// on is read again (add replaces).
func (s *Store) VectorsSince(ctx context.Context, cursor int64, add func(id, part int64, vec []float32)) (int64, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return cursor, err
	}
	defer cancel()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return cursor, s.failed(ctx, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var next int64
	if err := tx.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint`).Scan(&next); err != nil {
		return cursor, s.failed(ctx, err)
	}
	rows, err := tx.Query(ctx, `SELECT id, part, vec, vec_dims FROM nexus_memory_entries WHERE xid >= $1 AND vec IS NOT NULL`, cursor)
	if err != nil {
		return cursor, s.failed(ctx, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id, part int64
			blob     []byte
			dims     int
		)
		if err := rows.Scan(&id, &part, &blob, &dims); err != nil {
			return cursor, err
		}
		if v := memory.DecodeVector(blob); len(v) == dims {
			add(id, part, v)
		}
	}
	if err := rows.Err(); err != nil {
		return cursor, s.failed(ctx, err)
	}
	return next, nil
}

func (s *Store) LiveVectorIDs(ctx context.Context) (map[int64]bool, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT id FROM nexus_memory_entries WHERE vec IS NOT NULL`)
	if err != nil {
		return nil, s.failed(ctx, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, s.failed(ctx, err)
	}
	live := make(map[int64]bool, len(ids))
	for _, id := range ids {
		live[id] = true
	}
	return live, nil
}

func (s *Store) Candidates(ctx context.Context, ids []int64) ([]memory.StoredCandidate, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT id, result, created_at, duration_ms, stale, coalesce(free_text, ''), bucket,
		coalesce(embedder, ''), coalesce(vec_dims, 0) FROM nexus_memory_entries WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, s.failed(ctx, err)
	}
	defer rows.Close()
	var out []memory.StoredCandidate
	for rows.Next() {
		var cd memory.StoredCandidate
		if err := rows.Scan(&cd.ID, &cd.Result, &cd.CreatedAt, &cd.DurationMS, &cd.Stale, &cd.Text, &cd.Bucket, &cd.Embedder, &cd.Dims); err != nil {
			return nil, err
		}
		out = append(out, cd)
	}
	return out, s.failed(ctx, rows.Err())
}

// scanNeighbours compares sc.vec with every vector of its bucket, in Go
// (there is no vector extension to ask): used only until the index is
// built.
func (s *Store) ScanNeighbours(ctx context.Context, sc *memory.FreeText, k int) ([]memory.Candidate, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT id, vec, result, created_at, duration_ms, free_text, stale FROM nexus_memory_entries
		WHERE part = $1 AND bucket = $2 AND embedder = $3 AND vec_dims = $4`, sc.Part, sc.Bucket, sc.Embedder.ID(), len(sc.Vec))
	if err != nil {
		return nil, s.failed(ctx, err)
	}
	defer rows.Close()
	var out []memory.Candidate
	for rows.Next() {
		var (
			cd   memory.Candidate
			blob []byte
		)
		if err := rows.Scan(&cd.ID, &blob, &cd.Result, &cd.CreatedAt, &cd.DurationMS, &cd.Text, &cd.Stale); err != nil {
			return nil, err
		}
		v := memory.DecodeVector(blob)
		if len(v) != len(sc.Vec) {
			continue
		}
		var dot float64
		for i := range v {
			dot += float64(v[i]) * float64(sc.Vec[i])
		}
		cd.Similarity = dot
		out = append(out, cd)
	}
	if err := rows.Err(); err != nil {
		return nil, s.failed(ctx, err)
	}
	memory.SortCandidates(out)
	return out[:min(k, len(out))], nil
}

func (s *Store) Stats(ctx context.Context) ([]memory.ToolStats, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT coalesce(e.tool, t.tool), coalesce(e.server, t.server), coalesce(e.n, 0), coalesce(e.b, 0),
			coalesce(t.hits, 0), coalesce(t.misses, 0), coalesce(t.bypasses, 0), coalesce(t.coalesced, 0),
			coalesce(t.saved_ms, 0), coalesce(t.semantic_hits, 0), coalesce(t.gray_accepted, 0),
			coalesce(t.gray_rejected, 0), coalesce(t.gray_unverified, 0), coalesce(t.guard_rejections, 0),
			coalesce(t.embed_failures, 0), coalesce(t.semantic_checks, 0), coalesce(t.false_hits, 0),
			coalesce(t.exact_checks, 0), coalesce(t.stale_answers, 0)
		FROM (SELECT tool, min(server) AS server, count(*) AS n, sum(size)::bigint AS b FROM nexus_memory_entries GROUP BY tool) AS e
		FULL JOIN nexus_memory_tool_stats AS t ON t.tool = e.tool`)
	if err != nil {
		return nil, s.failed(ctx, err)
	}
	defer rows.Close()
	var out []memory.ToolStats
	for rows.Next() {
		var ts memory.ToolStats
		var c memory.Counters
		if err := rows.Scan(&ts.Tool, &ts.Server, &ts.Entries, &ts.Bytes, &c.Hits, &c.Misses, &c.Bypasses, &c.Coalesced,
			&c.SavedMS, &c.SemanticHits, &c.GrayAccepted, &c.GrayRejected, &c.GrayUnverified, &c.GuardRejections, &c.EmbedFailures,
			&c.SemanticChecks, &c.FalseHits, &c.ExactChecks, &c.Stale); err != nil {
			return nil, err
		}
		ts.Hits, ts.Misses, ts.Bypasses, ts.Coalesced, ts.SavedMS = c.Hits, c.Misses, c.Bypasses, c.Coalesced, c.SavedMS
		ts.Similarity = c.Similarity()
		ts.Verified = c.Verified
		out = append(out, ts)
	}
	return out, s.failed(ctx, rows.Err())
}

func (s *Store) Refuted(ctx context.Context, tool, asked, stored string) (bool, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return false, err
	}
	defer cancel()
	var refuted bool
	err = s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM nexus_memory_refuted WHERE tool = $1 AND asked = $2 AND stored = $3)`,
		tool, asked, stored).Scan(&refuted)
	if err != nil {
		return false, s.failed(ctx, err)
	}
	return refuted, nil
}

func (s *Store) Refutations(ctx context.Context) ([]memory.Refutation, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT tool, asked, stored, rewrites, refuted_at FROM nexus_memory_refuted
		ORDER BY refuted_at, tool, asked, stored`)
	if err != nil {
		return nil, s.failed(ctx, err)
	}
	defer rows.Close()
	var out []memory.Refutation
	for rows.Next() {
		var r memory.Refutation
		var rewrites string
		if err := rows.Scan(&r.Tool, &r.Asked, &r.Stored, &rewrites, &r.At); err != nil {
			return nil, fmt.Errorf("read refuted pairs: %w", err)
		}
		r.Rewrites = strings.Fields(rewrites)
		out = append(out, r)
	}
	return out, s.failed(ctx, rows.Err())
}

func (s *Store) List(ctx context.Context, limit int) ([]memory.EntryInfo, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := s.pool.Query(ctx, `
		SELECT id, tool, server, scope, fingerprint, args, size, duration_ms,
			created_at, expires_at, last_used_at, hits, coalesce(free_text, ''), coalesce(embedder, '')
		FROM nexus_memory_entries ORDER BY last_used_at DESC, id DESC LIMIT $1`, lim)
	if err != nil {
		return nil, s.failed(ctx, err)
	}
	defer rows.Close()
	var out []memory.EntryInfo
	for rows.Next() {
		var (
			e                 memory.EntryInfo
			args              string
			created, lastUsed int64
			expires           *int64
		)
		if err := rows.Scan(&e.ID, &e.Tool, &e.Server, &e.Scope, &e.Fingerprint, &args, &e.Size,
			&e.DurationMS, &created, &expires, &lastUsed, &e.Hits, &e.Text, &e.Embedder); err != nil {
			return nil, err
		}
		e.Args = []byte(args)
		e.CreatedAt = time.UnixMilli(created)
		e.LastUsedAt = time.UnixMilli(lastUsed)
		if expires != nil {
			t := time.UnixMilli(*expires)
			e.ExpiresAt = &t
		}
		out = append(out, e)
	}
	return out, s.failed(ctx, rows.Err())
}

// busy reports a deadlock or lock timeout between replicas.
func (s *Store) Busy(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "55P03")
}

var dsnPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// redactDSN returns dsn without its password, for logs and stats.
func redactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	return dsnPassword.ReplaceAllString(dsn, "${1}xxxxx")
}

// redactErr keeps a password out of a DSN parse error.
func redactErr(err error, dsn string) error {
	if u, perr := url.Parse(dsn); perr == nil {
		if p, ok := u.User.Password(); ok && p != "" {
			return errors.New(strings.ReplaceAll(err.Error(), p, "xxxxx"))
		}
	}
	return err
}
