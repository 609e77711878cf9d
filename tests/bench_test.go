package tests

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkGateway measures what Nexus adds to a tools/call of a trivial read-only
// tool: the same client calls the fixture child directly over stdio, through the
// thinnest possible relay (tests/relay: copies bytes, parses nothing: the floor of one
// extra process hop), and through `nexus serve` (stdio front, stdio child),
// sequentially and 8 calls at a time. All run in the same benchmark so their ratios
// come from one run on a noisy machine. "nexus" runs with memory off, the fair
// comparison with a relay; "nexus-memory-hit" asks the same read again and again,
// "nexus-memory-miss" a new one each time (memory looks it up, forwards it and
// stores the answer before answering). The fixture speaks the legacy era only;
// the "dual" targets put an mcp-go server of both eras (tests/sdkpeer) behind
// Nexus: "dual" in the era Nexus picks by default, "dual-legacy" and
// "dual-modern" in the era servers.fx.protocolVersion pins.
//
//	go test ./tests -run '^$' -bench 'Gateway$' -benchtime 2000x
func BenchmarkGateway(b *testing.B) {
	if raceEnabled {
		b.Skip("benchmarks need binaries built without -race")
	}
	t := &testing.T{}
	h := newHome(t, nil)
	h.writeConfig(map[string]any{"servers": map[string]any{"fx": map[string]any{"command": built.fixture}}})
	peer, err := sdkPeer()
	if err != nil {
		b.Fatal(err)
	}
	dual := func(version string) *home {
		fx := map[string]any{"command": peer, "args": []string{"mcp-go"}}
		if version != "" {
			fx["protocolVersion"] = version
		}
		p := newHome(t, nil)
		p.writeConfig(map[string]any{"servers": map[string]any{"fx": fx}})
		return p
	}
	byDefault, legacy, modern := dual(""), dual("2025-11-25"), dual("2026-07-28")
	targets := []struct {
		name string
		s    func() *session
		tool string
		args func(i int) map[string]any
	}{
		{"direct", func() *session { return startSession(t, h.env(), built.fixture) }, "echo", distinct},
		{"relay", func() *session { return startSession(t, h.env(), built.relay, built.fixture) }, "echo", distinct},
		{"nexus", func() *session {
			return startSession(t, h.env("NEXUS_CPUPROFILE="+os.Getenv("BENCH_NEXUS_CPUPROFILE")), built.nexus, "serve", "--no-memory")
		}, "fx__echo", distinct},
		{"dual", func() *session { return startSession(t, byDefault.env(), built.nexus, "serve", "--no-memory") }, "fx__echo", distinct},
		{"dual-legacy", func() *session { return startSession(t, legacy.env(), built.nexus, "serve", "--no-memory") }, "fx__echo", distinct},
		{"dual-modern", func() *session { return startSession(t, modern.env(), built.nexus, "serve", "--no-memory") }, "fx__echo", distinct},
		{"nexus-memory-hit", func() *session { return startSession(t, h.env(), built.nexus, "serve") }, "fx__echo", same},
		{"nexus-memory-miss", func() *session { return startSession(t, h.env(), built.nexus, "serve") }, "fx__echo", unseen()},
	}
	seq := map[string][]time.Duration{}
	rate := map[string]float64{}
	cpu := map[string]float64{}
	for _, tg := range targets {
		s := tg.s()
		for i := 0; i < 200; i++ { // warm up: connections, caches, the first memory entry
			if res := s.call(tg.tool, tg.args(i)); res.IsError {
				b.Fatalf("%s: %s", tg.name, res.text())
			}
		}
		before, known := processCPU(s.cmd.Process.Pid)
		seq[tg.name], rate[tg.name] = measure(b.N, func(i int) { s.call(tg.tool, tg.args(i)) })
		if after, _ := processCPU(s.cmd.Process.Pid); known {
			cpu[tg.name] = float64((after - before).Microseconds()) / float64(b.N+8*max(b.N/8, 1))
		}
		s.close()
		if t.Failed() {
			b.Fatalf("%s failed", tg.name)
		}
	}
	reportLatencies(b, seq, rate)
	for name, us := range cpu {
		// The CPU the process itself spent per call (the direct child's, the
		// relay's, Nexus's, not counting the child behind them): what limits
		// throughput on a machine with few cores, and steady where wall-clock
		// figures are noisy.
		b.ReportMetric(us, name+"-cpu-µs/call")
	}
	p := quantileMicros
	b.ReportMetric(p(seq["nexus"], 0.5)/p(seq["relay"], 0.5), "nexus/relay-p50-x")
	b.ReportMetric(p(seq["nexus"], 0.5)/p(seq["direct"], 0.5), "nexus/direct-p50-x")
	b.ReportMetric(p(seq["relay"], 0.5)/p(seq["direct"], 0.5), "relay/direct-p50-x")
	b.ReportMetric(rate["nexus"]/rate["direct"], "nexus/direct-8way-x")
	b.ReportMetric(rate["nexus"]/rate["relay"], "nexus/relay-8way-x")
	b.ReportMetric(p(seq["nexus-memory-hit"], 0.5)/p(seq["direct"], 0.5), "hit/direct-p50-x")
	b.ReportMetric(p(seq["nexus-memory-miss"], 0.5)/p(seq["relay"], 0.5), "miss/relay-p50-x")
	b.ReportMetric(p(seq["dual"], 0.5)/p(seq["dual-legacy"], 0.5), "default/pinned-p50-x")
	b.ReportMetric(rate["dual"]/rate["dual-legacy"], "default/pinned-8way-x")
	b.ReportMetric(p(seq["dual-modern"], 0.5)/p(seq["dual-legacy"], 0.5), "modern/pinned-p50-x")
	b.ReportMetric(rate["dual-modern"]/rate["dual-legacy"], "modern/pinned-8way-x")
	b.ReportMetric(p(seq["dual"], 0.5)/p(seq["relay"], 0.5), "dual/relay-p50-x")
}

