package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
)

func randomUnit(r *rand.Rand, dims int, sparse bool) []float32 {
	v := make([]float32, dims)
	for i := range v {
		if sparse && r.IntN(10) != 0 {
			continue
		}
		v[i] = float32(r.NormFloat64())
	}
	if normalize(v) != nil {
		v[0] = 1
	}
	return v
}

// TestIndexSearch: the index finds the exact nearest neighbours of
// vectors near stored ones, with their similarity within 0.01, and
// forgets removed entries.
func TestIndexSearch(t *testing.T) {
	for _, sparse := range []bool{false, true} {
		t.Run(fmt.Sprintf("sparse=%v", sparse), func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			x := newIndex()
			vecs := map[int64][]float32{}
			for id := int64(1); id <= 2000; id++ {
				v := randomUnit(r, 128, sparse)
				vecs[id] = v
				x.add(int64(id%3), id, v)
			}
			for q := int64(1); q <= 200; q += 7 {
				// A neighbour of entry q: q plus a little noise.
				v := slices.Clone(vecs[q])
				noise := randomUnit(r, 128, sparse)
				for i := range v {
					v[i] += 0.3 * noise[i]
				}
				if err := normalize(v); err != nil {
					t.Fatal(err)
				}
				hits := x.search(q%3, v, 1)
				if len(hits) != 1 || hits[0].id != q {
					t.Fatalf("query near %d: %+v", q, hits)
				}
				if d := hits[0].similarity - Cosine(v, vecs[q]); d > 0.01 || d < -0.01 {
					t.Errorf("similarity %v, exact %v", hits[0].similarity, Cosine(v, vecs[q]))
				}
			}
			x.remove(7)
			if hits := x.search(1, vecs[7], 1); len(hits) == 1 && hits[0].id == 7 {
				t.Error("removed entry found")
			}
			if x.size() != 1999 {
				t.Errorf("size %d", x.size())
			}
			// Replacing keeps one copy.
			x.add(1, 10, vecs[10])
			if x.size() != 1999 {
				t.Errorf("size after replace %d", x.size())
			}
		})
	}
}

// TestIndexFollowsOtherProcesses: a paraphrase stored by another
// connection is found through the index, and an invalidation there
// stops it being served.
func TestIndexFollowsOtherProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	m1 := openTest(t, Options{Path: path})
	<-m1.indexDone
	m2 := openTest(t, Options{Path: path})
	c := &child{}
	do(t, m2, "", searchTool, q("postgres connection pool settings", 10), c)
	res := do(t, m1, "", searchTool, q("connection pool settings for postgres", 10), c)
	if st, _, _ := semReport(t, res); st != StatusSemanticHit {
		t.Fatalf("paraphrase of the other connection's entry: %s", st)
	}
	if !m1.vi.ready.Load() || m1.vi.idx.size() != 1 {
		t.Fatalf("index ready %v size %d", m1.vi.ready.Load(), m1.vi.idx.size())
	}
	if err := m2.MarkStale(context.Background(), searchTool.Server); err != nil {
		t.Fatal(err)
	}
	if st := status(t, do(t, m1, "", searchTool, q("settings of the postgres connection pool", 10), c)); st != StatusMiss {
		t.Fatalf("after invalidation: %s", st)
	}
	// The stale entry keeps its vector (similarity never serves it); the
	// miss just stored its own.
	if n := m1.vi.idx.size(); n != 2 {
		t.Errorf("index holds %d vectors, want 2", n)
	}
}

// TestIndexBuiltAtOpen: a memory opened on a database with vectors finds
// them through the index.
func TestIndexBuiltAtOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	m1 := openTest(t, Options{Path: path})
	c := &child{}
	do(t, m1, "", searchTool, q("postgres connection pool settings", 10), c)
	m1.Close()
	m2 := openTest(t, Options{Path: path})
	<-m2.indexDone
	if n := m2.vi.idx.size(); n != 1 {
		t.Fatalf("index holds %d vectors, want 1", n)
	}
	res := do(t, m2, "", searchTool, q("connection pool settings for postgres", 10), c)
	if st, _, _ := semReport(t, res); st != StatusSemanticHit {
		t.Fatalf("paraphrase after reopening: %s", st)
	}
}
