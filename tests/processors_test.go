//go:build linux

package tests

import (
	"regexp"
	"runtime"
	"testing"
	"time"
)

// TestStdioGatewayRunsOnOneProcessor: `nexus serve` over stdio serves one
// client, and runs its goroutines on one P (GOMAXPROCS 1) unless GOMAXPROCS is
// set. The runtime's own scheduler trace (GODEBUG=schedtrace) says how many it
// runs on.
func TestStdioGatewayRunsOnOneProcessor(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one P is the runtime's choice here already")
	}
	t.Parallel()
	trace := regexp.MustCompile(`SCHED \d+ms: gomaxprocs=(\d+)`)
	// procs is what the trace says once the process has written five lines
	// after from: the last of them, as stderr reaches the test late and the
	// first may have been written before the process began to serve.
	procs := func(s *session, from int) string {
		var got string
		eventually(t, 20*time.Second, "five scheduler trace lines once serving", func() bool {
			m := trace.FindAllStringSubmatch(s.stderr.String()[from:], -1)
			if len(m) >= 5 {
				got = m[len(m)-1][1]
			}
			return len(m) >= 5
		})
		return got
	}
	h := newHome(t, map[string]any{"servers": map[string]any{}})
	for _, c := range []struct {
		name string
		env  []string
		want string
	}{
		{"stdio", nil, "1"},
		{"stdio, GOMAXPROCS set", []string{"GOMAXPROCS=3"}, "3"},
	} {
		s := startSession(t, h.env(append(c.env, "GODEBUG=schedtrace=20")...), built.nexus, "serve")
		if _, err := s.request("tools/list", nil); err != nil {
			t.Fatal(err)
		}
		if got := procs(s, len(s.stderr.String())); got != c.want {
			t.Errorf("%s: gomaxprocs=%s, want %s", c.name, got, c.want)
		}
		s.close()
	}
}