// measure times n calls one after another, then n calls 8 at a time: each
// sequential call's latency, and the calls per second of the 8-way run.
func measure(n int, call func(i int)) ([]time.Duration, float64) {
	lat := make([]time.Duration, n)
	for i := range n {
		start := time.Now()
		call(i)
		lat[i] = time.Since(start)
	}
	start := time.Now()
	var wg sync.WaitGroup
	per := max(n/8, 1)
	for w := range 8 {
		wg.Go(func() {
			for i := range per {
				call(w*per + i)
			}
		})
	}
	wg.Wait()
	return lat, float64(8*per) / time.Since(start).Seconds()
}

// processCPU is the user and system CPU time the process pid has used so far, read
// from /proc (Linux), and whether there was any to read. (A relay that has used
// less than a clock tick reads 0, which is a figure, not its absence.)
func processCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command is in parentheses and may hold spaces: fields count from after it.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(fields) < 13 {
		return 0, false
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticksPerSecond = 100 // USER_HZ, 100 on every Linux this runs on
	return time.Duration(utime+stime) * time.Second / ticksPerSecond, true
}

func distinct(i int) map[string]any { return map[string]any{"message": fmt.Sprint("m", i)} }
func same(int) map[string]any       { return map[string]any{"message": "the same read"} }

// unseen gives arguments never given before, whatever i: the warm-up and the
// sequential and 8-way runs of one target each ask something new.
func unseen() func(int) map[string]any {
	var n atomic.Int64
	return func(int) map[string]any { return map[string]any{"message": fmt.Sprint("unseen ", n.Add(1))} }
}

// BenchmarkStartupWithAHungChild measures the time from starting `nexus serve` to the
// client's initialize answer when one configured child never answers its own
// initialize: the gateway must not wait for it.
//
//	go test ./tests -run '^$' -bench Startup -benchtime 20x
func BenchmarkStartupWithAHungChild(b *testing.B) {
	if raceEnabled {
		b.Skip("benchmarks need binaries built without -race")
	}
	t := &testing.T{}
	h := newHome(t, nil)
	h.writeConfig(map[string]any{"servers": map[string]any{
		"fx":   map[string]any{"command": built.fixture},
		"hang": map[string]any{"command": built.fixture, "env": map[string]string{"FIXTURE_MODE": "hang"}},
	}})
	lat := make([]time.Duration, 0, b.N)
	for range b.N {
		start := time.Now()
		s := startSession(t, h.env(), built.nexus, "serve", "--no-memory") // returns once initialize is answered
		lat = append(lat, time.Since(start))
		s.close()
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "initialize-p50-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "initialize-max-ms")
}

// BenchmarkObservation measures what metrics and the audit trail add to a call:
// the same stdio gateway and fixture child, once with the trail off and no
// metrics, once with --metrics and the trail on, in one run. The echo tool is
// annotated as not read-only, so every observed call is also written to the
// trail (the worst case: read-only calls that are allowed are only counted).
//
//	go test ./tests -run '^$' -bench Observation -benchtime 5000x -count 5
func BenchmarkObservation(b *testing.B) {
	if raceEnabled {
		b.Skip("benchmarks need binaries built without -race")
	}
	t := &testing.T{}
	config := func(audit bool) map[string]any {
		return map[string]any{
			"servers": map[string]any{"fx": map[string]any{"command": built.fixture,
				"annotations": map[string]any{"echo": map[string]any{"readOnlyHint": false, "destructiveHint": false}}}},
			"policy": map[string]any{"default": map[string]any{"allow": []string{"*"}}},
			"audit":  map[string]any{"enabled": audit},
		}
	}
	off, on := newHome(t, config(false)), newHome(t, config(true))
	targets := []struct {
		name string
		s    func() *session
	}{
		{"off", func() *session { return startSession(t, off.env(), built.nexus, "serve", "--no-memory") }},
		{"on", func() *session {
			return startSession(t, on.env(), built.nexus, "serve", "--no-memory", "--metrics", "127.0.0.1:0")
		}},
	}
	seq := map[string][]time.Duration{}
	rate := map[string]float64{}
	sessions := map[string]*session{}
	for _, tg := range targets {
		sessions[tg.name] = tg.s()
		for i := 0; i < 200; i++ {
			sessions[tg.name].call("fx__echo", distinct(i))
		}
		seq[tg.name] = make([]time.Duration, 0, b.N)
	}
	// Interleaved, so that both see the same moments of a noisy machine.
	for i := range b.N {
		for _, tg := range targets {
			start := time.Now()
			sessions[tg.name].call("fx__echo", distinct(i))
			seq[tg.name] = append(seq[tg.name], time.Since(start))
		}
	}
	// 8 calls at a time, in alternating rounds for the same reason.
	busy := map[string]time.Duration{}
	per := max(b.N/8/4, 1)
	for round := range 4 {
		for _, tg := range targets {
			s := sessions[tg.name]
			start := time.Now()
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Go(func() {
					for i := range per {
						s.call("fx__echo", distinct((round*8+w)*per+i))
					}
				})
			}
			wg.Wait()
			busy[tg.name] += time.Since(start)
		}
	}
	for _, tg := range targets {
		rate[tg.name] = float64(4*8*per) / busy[tg.name].Seconds()
		sessions[tg.name].close()
	}
	if t.Failed() {
		b.Fatal("a call failed")
	}
	reportLatencies(b, seq, rate)
	p := quantileMicros
	b.ReportMetric(100*(p(seq["on"], 0.5)/p(seq["off"], 0.5)-1), "p50-added-%")
	b.ReportMetric(100*(1-rate["on"]/rate["off"]), "8way-throughput-lost-%")
}

