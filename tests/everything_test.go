package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// everythingServer is the path of @modelcontextprotocol/server-everything, installed
// by .ci/run from tests/package-lock.json (npm ci). Outside CI a missing install
// skips the test with the command to run; in CI it fails.
func everythingServer(t *testing.T) (node, script string) {
	t.Helper()
	script, _ = filepath.Abs("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	node, err := exec.LookPath("node")
	if _, statErr := os.Stat(script); statErr != nil || err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("server-everything is not installed (run npm ci in tests/): %v %v", statErr, err)
		}
		t.Skip("server-everything is not installed: run `npm ci` in tests/")
	}
	return node, script
}

// TestServerEverythingThroughNexus runs a real third-party server as a child and checks
// that every tool it lists reaches the client unchanged apart from its name.
func TestServerEverythingThroughNexus(t *testing.T) {
	node, script := everythingServer(t)
	h := newHome(t, map[string]any{"servers": map[string]any{
		"everything": map[string]any{"command": node, "args": []string{script, "stdio"}},
	}, "policy": map[string]any{"default": map[string]any{"allow": []string{"*"}}}})
	direct := startSession(t, h.env(), node, script, "stdio").tools()
	s := h.serveStdio("--no-memory")
	through := s.tools()
	if len(direct) == 0 {
		t.Fatal("server-everything listed no tools")
	}
	if len(through) != len(direct) {
		t.Errorf("direct: %d tools, through nexus: %d", len(direct), len(through))
	}
	for name, raw := range direct {
		got, ok := through["everything__"+name]
		if !ok {
			t.Errorf("tool %s missing through nexus", name)
			continue
		}
		if a, b := withoutName(t, raw), withoutName(t, got); a != b {
			t.Errorf("tool %s changed on the way:\n direct  %s\n through %s", name, a, b)
		}
	}
	// One real call, with the child's structured answer.
	if r := s.call("everything__echo", map[string]any{"message": "hello everything"}); r.IsError || r.text() == "" {
		t.Errorf("echo through nexus: %+v", r)
	}
}

// withoutName re-encodes a tool object without its name (and with absent annotations
// as {}), in canonical key order, for comparison.
func withoutName(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "name")
	if _, ok := m["annotations"]; !ok {
		m["annotations"] = map[string]any{}
	}
	b, _ := json.Marshal(m)
	return string(b)
}
