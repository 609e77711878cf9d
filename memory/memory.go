package memory

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nexus-mcp/nexus/memory/embedder"
)

// MetaKey is the key of the cache report memory adds to a result's _meta:
// {"status": "hit"|"miss"|"bypass", "age_ms": N (hits only)}; followers of
// an identical call in flight also carry "coalesced": true. A similarity
// hit says {"status": "semantic_hit", "similarity": S, "matched": TEXT,
// "age_ms": N} (see StatusSemanticHit).
const MetaKey = "nexus/cache"

// Cache statuses reported under MetaKey.
const (
	StatusHit    = "hit"
	StatusMiss   = "miss"
	StatusBypass = "bypass"
	// StatusStale marks an answer served because the child failed: an
	// expired entry younger than the tool's stale-if-error window, with
	// "age_ms" and the failure under "error".
	StatusStale = "stale"
)

// Defaults for zero Options fields.
const (
	DefaultMaxEntries     = 10000
	DefaultMaxBytes       = 256 << 20
	DefaultMaxResultBytes = 1 << 20
	DefaultBusyTimeout    = time.Second
	DefaultFlushInterval  = time.Second
	DefaultFlightLease    = 30 * time.Second
)

// indexRetry is how often building the similarity index is tried again
// after it failed.
const indexRetry = 5 * time.Second

// writeBackoff is how long stores are skipped after one found the database
// locked, so a lock held elsewhere delays one call, not every call.
const writeBackoff = 5 * time.Second

// Options configure Open.
type Options struct {
	// Backend is the database memory keeps its entries in: the SQLite
	// file every local process shares (memory/sqlite) or a PostgreSQL
	// database every replica shares (memory/postgres). Required.
	Backend Backend

	MaxEntries     int                 // 0: DefaultMaxEntries
	MaxBytes       int64               // 0: DefaultMaxBytes (sum of stored result sizes)
	MaxResultBytes int                 // 0: DefaultMaxResultBytes; larger results are not stored
	Logger         *slog.Logger        // nil: discard
	Now            func() time.Time    // nil: time.Now; drives TTLs and ages
	Redact         func([]byte) []byte // applied to result JSON (and the displayed args) before they are stored; nil: none
	// RedactText is applied to the free text of a call before it is
	// embedded (an HTTP embedder sends it away) and stored for
	// similarity hits; the gateway passes secrets.Redactor.String. nil:
	// Redact applied to the text's bytes. When Redact is nil, RedactText
	// also stands in for it on results and arguments.
	RedactText func(string) string

	// BusyTimeout bounds how long one database operation waits for a lock
	// held by another process. 0: DefaultBusyTimeout.
	BusyTimeout time.Duration
	// FlushInterval is how often batched hit counters and last-used times
	// are written. 0: DefaultFlushInterval.
	FlushInterval time.Duration
	// HotBytes bounds the in-process hot layer in front of the store (see
	// hot.go): 0 means DefaultHotBytes, a negative value turns it off.
	HotBytes int64
	// FlightLease bounds how long replicas sharing PostgreSQL wait for
	// the one of them that makes a child call before making it
	// themselves (a replica that died mid-call). 0: DefaultFlightLease.
	FlightLease time.Duration

	// Embedder makes the vectors of free-text arguments for similarity
	// hits. nil: the built-in embedder.Lexical. (Settings.SemanticOff
	// turns similarity off.)
	Embedder embedder.Embedder
	// Verifier decides gray-zone matches (similarity between
	// Thresholds.Verify and Thresholds.Serve). nil: they are misses.
	Verifier Verifier
	// Thresholds override DefaultThresholds(Embedder.Identity()). nil: the
	// calibrated defaults.
	Thresholds *Thresholds
}

// Tool is what memory needs of a tool: canonical name, server, and its
// EFFECTIVE annotations (the child's, overridden by the operator's).
type Tool struct {
	Name      string // canonical name shown to agents: "server.tool"
	Server    string // the child server that owns the tool
	Annotated bool   // the child (or the operator) gave annotations at all

	ReadOnly, Idempotent, Destructive bool

	// InputSchema is the child's inputSchema of the tool, raw. Memory
	// reads it (once per schema) to find free-text arguments; nil means
	// none unless Settings.Semantic names them.
	InputSchema json.RawMessage
}

// Memory is the exact-argument cache of tool results. Its methods are safe
// for concurrent use. A nil *Memory is "memory off": Call forwards without
// touching the result, InvalidateServer does nothing.
type Memory struct {
	opts      Options
	log       *slog.Logger
	now       func() time.Time
	bounds    Bounds
	maxResult int

	st       Store // nil when disabled
	disabled error // why memory steps aside for every call, or nil

	hot *Hot       // nil when off
	vi  indexState // vi.idx nil: no index
	// stopIndex ends the index build; indexDone is closed when it ended.
	stopIndex context.CancelFunc
	indexDone chan struct{}

	rules   atomic.Pointer[rules]
	flights flightGroup
	pend    pending

	writeBlockedUntil atomic.Int64 // unix nanos, real clock
	// remoteWaiters counts calls waiting for another process's identical
	// call (see claimFlight); tests read it to know they are waiting.
	remoteWaiters atomic.Int64

	// stale holds invalidations that could not be written; until one lands,
	// tools it matches bypass memory in this process.
	staleMu  sync.Mutex
	stale    []string
	hasStale atomic.Bool

	logMu   sync.Mutex
	lastLog map[string]time.Time

	lastPurge atomic.Int64 // unix nanos, real clock

	emb                embedder.Embedder
	ver                Verifier
	thresholds         *Thresholds // nil: DefaultThresholds of the embedder
	fields             schemaFields
	makers             makers       // who stored recent entries, for Rewording
	meas               measurements // what verification found (Settings.Verify)
	embedBlockedUntil  atomic.Int64 // unix nanos, real clock
	verifyBlockedUntil atomic.Int64

	stop      chan struct{}
	loopDone  chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating if needed) the store of opts.Backend and migrates
