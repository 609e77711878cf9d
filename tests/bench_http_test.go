package tests

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// BenchmarkHTTPFront measures a tools/call over streamable HTTP: one mcp-go
// client calls an mcp-go HTTP server's trivial read-only tool directly, and
// through `nexus serve --http` (memory off) with that server behind it, one
// after another and 8 at a time, in one run.
//
//	go test ./tests -run '^$' -bench HTTPFront -benchtime 2000x
//
// BENCH_NEXUS_CPUPROFILE=F writes the gateway's CPU profile to F.
func BenchmarkHTTPFront(b *testing.B) {
	if raceEnabled {
		b.Skip("benchmarks need binaries built without -race")
	}
	t := &testing.T{}
	srv := server.NewMCPServer("bench", "1", server.WithToolCapabilities(true))
	echo := mcp.NewTool("echo", mcp.WithString("message"), mcp.WithReadOnlyHintAnnotation(true), mcp.WithDestructiveHintAnnotation(false))
	srv.AddTool(echo, func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(r.GetString("message", "")), nil
	})
	child := httptest.NewServer(server.NewStreamableHTTPServer(srv))
	defer child.Close()
	h := newHome(t, map[string]any{"servers": map[string]any{"fx": map[string]any{"transport": "streamable-http", "url": child.URL + "/mcp"}}})
	gateway, nexusURL, _ := startHTTPProcess(t, h.env("NEXUS_CPUPROFILE="+os.Getenv("BENCH_NEXUS_CPUPROFILE")), "--no-memory")
	defer func() { // stopped, not killed: the profile is written as it stops
		gateway.Process.Signal(interrupt)
		gateway.Wait()
	}()
	targets := []struct{ name, url, tool string }{
		{"direct", child.URL + "/mcp", "echo"},
		{"nexus", nexusURL, "fx__echo"},
	}
	seq := map[string][]time.Duration{}
	rate := map[string]float64{}
	for _, tg := range targets {
		c, err := httpClient(t, tg.url, "")
		if err != nil {
			b.Fatalf("%s: %v", tg.name, err)
		}
		call := func(i int) {
			res, err := c.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tg.tool, Arguments: map[string]any{"message": fmt.Sprint("m", i)}}})
			if err != nil || res.IsError {
				b.Fatalf("%s call: %v %+v", tg.name, err, res)
			}
		}
		for i := range 200 {
			call(i)
		}
		seq[tg.name], rate[tg.name] = measure(b.N, call)
		c.Close()
	}
	reportLatencies(b, seq, rate)
	b.ReportMetric(quantileMicros(seq["nexus"], 0.5)/quantileMicros(seq["direct"], 0.5), "nexus/direct-p50-x")
	b.ReportMetric(rate["nexus"]/rate["direct"], "nexus/direct-8way-x")
}
