package tests

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
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
// serve` with n stdio servers configured, all seen before: the time to the
// answer of initialize and of the first tools/list, and the gateway's resident
// memory a second later (the gateway alone: its children's is not counted),
// with the servers lazy (the default) and eager; and the same two answers of
// one server started directly, for scale.
//
//	go test ./tests -run '^$' -bench LazyStart -benchtime 10x
func BenchmarkLazyStart(b *testing.B) {
	if raceEnabled {
		b.Skip("benchmarks need binaries built without -race")
	}
	t := &testing.T{}
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
	}
	b.Run("direct", func(b *testing.B) {
		measure(b, built.sample, []string{"code-kg"}, os.Environ())
	})
	for _, n := range []int{1, 20, 50} {
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
}
