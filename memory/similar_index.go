package memory

import (
	"container/heap"
	"math"
	"math/bits"
	"slices"
	"sync"
)

// index is the in-memory nearest-neighbour index of the stored vectors,
// one list per partition (embedder and bucket), so that a similarity
// lookup does not scan the bucket in SQLite (vec0 scans every vector of
// the partition: ~200 ms at 100k entries).
//
// Each vector is held twice, both quantized: as two bit planes (which
// components are positive, which negative: 2 bits per dimension; unlike
// sign bits alone this keeps the zeros of sparse vectors such as the
// lexical embedder's apart from negatives) and as int8 with one scale per
// vector. A search ranks the whole partition by the Hamming distance of
// the bit planes (a few POPCNTs per vector), re-ranks the best
// indexRerank by the dot product of the query's float32 vector with the
// int8 ones, and returns the best k with that similarity (quantization
// error under 0.01). At 512 dimensions an entry costs 128 + 512 + 16
// bytes of vectors plus two map slots: 73-79 MiB per 100k entries as
// measured by BenchmarkSimilarityLookup.
//
// The index is a cache of SQLite: built from it when memory opens, told
// of this process's stores, brought up to date with other processes'
// stores when data_version moves, and pruned of entries found gone.
// Every candidate is read back from SQLite before it is served, so an
// entry the index still holds but SQLite no longer does is never served.
type index struct {
	mu    sync.RWMutex
	parts map[int64]*partIndex
	where map[int64]int64 // entry id -> partition
	count int
}

// indexRerank is how many prefilter candidates are re-ranked by the int8
// dot product.
const indexRerank = 256

type partIndex struct {
	dims   int
	words  int       // uint64 words per bit plane
	ids    []int64   // entry ids
	planes []uint64  // per vector: words positive-bit words, then words negative-bit words
	q      []int8    // per vector: dims components
	scale  []float32 // per vector
	pos    map[int64]int
}

func newIndex() *index {
	return &index{parts: map[int64]*partIndex{}, where: map[int64]int64{}}
}

// add holds vector v (unit length) of entry id in partition part,
// replacing what id held before.
func (x *index) add(part, id int64, v []float32) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if old, ok := x.where[id]; ok {
		x.removeLocked(old, id)
	}
	p := x.parts[part]
	if p == nil || p.dims != len(v) {
		if p != nil {
			for _, old := range p.ids {
				delete(x.where, old)
				x.count--
			}
		}
		w := (len(v) + 63) / 64
		p = &partIndex{dims: len(v), words: w, pos: map[int64]int{}}
		x.parts[part] = p
	}
	var maxAbs float32
	for _, f := range v {
		maxAbs = max(maxAbs, float32(math.Abs(float64(f))))
	}
	scale := maxAbs / 127
	if scale == 0 {
		scale = 1
	}
	planes := make([]uint64, 2*p.words)
	for i, f := range v {
		switch {
		case f > 0:
			planes[i/64] |= 1 << (i % 64)
		case f < 0:
			planes[p.words+i/64] |= 1 << (i % 64)
		}
		p.q = append(p.q, int8(math.Round(float64(f/scale))))
	}
	p.pos[id] = len(p.ids)
	p.ids = append(p.ids, id)
	p.planes = append(p.planes, planes...)
	p.scale = append(p.scale, scale)
	x.where[id] = part
	x.count++
}

// remove forgets entry id.
func (x *index) remove(id int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if part, ok := x.where[id]; ok {
		x.removeLocked(part, id)
	}
}

// removeLocked swaps id's vector with the partition's last one and
// truncates.
func (x *index) removeLocked(part, id int64) {
	p := x.parts[part]
	delete(x.where, id)
	if p == nil {
		return
	}
	i, ok := p.pos[id]
	if !ok {
		return
	}
	last := len(p.ids) - 1
	if i != last {
		moved := p.ids[last]
		p.ids[i] = moved
		p.pos[moved] = i
		copy(p.planes[2*p.words*i:2*p.words*(i+1)], p.planes[2*p.words*last:])
		copy(p.q[p.dims*i:p.dims*(i+1)], p.q[p.dims*last:])
		p.scale[i] = p.scale[last]
	}
	delete(p.pos, id)
	p.ids = p.ids[:last]
	p.planes = p.planes[:2*p.words*last]
	p.q = p.q[:p.dims*last]
	p.scale = p.scale[:last]
	x.count--
	if last == 0 {
		delete(x.parts, part)
	}
}

// size returns how many vectors the index holds.
func (x *index) size() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.count
}

// hit is one neighbour found by search.
type indexHit struct {
	id         int64
	similarity float64
}

// search returns up to k neighbours of v (unit length) in part, most
// similar first.
func (x *index) search(part int64, v []float32, k int) []indexHit {
	x.mu.RLock()
	defer x.mu.RUnlock()
	p := x.parts[part]
	if p == nil || p.dims != len(v) || len(p.ids) == 0 {
		return nil
	}
	w := p.words
	qp := make([]uint64, 2*w)
	for i, f := range v {
		switch {
		case f > 0:
			qp[i/64] |= 1 << (i % 64)
		case f < 0:
			qp[w+i/64] |= 1 << (i % 64)
		}
	}
	// Prefilter: the indexRerank smallest Hamming distances (a max-heap).
	h := &distHeap{}
	limit := min(indexRerank, len(p.ids))
	for i := range p.ids {
		row := p.planes[2*w*i : 2*w*(i+1)]
		d := 0
		for j, q := range qp {
			d += bits.OnesCount64(q ^ row[j])
		}
		if h.Len() < limit {
			heap.Push(h, distItem{i, d})
		} else if d < (*h)[0].d {
			(*h)[0] = distItem{i, d}
			heap.Fix(h, 0)
		}
	}
	// Re-rank by the float query · int8 vector.
	out := make([]indexHit, 0, h.Len())
	for _, it := range *h {
		row := p.q[p.dims*it.i : p.dims*(it.i+1)]
		var dot float32
		for j, f := range v {
			dot += f * float32(row[j])
		}
		out = append(out, indexHit{id: p.ids[it.i], similarity: float64(dot * p.scale[it.i])})
	}
	slices.SortFunc(out, func(a, b indexHit) int {
		switch {
		case a.similarity > b.similarity:
			return -1
		case a.similarity < b.similarity:
			return 1
		}
		return 0
	})
	if len(out) > k {
		out = out[:k]
	}
	return out
}

type distItem struct{ i, d int }

// distHeap is a max-heap on d.
type distHeap []distItem

func (h distHeap) Len() int           { return len(h) }
func (h distHeap) Less(i, j int) bool { return h[i].d > h[j].d }
func (h distHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *distHeap) Push(x any)        { *h = append(*h, x.(distItem)) }
func (h *distHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
