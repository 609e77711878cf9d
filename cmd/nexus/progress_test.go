package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/aggregation"
)

func TestProgressLines(t *testing.T) {
	tests := []struct{ got, want string }{
		{progressLine([]string{"files"}, 2345*time.Millisecond), "nexus: waiting for files to connect (2.3s)"},
		{progressLine([]string{"a", "b", "c", "d", "e", "f"}, time.Second), "nexus: waiting for a, b, c, d and 2 more to connect (1s)"},
		{gatewaySummary([]aggregation.Status{{Name: "a", State: aggregation.StateReady}, {Name: "b", State: aggregation.StateFailed}})(4100 * time.Millisecond),
			"nexus: 1 of 2 server(s) ready after 4.1s; not ready: b (failed)"},
		{gatewaySummary([]aggregation.Status{{Name: "a", State: aggregation.StateReady}})(time.Second), "nexus: 1 of 1 server(s) ready after 1s"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got  %q\nwant %q", tc.got, tc.want)
		}
	}
}

// TestProgressHandlerSettles checks that the gateway's log records mark servers as
// settled, and that records the command's level hides stay hidden.
func TestProgressHandlerSettles(t *testing.T) {
	var out bytes.Buffer
	p := &waitProgress{w: &out, pending: []string{"a", "b"}}
	log := slog.New(progressHandler{inner: slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelWarn}), p: p})
	log.With("server", "a").Info("child connected", "tools", 3)
	log.With("server", "b").Info("something else")
	if strings.Join(p.pending, ",") != "b" {
		t.Errorf("pending = %v, want [b]", p.pending)
	}
	if out.Len() != 0 {
		t.Errorf("info records leaked at warn level: %q", out.String())
	}
	log.With("server", "b").Error("child failed to start")
	if len(p.pending) != 0 || !strings.Contains(out.String(), "child failed to start") {
		t.Errorf("pending = %v, out = %q", p.pending, out.String())
	}
}

func TestNoProgressOffTerminal(t *testing.T) {
	if p := startProgress(&bytes.Buffer{}, false, []string{"a"}); p != nil {
		t.Error("progress started with on=false")
	}
	var p *waitProgress // nil: every method is a no-op
	p.settled("a")
	p.finish(func(time.Duration) string { return "x" })
}