// its schema.
//
// Open fails only when opts.Backend is nil or opts.Thresholds are out of
// range (0 <= Verify <= Serve <= 1). A store that cannot be used (a file
// that is not a database, corrupt header, unreadable, newer schema, locked
// during migration, a DSN that cannot be parsed) yields a working *Memory
// that steps aside: every call is forwarded and marked "bypass", the
// reason is logged and reported by Err and Stats. A gateway therefore
// never fails to start because of its cache. A PostgreSQL database that is
// down is not an error: memory steps aside until it answers. Moving the
// SQLite file aside (or deleting it with its -wal and -shm files) resets
// memory.
func Open(ctx context.Context, opts Options) (*Memory, error) {
	if opts.Backend == nil {
		return nil, errors.New("memory: Options.Backend is nil")
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.MaxResultBytes <= 0 {
		opts.MaxResultBytes = DefaultMaxResultBytes
	}
	if int64(opts.MaxResultBytes) > opts.MaxBytes {
		opts.MaxResultBytes = int(opts.MaxBytes)
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = DefaultBusyTimeout
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = DefaultFlushInterval
	}
	if opts.FlightLease <= 0 {
		opts.FlightLease = DefaultFlightLease
	}
	m := &Memory{
		opts:      opts,
		log:       opts.Logger,
		now:       opts.Now,
		bounds:    Bounds{MaxEntries: int64(opts.MaxEntries), MaxBytes: opts.MaxBytes},
		maxResult: opts.MaxResultBytes,
		lastLog:   make(map[string]time.Time),
		stop:      make(chan struct{}),
		loopDone:  make(chan struct{}),
	}
	if m.log == nil {
		m.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if m.now == nil {
		m.now = time.Now
	}
	m.emb, m.ver = opts.Embedder, opts.Verifier
	if m.emb == nil {
		m.emb = embedder.NewLexical()
	}
	if th := opts.Thresholds; th != nil {
		if err := th.Validate(); err != nil {
			return nil, err
		}
		c := *th
		if c.Verify == 0 {
			c.Verify = c.Serve // no gray zone
		}
		m.thresholds = &c
	}
	m.rules.Store(newRules(Settings{}))
	m.openStore(ctx)
	if m.st == nil {
		close(m.loopDone)
		return m, nil
	}
	go m.loop()
	return m, nil
}

// openStore opens the store of opts.Backend and has it watch the hot
// layer. A store that cannot watch gets neither hot layer nor index: each
// lookup reads the store.
func (m *Memory) openStore(ctx context.Context) {
	b := m.opts.Backend
	st, err := b.Open(ctx, StoreOptions{BusyTimeout: m.opts.BusyTimeout, Logger: m.log})
	if err != nil {
		m.disabled = fmt.Errorf("memory: %w", err)
		m.log.Warn("memory disabled: calls are forwarded uncached", "store", b.Where(), "err", err)
		return
	}
	m.st = st
	m.loadMeasured(ctx)
	if m.opts.HotBytes == 0 {
		m.opts.HotBytes = DefaultHotBytes
	}
	if m.opts.HotBytes > 0 {
		m.hot = newHot(m.opts.HotBytes)
	}
	always, err := st.Watch(ctx, m.hot)
	if err != nil {
		m.hot = nil
		m.log.Warn("memory: hot layer and similarity index off", "store", st.Where(), "err", err)
		m.indexDone = make(chan struct{})
		close(m.indexDone)
		return
	}
	m.vi.always = always
	m.startIndex(ctx)
}

// startIndex builds the similarity index in the background.
func (m *Memory) startIndex(ctx context.Context) {
	m.indexDone = make(chan struct{})
	m.vi.idx = newIndex()
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.stopIndex = cancel
	go func() {
		defer close(m.indexDone)
		// A database that is down at start (PostgreSQL) comes back later:
		// try again until the index is built or memory closes.
		for {
			err := m.vi.build(bctx, m.st)
			if err == nil || bctx.Err() != nil {
				return
			}
			m.warn("index", "memory: similarity index not built yet; similarity lookups scan the store", "store", m.st.Where(), "err", err)
			select {
			case <-bctx.Done():
				return
			case <-time.After(indexRetry):
			}
		}
	}()
}

// where names the store in logs and Stats.
func (m *Memory) where() string {
	if m.st != nil {
		return m.st.Where()
	}
	return m.opts.Backend.Where()
}

// WaitIndex waits until the similarity index Open builds in the
// background is built (or gave up: memory closed), or ctx is done. Until
// then similarity lookups scan the store, which is slower but answers the
// same.
func (m *Memory) WaitIndex(ctx context.Context) error {
	if m == nil || m.indexDone == nil {
		return nil
	}
	select {
	case <-m.indexDone:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Waiting reports how many calls wait for an identical call in flight:
// one of this process (local) or of another process sharing the store
// (remote).
func (m *Memory) Waiting() (local, remote int) {
	if m == nil {
		return 0, 0
	}
	return m.flights.followers(), int(m.remoteWaiters.Load())
}

// Err reports why memory steps aside for every call, or nil if it works.
func (m *Memory) Err() error {
	if m == nil {
		return nil
	}
	return m.disabled
}

// Close writes batched counters and closes the database.
func (m *Memory) Close() error {
	if m == nil {
		return nil
	}
	m.closeOnce.Do(func() {
		close(m.stop)
		m.meas.wg.Wait()
		<-m.loopDone
		if m.st == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*m.opts.BusyTimeout)
		defer cancel()
		if err := m.flush(ctx); err != nil {
			m.stepAside("flush", err)
		}
		if m.stopIndex != nil {
			m.stopIndex()
		}
		if m.indexDone != nil {
			<-m.indexDone
		}
		m.closeErr = m.st.Close()
	})
	return m.closeErr
}

// SetSettings replaces the rules; calls that already started keep the old ones.
func (m *Memory) SetSettings(s Settings) {
	if m == nil {
		return
	}
	m.rules.Store(newRules(s))
}

// Call is the call-chain step: answer from memory, or forward and remember.
// forward performs the child call and returns its Answer: the raw JSON of
// the CallToolResult (the "result" member of the JSON-RPC response) and
// how it was made; an error from forward is returned as the same value.
//
// Results stay raw JSON end to end: memory stores the child's bytes as they
// are (after Options.Redact) and reads only isError, resultType,
// inputRequests, requestState and _meta, spelled exactly (see readShape),
// so content types and fields it does not know pass through and are
// replayed unchanged. What Call returns is the child's (or the stored)
// result with a cache report spliced in at _meta[MetaKey], replacing any
// report already there; the child's other _meta members are kept. A result
// that is not a JSON object is returned unchanged and never stored. A nil
// *Memory returns forward's bytes as they are.
//
// Only read-only tools are remembered, for the TTL someone gave them
// (Settings.Freshness); without one, identical calls in flight at once
// still share one child call. An answer during which the child asked the
// client something (Answer.AskedClient) is never stored nor shared.
// Non-cacheable tools are forwarded and marked bypass; a forwarded call of
// a tool that is not read-only (unless its cache mode is "always")
// invalidates what Settings.Invalidate names for it, by default its whole
// server, unless the child reported failure (isError) or the request never
// left (NotSent): a call whose outcome is unknown counts as done.
func (m *Memory) Call(ctx context.Context, agent string, t Tool, args json.RawMessage, forward Forward) (json.RawMessage, error) {
	q := m.Query(agent, t, args)
	if res, ok := q.Hit(ctx); ok {
		return res, nil
	}
	return q.Call(ctx, forward)
}

// Query is one call put to memory, its key computed once. Hit answers it from
// what memory holds, waiting on nothing but the store; Call answers it
// whatever that takes: an identical call in flight, an embedder, the child. A
// caller on a goroutine others depend on (a front's reader) runs Hit there and
// hands its duty on before Call (and before Hit when LookupWaits). The methods
// of a nil *Query, memory off, forward.
type Query struct {
	m      *Memory
	t      Tool
	c      *call    // nil: the call bypasses memory
	invals []string // what a bypassing call invalidates
	looked bool     // Hit found nothing fresh: Call need not look again
}

// Query puts a call of t by agent with args to memory.
func (m *Memory) Query(agent string, t Tool, args json.RawMessage) *Query {
	return m.QueryWithMeta(agent, t, args, nil)
}

// QueryWithMeta puts a call of t by agent with args to memory, and meta, the
// _meta of the call as the child gets it: it is part of the key (see metaScope).
func (m *Memory) QueryWithMeta(agent string, t Tool, args, meta json.RawMessage) *Query {
	if m == nil {
		return nil
	}
	q := &Query{m: m, t: t}
	r := m.rules.Load()
	if m.disabled != nil {
		return q
	}
	q.invals = r.invalidates(t)
	if !r.cacheable(t) {
		return q
	}
	canonical, err := CanonicalJSON(args)
	if err != nil {
		m.log.Debug("memory: arguments are not JSON; forwarding", "tool", t.Name, "err", err)
		return q
	}
	if m.isStale(t) {
		return q
	}
	scope := r.scope(t, agent)
	ms, err := metaScope(meta)
	if err != nil {
		m.log.Debug("memory: the call's _meta is not a JSON object; forwarding", "tool", t.Name, "err", err)
		return q
	}
	if ms != "" {
		scope = strings.TrimPrefix(scope+" "+ms, " ")
	}
	q.c = &call{
		t:      t,
		r:      r,
		scope:  scope,
		agent:  agent,
		fp:     fingerprint(canonical),
		args:   canonical,
		ttl:    r.ttl(t),
		window: r.staleWindow(t),
		invals: q.invals,
	}
	q.c.key = cacheKey(t.Name, q.c.scope, q.c.fp)
	return q
}

// Session says which session of its agent makes q, so that a similarity hit
// is not served to the session that stored the entry (Settings.Rewording).
// It returns q.
func (q *Query) Session(id string) *Query {
	if q != nil && q.c != nil {
		q.c.session = id
	}
	return q
}

// LookupWaits reports that a lookup waits on the network: the store is a
// database the replicas share, not a file of this machine.
func (m *Memory) LookupWaits() bool { return m != nil && m.st != nil && !m.st.Local() }

// Hit returns the fresh answer memory holds for q, marked as a hit, if any.
// It never forwards, and never waits for an identical call in flight.
func (q *Query) Hit(ctx context.Context) (json.RawMessage, bool) {
	if q == nil || q.c == nil || !q.c.ttl.Keeps() {
		return nil, false
	}
	res, ok, err := q.m.lookupHit(ctx, q.c)
	if err == nil && !ok {
		q.looked = true
	}
	if ok && err == nil {
		q.c.served = res
	}
	return res, ok && err == nil
}

// Verifies reports that q was answered from memory (by Hit or Call) with
// verification on (Settings.Verify) for a read-only tool: VerifyLater may
// sample it. A caller checks it before building the forward VerifyLater
// needs.
func (q *Query) Verifies() bool {
	if q == nil || q.c == nil || q.c.served == nil || !q.c.t.ReadOnly {
		return false
	}
	v := q.c.r.s.Verify
	return v.Rate > 0 && v.PerMinute > 0
}

// VerifyLater offers the answer memory served for q to verification
// (Settings.Verify): when sampled, forward is called once more, after the
// answer, on another goroutine and a context of its own, and the child's
// answer is compared with the one served. forward must be fit for that: it
// may run after the call returned, and nothing of it may reach the caller
// (the call's own forward, which records the trip and hands on the
// client's reading, is not). It does nothing when q was not answered from
// memory.
func (q *Query) VerifyLater(ctx context.Context, forward Forward) {
	if !q.Verifies() {
		return
	}
	q.m.verifyLater(ctx, q.c, q.c.served, q.c.servedSem, forward)
}

// Call answers q: from memory, from an identical call in flight, or by forward,
// whose answer memory then keeps when it may.
func (q *Query) Call(ctx context.Context, forward Forward) (json.RawMessage, error) {
	if q == nil {
		a, err := forward(ctx)
		return a.Result, err
	}
	if q.c == nil {
		return q.m.bypass(ctx, q.t, q.invals, forward)
	}
	looked := q.looked
	for {
		res, retry, err := q.m.cached(ctx, q.c, forward, looked)
		if !retry {
			return res, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		looked = false
	}
}

// ServesStale reports whether t has a stale-if-error window: a call of it
// is worth making through memory even when its server is down.
func (m *Memory) ServesStale(t Tool) bool {
	return m != nil && m.disabled == nil && m.rules.Load().staleWindow(t) > 0
}

// call is one cacheable call's derived facts.
type call struct {
	t       Tool
	r       *rules
	scope   string
	agent   string // who calls
	session string // the caller's session, "" when unknown (Query.Session)
	// shadow is a similarity hit not served because its tool's false-hit
	// rate is over the limit: the child's answer, fetched anyway, says
	// whether it would have been right, so the rate can come back under.
	shadow *semHit
	// served is the answer memory gave this call (a hit), servedSem its
	// similarity hit if it was one: what Query.VerifyLater verifies.
	served    json.RawMessage
	servedSem *semHit
	// missed is what the last lookup found when it could serve nothing
	// (lookupHit), for the flight that follows to start from (cached).
	missed *missedLookup
	fp     string
	args   []byte
	key    []byte
	ttl    TTL
	window time.Duration // stale-if-error; 0: never
	invals []string
}

// missedLookup is a lookup that served nothing: the entry it found (if
// any), the invalidation generation it read, and flightGroup.landedFor of the
// key before it.
type missedLookup struct {
	e      Entry
	found  bool
	gen    int64
	landed uint64
}

// stores reports whether c's answer is kept at all: fresh for its TTL, or
// for stale-if-error only.
func (c *call) stores() bool { return c.ttl.Keeps() || c.window > 0 }

// fresh reports whether e may be served as c's answer now: not marked
// stale (its server restarted or changed its tools) and within the TTL of
// the moment, so a TTL shortened by a reload applies to stored entries.
func (c *call) fresh(e Entry, now int64) bool {
	if e.Stale || !c.ttl.Keeps() {
		return false
	}
	return c.ttl.Never || now < e.CreatedAt+c.ttl.D.Milliseconds()
}

// staleUsable reports whether e may stand in for c's answer when the
// child failed: younger than c's stale-if-error window.
func (c *call) staleUsable(e Entry, now int64) bool {
	return c.window > 0 && now-e.CreatedAt < c.window.Milliseconds()
}

// cached is one attempt at a cacheable call. retry reports that the leader
// of an identical call gave up because its own context ended.
func (m *Memory) cached(ctx context.Context, c *call, forward Forward, looked bool) (res json.RawMessage, retry bool, err error) {
	// With no TTL nothing is served fresh: straight to the flight, which
	// shares one child call among identical calls in flight. looked says a
	// lookup just found nothing fresh (Query.Hit).
	if !looked {
		c.missed = nil // a retry looks afresh
	}
	if c.ttl.Keeps() && !looked {
		res, ok, err := m.lookupHit(ctx, c)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, false, ctx.Err()
		case err != nil:
			m.stepAside("lookup", err)
			res, err := m.bypass(ctx, c.t, c.invals, forward)
			return res, false, err
		case ok:
			c.served = res
			return res, false, nil
		}
	}

	f, leader := m.flights.join(string(c.key))
	if !leader {
		return m.follow(ctx, c, f)
	}

	published := false
	publish := func() {
		if !published {
			published = true
			close(f.done)
		}
	}
	defer func() {
		if p := recover(); p != nil {
			f.err = fmt.Errorf("memory: identical call of %s panicked: %v", c.t.Name, p)
			publish()
			m.flights.retire(string(c.key), f)
			panic(p)
		}
		publish()
		m.flights.retire(string(c.key), f)
	}()

	// Double-check: the previous leader may have stored the answer
	// between our lookup and our joining. Skipped when nothing is kept;
	// canStore reports that the lookup worked (so gen can guard a store).
	var (
		e        Entry
		found    bool
		gen      int64
		canStore bool
	)
	if prior := c.missed; c.stores() && prior != nil && m.flights.landedFor(string(c.key)) == prior.landed {
		// The lookup above (or Query.Hit's) was a moment ago, and no
		// identical call of this process landed since: what it found
		// stands. (Another process's store in between costs at most one
		// more child call.)
		e, found, gen, canStore = prior.e, prior.found, prior.gen, true
	} else if c.stores() {
		var err error
		e, found, gen, err = m.lookup(ctx, c)
		switch {
		case err != nil && ctx.Err() != nil:
			f.retry = true
			return nil, false, ctx.Err()
		case err != nil:
			m.stepAside("lookup", err)
		default:
			canStore = true
		}
	}
	if canStore && found {
		if hit, ok := m.serve(c, e); ok {
			f.res, f.status, f.created = e.Result, StatusHit, time.UnixMilli(e.CreatedAt)
			m.pend.count(c.t, func(k *Counters) { k.Hits++; k.SavedMS += e.DurationMS })
			c.served = hit
			return hit, false, nil
		}
	}

	// Similarity: only after an exact miss, so exact hits never embed.
	var sc *FreeText
	if canStore && c.ttl.Keeps() {
		var hit json.RawMessage
		var served bool
		if sc, hit, served = m.similar(ctx, c, f); served {
			c.served, c.servedSem = hit, f.sem
			return hit, false, nil
		}
	}

	// Replicas sharing the store make one child call between them.
	if canStore {
		seen := int64(-1)
		if found {
			seen = e.CreatedAt
		}
		hit, done, g, release, err := m.claimFlight(ctx, c, f, gen, seen)
		if err != nil {
			f.retry = true
			return nil, false, err
		}
		if done {
			return hit, false, nil
		}
		gen = g
		defer release()
	}

	start := m.now()
	a, err := forward(ctx)
	res = a.Result
	dur := m.now().Sub(start)
	if err != nil && ctx.Err() != nil {
		// Our own context ended: followers must not inherit that.
		f.retry = true
		m.pend.count(c.t, func(k *Counters) { k.Misses++ })
		m.invalidateAfter(ctx, c, a, err)
		return res, false, err
	}
	m.pend.count(c.t, func(k *Counters) { k.Misses++ })
	if a.AskedClient {
		// Made with this caller's input: followers make calls of their own,
		// and nothing is stored.
		f.retry = true
		m.invalidateAfter(ctx, c, a, err)
		return m.mark(c.t, res, StatusMiss, 0, false), false, err
	}
	if a.childFailed() && found {
		if now := m.now().UnixMilli(); c.staleUsable(e, now) {
			if out, ok := m.serveStale(c, e, now, a.Failure); ok {
				f.res, f.status, f.created = out, StatusStale, time.UnixMilli(e.CreatedAt)
				return out, false, nil
			}
		}
	}
	f.res, f.err, f.status, f.created = res, err, StatusMiss, m.now()
	if c.shadow != nil && err == nil && !a.childFailed() {
		m.judged(ctx, c.t, c.shadow, !sameAnswer(c.shadow.e.Result, m.redactBytes(res)))
	}
	// Followers (and callers arriving until the store commits) share the
	// result now; the flight stays registered until the store is done so
	// that no identical call forwards again in between.
	publish()
	return m.settle(ctx, c, a, err, dur, gen, canStore, sc)
}

// settle ends a forwarded call whose answer its followers already share: a
// failure invalidates what the call may have changed, a complete result is
// remembered (or invalidates, for a tool that is not read-only), and the
// caller's copy is marked a miss. gen, canStore and sc are what the leader's
// lookup found, for remember.
func (m *Memory) settle(ctx context.Context, c *call, a Answer, err error, dur time.Duration, gen int64, canStore bool, sc *FreeText) (json.RawMessage, bool, error) {
	res := a.Result
	if err != nil || a.childFailed() {
		m.invalidateAfter(ctx, c, a, err)
		return m.markUnlessErr(c.t, res, err)
	}
	shape, serr := readShape(res)
	switch {
	case serr != nil:
		m.log.Debug("memory: result not stored: not a CallToolResult memory can read", "tool", c.t.Name, "err", serr)
		m.invalidateAfter(ctx, c, a, err)
	case shape.IsError || !shape.complete():
		// A failure, or an exchange with this caller still under way.
	case c.stores() || c.invals != nil:
		m.remember(ctx, c, res, shape, dur, gen, canStore, sc)
	}
	return m.mark(c.t, res, StatusMiss, 0, false), false, nil
}

// follow waits for the leader of an identical call in flight and shares its
// answer, marked for this caller; retry reports that the leader gave up
// because its own context ended.
func (m *Memory) follow(ctx context.Context, c *call, f *flight) (res json.RawMessage, retry bool, err error) {
	if err := f.wait(ctx); err != nil {
		return nil, false, err
	}
	if f.retry {
		return nil, true, nil
	}
	coalesced := f.status == StatusMiss
	switch f.status {
	case StatusStale:
		return f.res, false, nil
	case StatusMiss:
		m.pend.count(c.t, func(k *Counters) { k.Coalesced++ })
	case StatusSemanticHit:
		m.pend.count(c.t, func(k *Counters) { k.Hits++; k.SemanticHits++ })
	default:
		m.pend.count(c.t, func(k *Counters) { k.Hits++ })
	}
	if f.err != nil {
		return f.res, false, f.err
	}
	age := m.now().Sub(f.created).Milliseconds()
	if f.sem != nil {
		out, err := withMeta(f.res, MetaKey, semanticReport(f.sem, age, false))
		if err != nil {
			m.log.Debug("memory: result passed on without a cache report", "tool", c.t.Name, "err", err)
		}
		return out, false, nil
	}
	return m.mark(c.t, f.res, StatusHit, age, coalesced), false, nil
}

// similar looks for a similarity hit for the leader of f after an exact miss.
// sc is the call's free text (nil: none; its Vec nil: embedding failed), which
// a miss stores with its answer; served reports that hit is the answer, which
// f's followers share.
func (m *Memory) similar(ctx context.Context, c *call, f *flight) (sc *FreeText, hit json.RawMessage, served bool) {
	if sc = m.prepareSemantic(c); sc == nil {
		return nil, nil, false
	}
	m.embed(ctx, c, sc)
	if sc.Vec == nil {
		return sc, nil, false
	}
	h, ok, err := m.semanticHit(ctx, c, sc)
	if err != nil && ctx.Err() == nil {
		m.stepAside("similarity lookup", err)
	}
	if !ok {
		return sc, nil, false
	}
	if hit, ok := m.serveSemantic(c, &h); ok {
		f.res, f.status, f.created, f.sem = h.e.Result, StatusSemanticHit, time.UnixMilli(h.e.CreatedAt), &h
		return sc, hit, true
	}
	return sc, nil, false
}

// markUnlessErr is mark for a forwarded answer that may be an error.
func (m *Memory) markUnlessErr(t Tool, res json.RawMessage, err error) (json.RawMessage, bool, error) {
	if err != nil {
		return res, false, err
	}
	return m.mark(t, res, StatusMiss, 0, false), false, nil
}

// invalidateAfter applies c's invalidations (a cacheable tool with an
// invalidate rule) after a call that did not end in a storable answer,
// when the call may have run.
func (m *Memory) invalidateAfter(ctx context.Context, c *call, a Answer, err error) {
	if c.invals != nil && mayHaveRun(a, err) {
		m.remember(ctx, c, nil, resultShape{}, 0, 0, false, nil)
	}
}

// serveStale returns e marked as a stale answer standing in for a child
// that failed with failure.
func (m *Memory) serveStale(c *call, e Entry, now int64, failure string) (json.RawMessage, bool) {
	report, err := marshalVerbatim(struct {
		Status string `json:"status"`
		AgeMS  int64  `json:"age_ms"`
		Error  string `json:"error"`
	}{StatusStale, max(now-e.CreatedAt, 0), failure})
	if err != nil {
		return nil, false
	}
	out, err := withMeta(e.Result, MetaKey, report)
	if err != nil {
		m.stepAside("decode", fmt.Errorf("entry %d of %s: %w", e.ID, c.t.Name, err))
		return nil, false
	}
	m.pend.touch(e.ID, now)
	m.log.Info("memory: the child failed; served a stale answer", "tool", c.t.Name, "age", time.Duration(now-e.CreatedAt)*time.Millisecond, "err", failure)
	return out, true
}

// lookup returns the entry stored for c (found false if none) and the
// current invalidation generation of c's tool: from the hot layer when it
// holds the entry and nothing was invalidated since, else from the store.
func (m *Memory) lookup(ctx context.Context, c *call) (Entry, bool, int64, error) {
	l, err := m.st.Sync(ctx, m.hot)
	if err != nil {
		return Entry{}, false, 0, err
	}
	if l.Moved {
		m.vi.catchUp.Store(true)
	}
	if l.Invalidated {
		m.vi.prune.Store(true)
	}
	if m.hot == nil {
		return m.st.Lookup(ctx, c.t, c.key)
	}
	if e, gen, ok := m.hot.get(c.key); ok {
		if c.fresh(e, m.now().UnixMilli()) {
			valid, err := m.st.HotValid(ctx, c.t, gen)
			if err != nil {
				return Entry{}, false, 0, err
			}
			if valid {
				return e, true, gen, nil
			}
		}
		// Expired (the answer stored after the refetch will replace it),
		// or invalidated elsewhere.
		m.hot.drop(c.key)
	}
	e, found, gen, err := m.st.Lookup(ctx, c.t, c.key)
	if err == nil && found {
		m.hot.put(c.key, e, gen, l.Epoch)
	}
	return e, found, gen, err
}

// lookupHit returns a fresh stored answer for c, if any.
func (m *Memory) lookupHit(ctx context.Context, c *call) (json.RawMessage, bool, error) {
	landed := m.flights.landedFor(string(c.key))
	e, found, gen, err := m.lookup(ctx, c)
	if err != nil {
		return nil, false, err
	}
	if found {
		if hit, ok := m.serve(c, e); ok {
			m.pend.count(c.t, func(k *Counters) { k.Hits++; k.SavedMS += e.DurationMS })
			return hit, true, nil
		}
	}
	c.missed = &missedLookup{e: e, found: found, gen: gen, landed: landed}
	return nil, false, nil
}

// serve returns e's result marked as a hit, if e is still fresh under the
// current TTL (so a TTL shortened by a config reload applies to entries
// already stored), and records the use. An entry that cannot be marked
// (damaged in the database) is treated as absent.
func (m *Memory) serve(c *call, e Entry) (json.RawMessage, bool) {
	now := m.now().UnixMilli()
	if !c.fresh(e, now) {
		return nil, false
	}
	report := cacheReport(StatusHit, max(now-e.CreatedAt, 0), false)
	if e.tmpl != nil {
		m.pend.touch(e.ID, now)
		return e.tmpl.fill(report), true
	}
	hit, err := withMeta(e.Result, MetaKey, report)
	if err != nil {
		m.stepAside("decode", fmt.Errorf("entry %d of %s: %w", e.ID, c.t.Name, err))
		return nil, false
	}
	m.pend.touch(e.ID, now)
	return hit, true
}

// serveSemantic returns h's entry marked as a similarity hit and records
// the use (the TTL was checked with the candidates).
func (m *Memory) serveSemantic(c *call, h *semHit) (json.RawMessage, bool) {
	now := m.now().UnixMilli()
	hit, err := withMeta(h.e.Result, MetaKey, semanticReport(h, max(now-h.e.CreatedAt, 0), false))
	if err != nil {
		m.stepAside("decode", fmt.Errorf("entry %d of %s: %w", h.e.ID, c.t.Name, err))
		return nil, false
	}
	m.pend.touch(h.e.ID, now)
	m.pend.count(c.t, func(k *Counters) { k.Hits++; k.SemanticHits++; k.SavedMS += h.e.DurationMS })
	return hit, true
}

// mark returns res with the cache report spliced into its _meta. A result
// that has no room for one (not a JSON object) is passed on unchanged: the
// report is for observers, the answer is for the agent.
func (m *Memory) mark(t Tool, res json.RawMessage, status string, ageMS int64, coalesced bool) json.RawMessage {
	if len(res) == 0 {
		return res
	}
	out, err := withMeta(res, MetaKey, cacheReport(status, ageMS, coalesced))
	if err != nil {
		m.log.Debug("memory: result passed on without a cache report", "tool", t.Name, "err", err)
	}
	return out
}

// remember stores a forwarded result (res, nil for a call that failed),
// with its vector when sc has one, and applies the call's invalidations in
// one transaction. It runs with a
// context detached from the caller's cancellation: the child's answer is
// worth keeping even if the agent left.
func (m *Memory) remember(ctx context.Context, c *call, res json.RawMessage, shape resultShape, dur time.Duration, gen int64, canStore bool, sc *FreeText) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*m.opts.BusyTimeout)
	defer cancel()
	var rec *Record
	if canStore && res != nil && m.writable() {
		if blob, ok := m.encode(c.t, res, shape); ok {
			now := m.now().UnixMilli()
			args := c.args
			// The key hashes the real arguments; the stored copy is for display.
			args = m.redactBytes(args)
			rec = &Record{
				Key: c.key, Tool: c.t, Scope: c.scope, Fingerprint: c.fp, Args: args,
				Result: blob, DurationMS: dur.Milliseconds(), CreatedAt: now,
			}
			if sc != nil && sc.Vec != nil {
				rec.Text = sc
			}
			if !c.ttl.Never {
				// Kept (not served) past its TTL while stale-if-error may
				// still want it.
				rec.ExpiresAt = sql.NullInt64{Int64: now + max(c.ttl.D, 0).Milliseconds() + c.window.Milliseconds(), Valid: true}
			}
		}
	}
	if rec == nil && c.invals == nil {
		return
	}
	w := &Write{Record: rec, Gen: gen, Invalidate: c.invals, Bounds: m.bounds, Now: m.now().UnixMilli()}
	var took []pendingBatch
	w.BeforeEvict = func() (map[int64]Touch, map[string]*Counters) {
		touches, tools := m.pend.take()
		took = append(took, pendingBatch{touches, tools})
		return touches, tools
	}
	storedID, err := m.st.Write(ctx, w)
	if err == nil && storedID != 0 && rec.Text != nil {
		if m.vi.idx != nil {
			m.vi.idx.add(rec.Text.Part, storedID, rec.Text.Vec)
		}
		m.makers.put(storedID, c, rec.CreatedAt)
	}
	if err != nil {
		// Recency taken for an eviction that did not commit goes back.
		for _, p := range took {
			m.pend.restore(p.touches, p.tools)
		}
		if m.st.Busy(err) {
			m.writeBlockedUntil.Store(time.Now().Add(writeBackoff).UnixNano())
		}
		m.stepAside("store", err)
		if c.invals != nil {
			m.addStale(c.invals)
		}
	}
}

// pendingBatch is recency taken from pending for one write.
type pendingBatch struct {
	touches map[int64]Touch
	tools   map[string]*Counters
}

// redactBytes returns b without registered secrets: Redact, or
// RedactText when only that is set. b itself is not changed (Redact may
// rewrite in place; the caller still returns the original).
func (m *Memory) redactBytes(b []byte) []byte {
	switch {
	case m.opts.Redact != nil:
		return m.opts.Redact(bytes.Clone(b))
	case m.opts.RedactText != nil:
		return []byte(m.opts.RedactText(string(b)))
	}
	return b
}

// writable reports whether stores are not backing off after a lock.
func (m *Memory) writable() bool {
	return time.Now().UnixNano() >= m.writeBlockedUntil.Load()
}

// encode returns the bytes to store for the child's result res (whose
// members memory reads are shape), or false if it must not be stored: too
// big, or broken by Redact. The bytes are the child's, verbatim, except
// that a cache report the child itself added (a child that is a Nexus
// gateway) is removed: a stored entry never carries one, so a hit cannot
// replay a stale report.
func (m *Memory) encode(t Tool, res json.RawMessage, shape resultShape) ([]byte, bool) {
	blob := []byte(res)
	if _, ok := shape.Meta[MetaKey]; ok {
		var err error
		if blob, err = withoutMeta(res, MetaKey); err != nil {
			m.log.Debug("memory: result not stored: cannot remove the child's cache report", "tool", t.Name, "err", err)
			return nil, false
		}
	}
	if m.opts.Redact != nil || m.opts.RedactText != nil {
		blob = m.redactBytes(blob)
		// A hit must be markable, so what is stored must stay an object.
		if _, err := readShape(blob); err != nil {
			m.stepAside("redact", fmt.Errorf("redacted result of %s: %w", t.Name, err))
			return nil, false
		}
	}
	if len(blob) > m.maxResult {
		m.log.Debug("memory: result not stored: over the size cap", "tool", t.Name, "size", len(blob), "cap", m.maxResult)
		return nil, false
	}
	return blob, true
}

// bypass forwards without memory, then applies invals when the call may
// have run (see mayHaveRun).
func (m *Memory) bypass(ctx context.Context, t Tool, invals []string, forward Forward) (json.RawMessage, error) {
	a, err := forward(ctx)
	res := a.Result
	if m.st != nil {
		m.pend.count(t, func(k *Counters) { k.Bypasses++ })
		if invals != nil && mayHaveRun(a, err) {
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*m.opts.BusyTimeout)
			_, err := m.st.Write(wctx, &Write{Invalidate: invals})
			cancel()
			if err != nil {
				m.stepAside("invalidate", err)
				m.addStale(invals)
			}
		}
	}
	if err != nil {
		return res, err
	}
	return m.mark(t, res, StatusBypass, 0, false), nil
}

