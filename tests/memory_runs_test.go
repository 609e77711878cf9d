package tests

import (
	"strings"
	"testing"
)

// manyServersHome is a home with three servers, two of them real npm servers that
// take a while to start, all tools allowed.
func manyServersHome(t *testing.T) *home {
	t.Helper()
	node, everything := everythingServer(t)
	_, filesystem := peerScript(t, "@modelcontextprotocol/server-filesystem/dist/index.js")
	h := newHome(t, nil)
	h.writeConfig(map[string]any{
		"servers": map[string]any{
			"fx":         h.fixtureServer(nil),
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
func TestMemoryKeptFromRunToRunWithManyServers(t *testing.T) {
	t.Parallel()
	h := manyServersHome(t)
	for i, want := range []string{"miss", "hit", "hit"} {
		out, stderr, code := h.nexus("call", "everything.echo", "--args", `{"message":"kept"}`)
		if code != 0 || !strings.Contains(out, `"status": "`+want+`"`) {
			t.Errorf("nexus call %d: want %s, got exit %d\n%s%s", i+1, want, code, out, stderr)
		}
	}
	// A client relaunching serve: the second session's call is answered from
	// what the first one's left.
	servers := []string{"fx", "everything", "filesystem"}
	for i, want := range []string{"miss", "hit"} {
		s := h.serveStdioReady(servers)
		if r := s.call("everything__echo", map[string]any{"message": "relaunched"}); r.IsError || r.cacheStatus() != want {
			t.Errorf("serve %d: status %q (%+v), want %s", i+1, r.cacheStatus(), r.Meta, want)
		}
		s.close()
	}
}
