//go:build linux

package tests

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/tests/benchplot"
)

// BenchmarkHTTPSessions measures what open HTTP sessions cost one `nexus serve
// --http` (memory off, the fixture child behind it): with 1, 10, 100 and 1,000
// sessions open (each initialized and used by one call, no stream open), the
// p50 of a tools/call of a session picked in turn among them, and the gateway's
// RSS a second later. With NEXUS_PLOTS=DIR it draws both against the sessions
// in DIR/http-sessions.svg.
//
//	NEXUS_PLOTS=$PWD/docs/img go test ./tests -run '^$' -bench HTTPSessions -benchtime 500x
func BenchmarkHTTPSessions(b *testing.B) {
	if raceEnabled {
		b.Skip("benchmarks need binaries built without -race")
	}
	t := &testing.T{}
	h := newHome(t, nil)
	h.writeConfig(map[string]any{
		"servers": map[string]any{"fx": map[string]any{"command": built.fixture}},
		"limits":  map[string]any{"maxSessions": 2000},
		"policy":  map[string]any{"default": map[string]any{"allow": []string{"*"}}},
	})
	gateway, url, stderr := startHTTPProcess(t, h.env(), "--no-memory")
	defer func() {
		gateway.Process.Signal(interrupt)
		gateway.Wait()
	}()
	waitChildren(t, stderr, "fx")
	call := func(id string, i int) error {
		_, err := soakPost(url, id, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"fx__echo","arguments":{"message":"m%d"}}}`, i+10, i))
		return err
	}
	sizes := []int{1, 10, 100, 1000}
	var p50s, rsss []float64
	var ids []string
	for _, n := range sizes {
		for len(ids) < n {
			id, err := soakPost(url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
			if err == nil {
				_, err = soakPost(url, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			}
			if err == nil {
				err = call(id, 0)
			}
			if err != nil {
				b.Fatalf("session %d: %v\n%s", len(ids), err, tail(stderr.String(), 20))
			}
			ids = append(ids, id)
		}
		var p50, rss float64
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			lat := make([]time.Duration, b.N)
			for i := range b.N {
				start := time.Now()
				if err := call(ids[(i*7919)%n], i); err != nil {
					b.Fatal(err)
				}
				lat[i] = time.Since(start)
			}
			b.StopTimer()
			time.Sleep(time.Second)
			slices.Sort(lat)
			p50, rss = float64(lat[len(lat)/2].Microseconds()), mib(rssNow(gateway.Process.Pid))
			b.ReportMetric(p50, "call-p50-µs")
			b.ReportMetric(rss, "rss-MiB")
			b.ReportMetric(0, "ns/op")
		})
		p50s, rsss = append(p50s, p50), append(rsss, rss)
	}
	x := []float64{1, 10, 100, 1000}
	writePlot(b, "http-sessions-rss.svg", benchplot.Plot{Title: "Gateway RSS against open HTTP sessions", XLabel: "open HTTP sessions", YLabel: "MiB", LogX: true,
		Series: []benchplot.Series{{Name: "nexus serve --http (gateway alone)", X: x, Y: rsss}}})
	writePlot(b, "http-sessions-call.svg", benchplot.Plot{Title: "tools/call p50 against open HTTP sessions", XLabel: "open HTTP sessions", YLabel: "µs", LogX: true,
		Series: []benchplot.Series{{Name: "a call of one of them, in turn", X: x, Y: p50s}}})
}
