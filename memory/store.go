package memory

import (
	"context"
	"database/sql"
	"log/slog"
	"time"
)

// A Backend opens the Store of one database: sqlite.File(path) or
// postgres.DSN(dsn). Memory opens it once, in Open, so that a database
// that cannot be used becomes a Memory that steps aside rather than an
// error at the caller.
type Backend interface {
	// Where names the database in logs and Stats.Path (a DSN without its
	// password), also when Open failed.
	Where() string
	// Open opens (creating and migrating if needed) the store.
	Open(ctx context.Context, o StoreOptions) (Store, error)
}

// StoreOptions are what Memory passes to Backend.Open.
type StoreOptions struct {
	// BusyTimeout bounds how long one operation waits for a lock held by
	// another process (or, PostgreSQL, for the database to answer).
	BusyTimeout time.Duration
	Logger      *slog.Logger // never nil
}

// Store is what Memory needs of a database: the SQLite file every local
// process shares (memory/sqlite) or a PostgreSQL database every replica
// shares (memory/postgres). Memory's logic (memory.go) decides what to
// look up, serve, store and invalidate; a store only makes those decisions
// durable and visible to the other processes using it. Every store runs
// the contract suite of memory/memorytest.
//
// All times are unix milliseconds. Methods are safe for concurrent use.
type Store interface {
	// Where names the database in logs and Stats.Path (a DSN without
	// its password).
	Where() string
	// Local reports that the database is a file of this machine: a lookup
	// never waits on the network.
	Local() bool

	// Watch starts telling h (nil: no hot layer) of what other processes
	// commit: Sync or the store's own listener empties h when one of them
	// invalidated. always reports that Sync cannot see every commit of
	// another process (PostgreSQL between notifications), so the
	// similarity index catches up on every lookup. An error means the
	// store cannot watch: memory then runs without hot layer and index.
	Watch(ctx context.Context, h *Hot) (always bool, err error)
	// Sync reports what other processes committed since the last look,
	// and empties h (nil: no hot layer) when one of them invalidated.
	Sync(ctx context.Context, h *Hot) (Look, error)
	// HotValid reports whether an entry the hot layer holds for t, read
	// at invalidation generation gen, may still be served. A store whose
	// sync cannot see every invalidation before it returns (PostgreSQL:
	// notifications are asynchronous) reads the generation here.
	HotValid(ctx context.Context, t Tool, gen int64) (bool, error)
	// Lookup returns the entry stored under key (found false if none)
	// and the current invalidation generation of t.
	Lookup(ctx context.Context, t Tool, key []byte) (e Entry, found bool, gen int64, err error)

	// Write applies w in one transaction and returns the id of the entry
	// it stored (0 if none).
	Write(ctx context.Context, w *Write) (int64, error)
	// Clear deletes the entries of server and tool ("" = any), bumping
	// their generation, and returns how many it deleted.
	Clear(ctx context.Context, server, tool string) (int64, error)

	// Claim asks to lead the child call for key among every process that
	// shares the store, for at most lease. lead false means another
	// process leads it. changed reports that the entry stored under key
	// is not the one the caller saw (created at seen, -1: none): another
	// process stored it since, so the caller should read it instead of
	// calling (releasing the claim). release ends a claim that led.
	Claim(ctx context.Context, key []byte, lease time.Duration, seen int64) (lead, changed bool, release func(), err error)
	// FlightDone returns a channel that is closed (or sent to) when a
	// flight of another process may have landed, to wake a follower
	// early; nil when the store has no such signal.
	FlightDone() <-chan struct{}

	// Similarity: the vectors stored since cursor (0: all), for the
	// in-memory index, and the cursor to pass next time.
	VectorsSince(ctx context.Context, cursor int64, add func(id, part int64, vec []float32)) (int64, error)
	// LiveVectorIDs returns the ids of the entries that hold a vector.
	LiveVectorIDs(ctx context.Context) (map[int64]bool, error)
	// Candidates reads back the entries ids (found by the index) with
	// their bucket, embedder and dims, so the caller can drop those
	// replaced since.
	Candidates(ctx context.Context, ids []int64) ([]StoredCandidate, error)
	// ScanNeighbours returns up to k entries nearest to sc.Vec in its
	// bucket without the index (while it is being built).
	ScanNeighbours(ctx context.Context, sc *FreeText, k int) ([]Candidate, error)

	// Refutations returns every similarity pair a child refuted
	// (Write.Refuted), so that none makes a hit again after a restart or
	// in another process that opens the store.
	Refutations(ctx context.Context) ([]Refutation, error)
	// Refuted reports whether a child refuted the pair of canonical
	// forms asked and stored for tool: another process (a replica) may
	// have since memory opened.
	Refuted(ctx context.Context, tool, asked, stored string) (bool, error)

	// Stats and List serve `nexus cache stats` and `nexus cache list`.
	Stats(ctx context.Context) (perTool []ToolStats, err error)
	List(ctx context.Context, limit int) ([]EntryInfo, error)

	// Busy reports an error that means "held by another process": stores
	// back off for a while instead of queueing every call behind it.
	Busy(err error) bool
	Close() error
}