// mayHaveRun reports whether a call may have changed something: unless the
// request never left, or the child itself said the call failed (isError,
// read strictly: an ambiguous result counts as success). An unknown
// outcome (a timeout, a cancellation, a child that died, a broken
// transport) counts as done, and so does a JSON-RPC error.
func mayHaveRun(a Answer, err error) bool {
	switch {
	case a.Outcome == NotSent || a.Outcome == Refused:
		return false
	case a.Outcome == Unknown || err != nil:
		return true
	}
	s, serr := readShape(a.Result)
	return serr != nil || !s.IsError
}

// MarkStale makes the entries of server unfit to be served as fresh, for
// a child that crashed, restarted or whose tool list changed: nothing says
// its answers are wrong, but nothing says they still hold. They stay
// available to stale-if-error until they expire. If the database cannot be
// written, the server's tools bypass memory in this process until a retry
// succeeds, and the error is returned.
func (m *Memory) MarkStale(ctx context.Context, server string) error {
	if m == nil || m.st == nil {
		return nil
	}
	p := []string{server + ".*"}
	_, err := m.st.Write(ctx, &Write{Soft: p})
	if err != nil {
		m.addStale(p)
		return fmt.Errorf("memory: mark the answers of server %q stale: %w", server, err)
	}
	return nil
}

