package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/tests/benchplot"
)

// rssNow is a process's resident set size now (VmRSS), or -1 where /proc has none.
func rssNow(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb << 10
		}
	}
	return -1
}

// BenchmarkLazyStart measures what a client waits for when it starts `nexus
// serve` with n stdio servers configured (1, 10, 20, 50, 100), all seen before:
// the time to the answer of initialize and of the first tools/list, and the
// gateway's resident memory a second later (the gateway alone: its children's
// is not counted), with the servers lazy (the default) and eager; and the same
// two answers of one server started directly, for scale. With NEXUS_PLOTS=DIR
// it draws both against n in DIR/servers-first-list.svg and DIR/servers-rss.svg.
//
//	NEXUS_PLOTS=$PWD/docs/img go test ./tests -run '^$' -bench LazyStart -benchtime 5x
func BenchmarkLazyStart(b *testing.B) {
	if raceEnabled {
		b.Skip("benchmarks need binaries built without -race")
	}
	t := &testing.T{}
	sizes := []int{1, 10, 20, 50, 100}
	type result struct{ list, rss float64 }
	results := map[string]result{} // by sub-benchmark, its last (largest) run
	measure := func(b *testing.B, command string, args []string, env []string) {
		var inits, lists []time.Duration
		var rss int64
		for range b.N {
			start := time.Now()
			s := startSession(t, env, command, args...) // returns once initialize is answered
			inits = append(inits, time.Since(start))
			if _, err := s.request("tools/list", nil); err != nil {
				b.Fatalf("tools/list: %+v", err)
			}
			lists = append(lists, time.Since(start))
			time.Sleep(time.Second)
			rss = max(rss, rssNow(s.cmd.Process.Pid))
			s.close()
		}
		slices.Sort(inits)
		slices.Sort(lists)
		b.ReportMetric(float64(inits[len(inits)/2].Microseconds())/1000, "initialize-p50-ms")
		b.ReportMetric(float64(lists[len(lists)/2].Microseconds())/1000, "first-list-p50-ms")
		b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
		results[b.Name()] = result{float64(lists[len(lists)/2].Microseconds()) / 1000, float64(rss) / (1 << 20)}
	}
	b.Run("direct", func(b *testing.B) {
		measure(b, built.sample, []string{"code-kg"}, os.Environ())
	})
	for _, n := range sizes {
		servers := map[string]any{}
		for i := range n {
			servers[fmt.Sprintf("s%02d", i)] = map[string]any{"command": built.sample, "args": []string{"code-kg"}}
		}
		for _, start := range []string{"lazy", "eager"} {
			h := newHome(t, map[string]any{"servers": servers, "children": map[string]any{"start": start},
				"policy": map[string]any{"default": map[string]any{"allow": []string{"*"}}}})
			// A first run sees every server, so that the next ones know their lists.
			names := make([]string, 0, n)
			for name := range servers {
				names = append(names, name)
			}
			h.serveStdioReady(names).close()
			b.Run(fmt.Sprintf("%s-%d", start, n), func(b *testing.B) {
				measure(b, built.nexus, []string{"serve"}, h.env())
			})
		}
	}
	list := benchplot.Plot{Title: "Start to the first tools/list (p50)", XLabel: "stdio servers configured", YLabel: "ms", LogX: true}
	mem := benchplot.Plot{Title: "Gateway RSS a second after the first tools/list", XLabel: "stdio servers configured", YLabel: "MiB", LogX: true}
	for _, start := range []string{"lazy", "eager"} {
		l, m := benchplot.Series{Name: start}, benchplot.Series{Name: start + " (gateway alone)"}
		for _, n := range sizes {
			r, ok := results[fmt.Sprintf("BenchmarkLazyStart/%s-%d", start, n)]
			if !ok {
				continue
			}
			l.X, l.Y = append(l.X, float64(n)), append(l.Y, r.list)
			m.X, m.Y = append(m.X, float64(n)), append(m.Y, r.rss)
		}
		list.Series, mem.Series = append(list.Series, l), append(mem.Series, m)
	}
	if direct, ok := results["BenchmarkLazyStart/direct"]; ok {
		list.Series = append(list.Series, benchplot.Series{Name: "one server directly", X: []float64{1, float64(sizes[len(sizes)-1])}, Y: []float64{direct.list, direct.list}})
	}
	writePlot(b, "servers-first-list.svg", list)
	writePlot(b, "servers-rss.svg", mem)
}

// writePlot writes p to $NEXUS_PLOTS/name when NEXUS_PLOTS names a directory.
func writePlot(b *testing.B, name string, p benchplot.Plot) {
	dir := os.Getenv("NEXUS_PLOTS")
	if dir == "" {
		return
	}
	if err := p.WriteFile(filepath.Join(dir, name)); err != nil {
		b.Fatal(err)
	}
	b.Logf("wrote %s", filepath.Join(dir, name))
}
