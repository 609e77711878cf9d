package tests

import (
	"strings"
	"testing"
)

// manyServersHome is a home with four servers, all tools allowed: the fixture
// twice, once as "late", which starts a moment after the others, and two real
// npm servers that take a while to start.
func manyServersHome(t *testing.T) *home {
	t.Helper()
	node, everything := everythingServer(t)
	_, filesystem := peerScript(t, "@modelcontextprotocol/server-filesystem/dist/index.js")
	h := newHome(t, nil)
	h.writeConfig(map[string]any{
		"servers": map[string]any{
			"fx":         h.fixtureServer(nil),
			"late":       h.fixtureServer(map[string]any{"command": "sh", "args": []string{"-c", `sleep 0.3; exec "$0"`, built.fixture}}),
			"everything": map[string]any{"command": node, "args": []string{everything, "stdio"}},
			"filesystem": map[string]any{"command": node, "args": []string{filesystem, t.TempDir()}},
		},
		"policy": map[string]any{"default": map[string]any{"allow": []string{"*"}}},
	})
	return h
}

// TestMemoryKeptFromRunToRunWithManyServers is issue 38's first point: with more
// than one server, a server that had not connected yet when the first manifest was
// built took its first connection for a change of its tools and marked what memory
// kept of it stale, so every run was a miss.
//
// The tool called is the late fixture's: it connects after the first manifest, as
// the npm servers do, but asks its client nothing of its own accord.
// server-everything asks for roots a moment after it starts, and an answer the
// child gave once it had the client's answer is never remembered (trust_test.go):
// on a loaded machine a call of its tools may overlap that request, and then
// rightly misses on the next run.
func TestMemoryKeptFromRunToRunWithManyServers(t *testing.T) {
	t.Parallel()
	h := manyServersHome(t)
	for i, want := range []string{"miss", "hit", "hit"} {
		out, stderr, code := h.nexus("call", "late.echo", "--args", `{"message":"kept"}`)
		if code != 0 || !strings.Contains(out, `"status": "`+want+`"`) {
			t.Errorf("nexus call %d: want %s, got exit %d\n%s%s", i+1, want, code, out, stderr)
		}
	}
	// A client relaunching serve: the second session's call is answered from
	// what the first one's left.
	servers := []string{"fx", "late", "everything", "filesystem"}
	var logs []string
	for i, want := range []string{"miss", "hit"} {
		s := h.serveStdioReady(servers)
		if r := s.call("late__echo", map[string]any{"message": "relaunched"}); r.IsError || r.cacheStatus() != want {
			t.Errorf("serve %d: status %q (%+v), want %s\nthe gateway's log, run by run:\n%s\n%s", i+1, r.cacheStatus(), r.Meta, want, strings.Join(logs, "\n"), s.stderr)
		}
		s.close()
		logs = append(logs, s.stderr.String())
	}
}