// Clear deletes the entries of server and tool ("" = any) and returns how
// many were deleted: Clear(ctx, name, "") for `nexus remove name`,
// Clear(ctx, "", "") to empty memory. Counters are kept.
func (m *Memory) Clear(ctx context.Context, server, tool string) (int64, error) {
	if m == nil {
		return 0, errors.New("memory: off")
	}
	if m.disabled != nil {
		return 0, m.disabled
	}
	n, err := m.st.Clear(ctx, server, tool)
	if err != nil {
		return 0, fmt.Errorf("memory: clear server %q tool %q: %w", server, tool, err)
	}
	return n, nil
}

// addStale records invalidations that could not be written.
func (m *Memory) addStale(patterns []string) {
	m.staleMu.Lock()
	defer m.staleMu.Unlock()
	for _, p := range patterns {
		if !containsString(m.stale, p) {
			m.stale = append(m.stale, p)
		}
	}
	m.hasStale.Store(len(m.stale) > 0)
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// isStale reports whether an unwritten invalidation covers t.
func (m *Memory) isStale(t Tool) bool {
	if !m.hasStale.Load() {
		return false
	}
	m.staleMu.Lock()
	defer m.staleMu.Unlock()
	for _, p := range m.stale {
		if matches(p, t) {
			return true
		}
	}
	return false
}

func matches(pattern string, t Tool) bool {
	switch {
	case pattern == "*":
		return true
	case strings.HasSuffix(pattern, ".*"):
		return t.Server == strings.TrimSuffix(pattern, ".*")
	}
	return pattern == t.Name
}

// Flush writes the batched hit counters and recency now, and retries the
// invalidations that could not be written (see Call), instead of waiting
// for the next Options.FlushInterval.
func (m *Memory) Flush(ctx context.Context) error {
	if m == nil || m.st == nil {
		return nil
	}
	return m.flush(ctx)
}

// flush writes batched counters and retries unwritten invalidations.
func (m *Memory) flush(ctx context.Context) error {
	m.staleMu.Lock()
	stale := append([]string(nil), m.stale...)
	m.staleMu.Unlock()
	touches, tools := m.pend.take()
	purge := time.Now().UnixNano()-m.lastPurge.Load() > int64(time.Minute)
	if len(stale) == 0 && len(touches) == 0 && len(tools) == 0 && !purge {
		return nil
	}
	_, err := m.st.Write(ctx, &Write{Invalidate: stale, Touches: touches, Tools: tools, Purge: purge, Now: m.now().UnixMilli()})
	if err != nil {
		m.pend.restore(touches, tools)
		return err
	}
	if purge {
		m.lastPurge.Store(time.Now().UnixNano())
	}
	if len(stale) > 0 {
		m.staleMu.Lock()
		m.stale = slicesDeleteAll(m.stale, stale)
		m.hasStale.Store(len(m.stale) > 0)
		m.staleMu.Unlock()
	}
	return nil
}

func slicesDeleteAll(list, done []string) []string {
	out := list[:0]
	for _, v := range list {
		if !containsString(done, v) {
			out = append(out, v)
		}
	}
	return out
}

// loop flushes every FlushInterval until Close.
func (m *Memory) loop() {
	defer close(m.loopDone)
	tick := time.NewTicker(m.opts.FlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-tick.C:
			ctx, cancel := context.WithTimeout(context.Background(), 2*m.opts.BusyTimeout)
			if err := m.flush(ctx); err != nil {
				m.stepAside("flush", err)
			}
			cancel()
		}
	}
}

// stepAside logs a database failure that memory worked around. The same
// operation logs at Warn at most every 30 seconds, at Debug in between,
// so a broken database does not flood the log.
func (m *Memory) stepAside(op string, err error) {
	now := time.Now()
	m.logMu.Lock()
	last, seen := m.lastLog[op]
	loud := !seen || now.Sub(last) >= 30*time.Second
	if loud {
		m.lastLog[op] = now
	}
	m.logMu.Unlock()
	level := slog.LevelDebug
	if loud {
		level = slog.LevelWarn
	}
	m.log.Log(context.Background(), level, "memory: stepping aside; the call is forwarded", "op", op, "store", m.where(), "err", err)
}
