package memory_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	. "github.com/nexus-mcp/nexus/memory"
	. "github.com/nexus-mcp/nexus/memory/memorytest"

	"github.com/nexus-mcp/nexus/memory/embedder"
	"github.com/nexus-mcp/nexus/tests/benchplot"
)

// BenchmarkSimilarityLookup measures the nearest-neighbour lookup of a
// similarity hit at 1k, 10k and 100k entries, in one bucket and spread
// over 100, through the in-memory index and through vec0's exact scan,
// and the index's recall against the exact scan: of the exact top 8 with
// similarity >= 0.70 (the neighbours memory may serve), the share the
// index also returns (recall@8), and how often both rank the same entry
// first (top1). It also reports what the index costs per 100k entries.
// NEXUS_BENCH_1M=1 adds 1M entries (2 GiB of vectors in memory.db). With
// NEXUS_PLOTS=DIR it draws both lookups in one bucket against the entries in
// DIR/similarity-lookup.svg.
//
//	NEXUS_PLOTS=$PWD/docs/img go test ./memory -run '^$' -bench SimilarityLookup -benchtime 200x
func BenchmarkSimilarityLookup(b *testing.B) {
	sizes := []int{1_000, 10_000, 100_000}
	if os.Getenv("NEXUS_BENCH_1M") != "" {
		sizes = append(sizes, 1_000_000)
	}
	var xs, indexP50, exactP50 []float64
	defer func() {
		dir := os.Getenv("NEXUS_PLOTS")
		if dir == "" || len(xs) == 0 {
			return
		}
		p := benchplot.Plot{Title: "Similarity lookup p50 against entries in one bucket", XLabel: "entries in the bucket", YLabel: "µs", LogX: true, LogY: true,
			Series: []benchplot.Series{{Name: "in-memory index", X: xs, Y: indexP50}, {Name: "exact scan (vec0)", X: xs, Y: exactP50}}}
		if err := p.WriteFile(filepath.Join(dir, "similarity-lookup.svg")); err != nil {
			b.Fatal(err)
		}
	}()
	for _, n := range sizes {
		for _, buckets := range []int{1, 100} {
			b.Run(fmt.Sprintf("entries=%d/buckets=%d", n, buckets), func(b *testing.B) {
				m := openTest(b, Options{MaxEntries: 2 * n, FlushInterval: time.Hour, Logger: Logger(b)})
				m.SetSettings(Kept(Settings{TTL: map[string]TTL{"*": {Never: true}}}))
				m.WaitIndex(context.Background())
				texts := populateSemantic(b, m, n, buckets)
				ctx := context.Background()
				before := heapInUse()
				if err := m.CatchUpIndex(ctx); err != nil {
					b.Fatal(err)
				}
				after := heapInUse()
				emb := embedder.NewLexical()
				query := func(i int) *FreeText {
					k := (i * 7919) % n
					// A paraphrase-like query: the stored text with one word changed.
					text := "latest " + texts[k]
					sc := m.FreeTextOf(SearchTool(), []byte(SearchArgs(text, k%buckets)))
					sc.Embedder, sc.Vec = emb.Identity(), emb.Vector(text)
					sc.Part = Partition(sc.Embedder.ID(), embedder.LexicalDims, sc.Bucket)
					return sc
				}
				measure := func(find func(sc *FreeText) []Candidate, runs int) ([]time.Duration, [][]Candidate) {
					lat := make([]time.Duration, runs)
					found := make([][]Candidate, runs)
					for i := range runs {
						sc := query(i)
						start := time.Now()
						found[i] = find(sc)
						lat[i] = time.Since(start)
					}
					return lat, found
				}
				indexed := func(sc *FreeText) []Candidate {
					cs, err := m.IndexNeighbours(ctx, sc, SemanticCandidates)
					if err != nil {
						b.Fatal(err)
					}
					return cs
				}
				exact := func(sc *FreeText) []Candidate {
					cs, err := m.StoreOf().ScanNeighbours(ctx, sc, SemanticCandidates)
					if err != nil {
						b.Fatal(err)
					}
					return cs
				}
				runs := max(b.N, 50)
				b.ResetTimer()
				ilat, ifound := measure(indexed, runs)
				b.StopTimer()
				elat, efound := measure(exact, min(runs, 50))
				relevant, recalled, top1 := 0, 0, 0
				for i := range efound {
					ids := make([]int64, 0, len(ifound[i]))
					for _, c := range ifound[i] {
						ids = append(ids, c.ID)
					}
					for _, c := range efound[i] {
						if c.Similarity >= LexicalThresholds.Verify {
							relevant++
							if slices.Contains(ids, c.ID) {
								recalled++
							}
						}
					}
					if len(efound[i]) > 0 && len(ifound[i]) > 0 && efound[i][0].ID == ifound[i][0].ID {
						top1++
					}
				}
				b.ReportMetric(p50(ilat), "index-p50-µs")
				b.ReportMetric(p50(elat), "exact-p50-µs")
				b.ReportMetric(float64(recalled)/float64(max(relevant, 1)), "recall@8")
				b.ReportMetric(float64(top1)/float64(len(efound)), "top1")
				b.ReportMetric(float64(after-before)/float64(n)*100_000/(1<<20), "index-MiB/100k")
				b.ReportMetric(0, "ns/op")
				if buckets == 1 && (len(xs) == 0 || xs[len(xs)-1] != float64(n)) {
					xs, indexP50, exactP50 = append(xs, float64(n)), append(indexP50, p50(ilat)), append(exactP50, p50(elat))
				} else if buckets == 1 {
					indexP50[len(xs)-1], exactP50[len(xs)-1] = p50(ilat), p50(elat)
				}
			})
		}
	}
}

func p50(lat []time.Duration) float64 {
	s := slices.Clone(lat)
	slices.Sort(s)
	return float64(s[len(s)/2].Nanoseconds()) / 1000
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}
