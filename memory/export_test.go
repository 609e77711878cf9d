package memory

import (
	"context"
	"time"

	"github.com/nexus-mcp/nexus/memory/embedder"
)

// What the tests of package memory_test (Memory over a real store, which
// package memory cannot import) read of memory's insides.

var (
	CacheKey    = cacheKey
	Fingerprint = fingerprint
	Partition   = partition
)

const SemanticCandidates = semanticCandidates

// HotHas reports whether m's hot layer holds key.
func (m *Memory) HotHas(key []byte) bool {
	if m.hot == nil {
		return false
	}
	_, _, ok := m.hot.get(key)
	return ok
}

// StoreOf returns m's store.
func (m *Memory) StoreOf() Store { return m.st }

// EmbedderOf returns m's embedder.
func (m *Memory) EmbedderOf() embedder.Embedder { return m.emb }

// NowOf returns m's clock's time.
func (m *Memory) NowOf() time.Time { return m.now() }

// IndexSize reports whether m's similarity index is built, and its size.
func (m *Memory) IndexSize() (bool, int) { return m.vi.ready.Load(), m.vi.idx.size() }

// CatchUpIndex has m's index read what the store holds beyond it.
func (m *Memory) CatchUpIndex(ctx context.Context) error {
	m.vi.catchUp.Store(true)
	return m.vi.refresh(ctx, m.st)
}

// IndexNeighbours searches m's index for the k nearest neighbours of sc.
func (m *Memory) IndexNeighbours(ctx context.Context, sc *FreeText, k int) ([]Candidate, error) {
	return m.vi.neighbours(ctx, m.st, sc, k)
}

// FreeTextOf is the free text of a call of t with args, under m's rules.
func (m *Memory) FreeTextOf(t Tool, args []byte) *FreeText {
	return m.prepareSemantic(&call{t: t, r: m.rules.Load(), args: args})
}

// ClaimAfterMiss claims the flight of a call of t with args as a lookup
// that found no entry would, and returns what the claim served (done
// true: another process's answer).
func (m *Memory) ClaimAfterMiss(ctx context.Context, t Tool, args []byte) (res []byte, done bool, release func(), err error) {
	r := m.rules.Load()
	c := &call{t: t, r: r, ttl: r.ttl(t), key: cacheKey(t.Name, "", fingerprint(args))}
	res, done, _, release, err = m.claimFlight(ctx, c, &flight{done: make(chan struct{})}, 0, -1)
	return res, done, release, err
}

// WilsonForTest is wilson.
func WilsonForTest(k, n int64) Interval { return wilson(k, n) }
