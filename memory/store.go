package memory

import (
	"context"
	"database/sql"
	"time"
)

// store is what Memory needs of a database: the SQLite file every local
// process shares (store_sqlite.go) or a PostgreSQL database every replica
// shares (store_postgres.go). Memory's logic (memory.go) decides what to
// look up, serve, store and invalidate; a store only makes those decisions
// durable and visible to the other processes using it.
//
// All times are unix milliseconds. Methods are safe for concurrent use.
type store interface {
	// where names the database in logs and Stats.Path (a DSN without
	// its password).
	where() string

	// sync reports what other processes committed since the last look,
	// and empties h (nil: no hot layer) when one of them invalidated.
	sync(ctx context.Context, h *hot) (look, error)
	// hotValid reports whether an entry the hot layer holds for t, read
	// at invalidation generation gen, may still be served. A store whose
	// sync cannot see every invalidation before it returns (PostgreSQL:
	// notifications are asynchronous) reads the generation here.
	hotValid(ctx context.Context, t Tool, gen int64) (bool, error)
	// lookup returns the entry stored under key (found false if none)
	// and the current invalidation generation of t.
	lookup(ctx context.Context, t Tool, key []byte) (e entry, found bool, gen int64, err error)

	// write applies w in one transaction and returns the id of the entry
	// it stored (0 if none).
	write(ctx context.Context, w *write) (int64, error)
	// clear deletes the entries of server and tool ("" = any), bumping
	// their generation, and returns how many it deleted.
	clear(ctx context.Context, server, tool string) (int64, error)

	// claim asks to lead the child call for key among every process that
	// shares the store, for at most lease. lead false means another
	// process leads it. changed reports that the entry stored under key
	// is not the one the caller saw (created at seen, -1: none): another
	// process stored it since, so the caller should read it instead of
	// calling (releasing the claim). release ends a claim that led.
	claim(ctx context.Context, key []byte, lease time.Duration, seen int64) (lead, changed bool, release func(), err error)
	// flightDone returns a channel that is closed (or sent to) when a
	// flight of another process may have landed, to wake a follower
	// early; nil when the store has no such signal.
	flightDone() <-chan struct{}

	// Similarity: the vectors stored since cursor (0: all), for the
	// in-memory index, and the cursor to pass next time.
	vectorsSince(ctx context.Context, cursor int64, add func(id, part int64, vec []float32)) (int64, error)
	// liveVectorIDs returns the ids of the entries that hold a vector.
	liveVectorIDs(ctx context.Context) (map[int64]bool, error)
	// candidates reads back the entries ids (found by the index) with
	// their bucket, embedder and dims, so the caller can drop those
	// replaced since.
	candidates(ctx context.Context, ids []int64) ([]storedCandidate, error)
	// scanNeighbours returns up to k entries nearest to sc.vec in its
	// bucket without the index (while it is being built).
	scanNeighbours(ctx context.Context, sc *semCall, k int) ([]candidate, error)

	// stats and list serve `nexus cache stats` and `nexus cache list`.
	stats(ctx context.Context) (perTool []ToolStats, err error)
	list(ctx context.Context, limit int) ([]EntryInfo, error)

	// busy reports an error that means "held by another process": stores
	// back off for a while instead of queueing every call behind it.
	busy(err error) bool
	close() error
}

// look is what a store saw since its last look.
type look struct {
	epoch       uint64 // what reads made now must present to hot.put
	moved       bool   // another process committed: new vectors may exist
	invalidated bool   // ... and invalidated: held vectors may be gone
}

// write is one transaction of Memory: a result to store, invalidations to
// apply, batched counters to write and expired entries to purge.
type write struct {
	rec *record // stored only if t's generation is still gen
	gen int64

	invals []string // invalidation patterns: "*", "server.*", "server.tool"
	// soft are patterns whose entries are marked stale, not deleted: not
	// served as fresh, still there for stale-if-error.
	soft []string

	touches map[int64]touch
	tools   map[string]*counters
	// beforeEvict returns this process's batched recency, written before
	// an eviction so that recent hits count; nil: none.
	beforeEvict func() (map[int64]touch, map[string]*counters)

	purge  bool // delete up to purgeLimit expired entries
	now    int64
	bounds bounds
}

const purgeLimit = 1000

// genNames are the generation counters an entry of t depends on.
func genNames(t Tool) (tool, server string) {
	return "tool:" + t.Name, "server:" + t.Server
}

// patternGen returns the generation an invalidation pattern bumps and the
// column and value of the entries it deletes ("" column: all).
func patternGen(p string) (gen, column, value string) {
	switch {
	case p == "*":
		return "*", "", ""
	case len(p) > 2 && p[len(p)-2:] == ".*":
		return "server:" + p[:len(p)-2], "server", p[:len(p)-2]
	}
	return "tool:" + p, "tool", p
}

// entry is what a lookup finds.
type entry struct {
	id         int64
	result     []byte
	createdAt  int64
	durationMS int64
	stale      bool          // marked by a soft invalidation (write.soft)
	tmpl       *metaTemplate // set by the hot layer
}

// record is an entry to store.
type record struct {
	key         []byte
	tool        Tool
	scope       string
	fingerprint string
	args        []byte
	result      []byte
	durationMS  int64
	createdAt   int64
	expiresAt   sql.NullInt64
	sem         *semCall // non-nil with a vector: stored for similarity hits
}

// storedCandidate is an entry found by the index, as the store holds it.
type storedCandidate struct {
	candidate
	bucket   []byte
	embedder string
	dims     int
}

// bounds are the size limits eviction keeps.
type bounds struct {
	maxEntries int64
	maxBytes   int64
}
