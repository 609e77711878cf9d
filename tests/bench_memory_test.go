package tests

import (
	"os"
	"slices"
	"testing"
	"time"
)

// BenchmarkMemoryHit measures, in one run, a direct stdio call of the
// fixture child's trivial read against the same call answered by memory
// through `nexus serve` (the hot layer), and reports their p50 ratio. The
// gateway's CPU profile of the hit session goes to $BENCH_HIT_CPUPROFILE.
//
//	go test ./tests -run '^$' -bench MemoryHit -benchtime 3000x
func BenchmarkMemoryHit(b *testing.B) {
	if raceEnabled {
		b.Skip("benchmarks need binaries built without -race")
	}
	t := &testing.T{}
	h := newHome(t, nil)
	h.writeConfig(map[string]any{"servers": map[string]any{"fx": map[string]any{"command": built.fixture}}})
	args := map[string]any{"message": "the same read"}
	sessions := []struct {
		name string
		s    func() *session
		tool string
	}{
		{"direct", func() *session { return startSession(t, h.env(), built.fixture) }, "echo"},
		{"hit", func() *session {
			return startSession(t, h.env("NEXUS_CPUPROFILE="+os.Getenv("BENCH_HIT_CPUPROFILE")), built.nexus, "serve")
		}, "fx__echo"},
	}
	p50 := map[string]float64{}
	for _, sn := range sessions {
		s := sn.s()
		for range 300 {
			s.call(sn.tool, args)
		}
		if sn.name == "hit" {
			if st := s.call(sn.tool, args).cacheStatus(); st != "hit" {
				b.Fatalf("not a memory hit: %q", st)
			}
		}
		lat := make([]time.Duration, b.N)
		for i := range b.N {
			start := time.Now()
			s.call(sn.tool, args)
			lat[i] = time.Since(start)
		}
		s.close()
		if t.Failed() {
			b.Fatalf("%s failed", sn.name)
		}
		slices.Sort(lat)
		p50[sn.name] = float64(lat[len(lat)/2].Microseconds())
	}
	b.ReportMetric(p50["direct"], "direct-p50-µs")
	b.ReportMetric(p50["hit"], "hit-p50-µs")
	b.ReportMetric(p50["hit"]/p50["direct"], "hit/direct-p50-x")
	b.ReportMetric(0, "ns/op")
}