// Look is what a store saw since its last look.
type Look struct {
	Epoch       uint64 // what reads made now must present to the hot layer
	Moved       bool   // another process committed: new vectors may exist
	Invalidated bool   // ... and invalidated: held vectors may be gone
}

// Write is one transaction of Memory: a result to store, invalidations to
// apply, batched counters to write and expired entries to purge.
type Write struct {
	Record *Record // stored only if its tool's generation is still Gen
	Gen    int64

	Invalidate []string // invalidation patterns: "*", "server.*", "server.tool"
	// Soft are patterns whose entries are marked stale, not deleted: not
	// served as fresh, still there for stale-if-error.
	Soft []string

	Touches map[int64]Touch
	Tools   map[string]*Counters
	// BeforeEvict returns this process's batched recency, written before
	// an eviction so that recent hits count; nil: none.
	BeforeEvict func() (map[int64]Touch, map[string]*Counters)

	// Refuted are similarity pairs a child refuted, kept for good (a
	// pair already kept is left as it is).
	Refuted []Refutation

	Purge  bool // delete up to PurgeLimit expired entries
	Now    int64
	Bounds Bounds
}

// PurgeLimit is how many expired entries one Write.Purge deletes at most,
// so a purge never holds the write lock for long.
const PurgeLimit = 1000

// GenNames are the generation counters an entry of t depends on.
func GenNames(t Tool) (tool, server string) {
	return "tool:" + t.Name, "server:" + t.Server
}

// PatternGen returns the generation an invalidation pattern bumps and the
// column and value of the entries it deletes ("" column: all).
func PatternGen(p string) (gen, column, value string) {
	switch {
	case p == "*":
		return "*", "", ""
	case len(p) > 2 && p[len(p)-2:] == ".*":
		return "server:" + p[:len(p)-2], "server", p[:len(p)-2]
	}
	return "tool:" + p, "tool", p
}

// Entry is what a lookup finds.
type Entry struct {
	ID         int64
	Result     []byte
	CreatedAt  int64
	DurationMS int64
	Stale      bool          // marked by a soft invalidation (Write.Soft)
	tmpl       *metaTemplate // set by the hot layer
}

// Record is an entry to store.
type Record struct {
	Key         []byte
	Tool        Tool
	Scope       string
	Fingerprint string
	Args        []byte
	Result      []byte
	DurationMS  int64
	CreatedAt   int64
	ExpiresAt   sql.NullInt64
	Text        *FreeText // non-nil with a vector: stored for similarity hits
}

// StoredCandidate is an entry found by the index, as the store holds it.
type StoredCandidate struct {
	Candidate
	Bucket   []byte
	Embedder string
	Dims     int
}

// Refutation is a similarity pair the child refuted: the asked and the
// stored text's canonical forms (memory/canon), and the rewrites that
// made the pair a hit, no longer trusted for the tool.
type Refutation struct {
	Tool     string
	Asked    string
	Stored   string
	Rewrites []string
	At       int64 // unix ms
}

// Bounds are the size limits eviction keeps.
type Bounds struct {
	MaxEntries int64
	MaxBytes   int64
}
