package memory

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// indexState keeps the in-memory index (see similar_index.go) in step
// with the store, which stays the truth. The index is built in the
// background when memory opens; until it is ready, similarity lookups
// scan the bucket in the store.
type indexState struct {
	idx   *index
	ready atomic.Bool

	// Set when another process committed: new vectors may exist
	// (catchUp), and after an invalidation, held ones may be gone
	// (prune). Done by the next similarity lookup.
	catchUp, prune atomic.Bool
	// always makes every lookup catch up: a store that cannot tell
	// when another process committed (PostgreSQL between notifications).
	always bool

	mu     sync.Mutex // serialises build, catch-up and prune
	cursor int64      // where the next catch-up starts (store-defined)
}

// build reads every stored vector into the index.
func (is *indexState) build(ctx context.Context, s Store) error {
	is.mu.Lock()
	defer is.mu.Unlock()
	cur, err := s.VectorsSince(ctx, 0, is.add)
	if err != nil {
		return fmt.Errorf("build index: %w", err)
	}
	is.cursor = cur
	is.ready.Store(true)
	return nil
}

func (is *indexState) add(id, part int64, vec []float32) { is.idx.add(part, id, vec) }

// refresh applies what other processes committed since the last look:
// new vectors, and after an invalidation, entries gone.
func (is *indexState) refresh(ctx context.Context, s Store) error {
	if !is.always && !is.catchUp.Load() && !is.prune.Load() {
		return nil
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.catchUp.Swap(false) || is.always {
		cur, err := s.VectorsSince(ctx, is.cursor, is.add)
		if err != nil {
			is.catchUp.Store(true)
			return fmt.Errorf("index catch-up: %w", err)
		}
		is.cursor = cur
	}
	if is.prune.Swap(false) {
		if err := is.pruneGone(ctx, s); err != nil {
			is.prune.Store(true)
			return err
		}
	}
	return nil
}

// pruneGone drops the entries the store no longer holds.
func (is *indexState) pruneGone(ctx context.Context, s Store) error {
	live, err := s.LiveVectorIDs(ctx)
	if err != nil {
		return fmt.Errorf("index prune: %w", err)
	}
	is.idx.mu.Lock()
	var gone []int64
	for id := range is.idx.where {
		if !live[id] {
			gone = append(gone, id)
		}
	}
	for _, id := range gone {
		is.idx.removeLocked(is.idx.where[id], id)
	}
	is.idx.mu.Unlock()
	return nil
}

// indexNeighbours returns up to k stored entries nearest to sc.vec in
// its bucket, made by the same embedder, most similar first, found with
// the index and read back from the store. Candidates the store no longer
// holds are dropped from the index.
func (is *indexState) neighbours(ctx context.Context, s Store, sc *FreeText, k int) ([]Candidate, error) {
	hits := is.idx.search(sc.Part, sc.Vec, k)
	if len(hits) == 0 {
		return nil, nil
	}
	sim := make(map[int64]float64, len(hits))
	ids := make([]int64, len(hits))
	for i, h := range hits {
		ids[i] = h.id
		sim[h.id] = h.similarity
	}
	stored, err := s.Candidates(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("nearest neighbours: %w", err)
	}
	var out []Candidate
	found := map[int64]bool{}
	for _, cd := range stored {
		found[cd.ID] = true
		if string(cd.Bucket) != string(sc.Bucket) || cd.Embedder != sc.Embedder.ID() || cd.Dims != len(sc.Vec) {
			continue // replaced by an entry of another bucket or embedder
		}
		cd.Similarity = sim[cd.ID]
		out = append(out, cd.Candidate)
	}
	for _, h := range hits {
		if !found[h.id] {
			is.idx.remove(h.id)
		}
	}
	SortCandidates(out)
	return out, nil
}

// SortCandidates orders neighbours most similar first, ties as they came:
// the order Memory tries them in.
func SortCandidates(cs []Candidate) {
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && cs[j].Similarity > cs[j-1].Similarity; j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}