// quantileMicros is the q-quantile of lat, in microseconds.
func quantileMicros(lat []time.Duration, q float64) float64 {
	s := slices.Clone(lat)
	slices.Sort(s)
	return float64(s[int(q*float64(len(s)-1))].Microseconds())
}

// reportLatencies reports each target's p50 and p99 of sequential calls and its
// rate 8 calls at a time.
func reportLatencies(b *testing.B, seq map[string][]time.Duration, rate map[string]float64) {
	for _, name := range slices.Sorted(maps.Keys(seq)) {
		b.ReportMetric(quantileMicros(seq[name], 0.5), name+"-p50-µs")
		b.ReportMetric(quantileMicros(seq[name], 0.99), name+"-p99-µs")
		b.ReportMetric(rate[name], name+"-8way-req/s")
	}
}

// BenchmarkEras measures a tools/call through `nexus serve` (stdio front, stdio
// child, memory off) made the two ways a client may make it: in a legacy session,
// and as a 2026-07-28 request carrying its protocol fields in _meta, which Nexus
// reads and answers with the modern result fields. Both run in one benchmark, on
// one connection each, so their ratio comes from one run.
//
//	go test ./tests -run '^$' -bench Eras -benchtime 2000x
func BenchmarkEras(b *testing.B) {
	if raceEnabled {
		b.Skip("benchmarks need binaries built without -race")
	}
	t := &testing.T{}
	h := newHome(t, nil)
	h.writeConfig(map[string]any{"servers": map[string]any{"fx": map[string]any{"command": built.fixture}}})
	meta := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "e2e-test", "version": "1"}} // the session's own: a stdio connection keeps its first agent
	eras := []struct {
		name   string
		params func(i int) map[string]any
	}{
		{"legacy", func(i int) map[string]any { return map[string]any{"name": "fx__echo", "arguments": distinct(i)} }},
		{"modern", func(i int) map[string]any {
			return map[string]any{"name": "fx__echo", "arguments": distinct(i), "_meta": meta}
		}},
	}
	seq := map[string][]time.Duration{}
	rate := map[string]float64{}
	for _, era := range eras {
		profile := "" // BENCH_NEXUS_CPUPROFILE=F profiles each era's gateway into F-legacy and F-modern
		if f := os.Getenv("BENCH_NEXUS_CPUPROFILE"); f != "" {
			profile = f + "-" + era.name
		}
		s := startSession(t, h.env("NEXUS_CPUPROFILE="+profile), built.nexus, "serve", "--no-memory")
		call := func(i int) {
			if _, rpcErr := s.request("tools/call", era.params(i)); rpcErr != nil {
				b.Fatalf("%s call: %+v", era.name, rpcErr)
			}
		}
		for i := range 200 {
			call(i)
		}
		seq[era.name], rate[era.name] = measure(b.N, call)
		s.close()
		if t.Failed() {
			b.Fatalf("%s failed", era.name)
		}
	}
	reportLatencies(b, seq, rate)
	p := quantileMicros
	b.ReportMetric(p(seq["modern"], 0.5)/p(seq["legacy"], 0.5), "modern/legacy-p50-x")
	b.ReportMetric(rate["modern"]/rate["legacy"], "modern/legacy-8way-x")
}
