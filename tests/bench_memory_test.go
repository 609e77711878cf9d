package tests

import (
	"maps"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"
)

// BenchmarkMemoryHit measures, in one run, a direct stdio call of the
// fixture child's trivial read against the same call answered by memory
// through `nexus serve` (the hot layer), and reports their p50 ratio. The
// gateway's CPU profile of the hit session goes to $BENCH_HIT_CPUPROFILE.
//
// Beside them it measures the floor (tests/canned, a process that answers
// every request at once, on one P as a stdio gateway runs): "canned" waits
// for a request in a blocking read, "canned-polled" (on Linux) in the network
// poller, as Nexus does. No hit costs less than canned-polled;
// hit/floor-p50-x is what Nexus's own work adds to it.
//
//	go test ./tests -run '^$' -bench MemoryHit -benchtime 3000x
func BenchmarkMemoryHit(b *testing.B) {
	if raceEnabled {
		b.Skip("benchmarks need binaries built without -race")
	}
	t := &testing.T{}
	h := newHome(t, nil)
	h.writeConfig(map[string]any{"servers": map[string]any{"fx": map[string]any{"command": built.fixture}}})
	canned, err := cannedBin.build()
	if err != nil {
		b.Fatal(err)
	}
	args := map[string]any{"message": "the same read"}
	type target struct {
		name string
		s    func() *session
		tool string
	}
	sessions := []target{
		{"direct", func() *session { return startSession(t, h.env(), built.fixture) }, "echo"},
		{"hit", func() *session {
			return startSession(t, h.env("NEXUS_CPUPROFILE="+os.Getenv("BENCH_HIT_CPUPROFILE")), built.nexus, "serve")
		}, "fx__echo"},
		{"canned", func() *session { return startSession(t, h.env("GOMAXPROCS=1"), canned) }, "echo"},
	}
	if runtime.GOOS == "linux" { // -poll opens /proc/self/fd/0
		sessions = append(sessions,
			target{"canned-polled", func() *session { return startSession(t, h.env("GOMAXPROCS=1"), canned, "-poll") }, "echo"})
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
	for _, name := range slices.Sorted(maps.Keys(p50)) {
		b.ReportMetric(p50[name], name+"-p50-µs")
	}
	b.ReportMetric(p50["hit"]/p50["direct"], "hit/direct-p50-x")
	if floor := p50["canned-polled"]; floor > 0 {
		b.ReportMetric(floor/p50["direct"], "floor/direct-p50-x")
		b.ReportMetric(p50["hit"]/floor, "hit/floor-p50-x")
	}
	b.ReportMetric(0, "ns/op")
}
