package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCatalogPathThatDoesNotExist is issue 38's point 5: nexus add refuses a
// directory that is not there (the filesystem server would refuse to start, and
// say why only on its stderr), and a server that dies at start has the line of its
// stderr that says why in the error list-tools and list-servers --live show.
func TestCatalogPathThatDoesNotExist(t *testing.T) {
	t.Parallel()
	h := newHome(t, map[string]any{})
	missing := filepath.Join(h.dir, "notes")
	out, stderr, code := h.nexus("add", "filesystem", "--yes", "--value", "paths="+missing)
	if code != 2 || !strings.Contains(stderr, missing+" does not exist") || !strings.Contains(stderr, "nothing was written") {
		t.Errorf("add filesystem with a missing directory: exit %d, want 2 naming it\n%s%s", code, out, stderr)
	}
	if cfg, _ := os.ReadFile(filepath.Join(h.dir, "config.json")); strings.Contains(string(cfg), "filesystem") {
		t.Errorf("the refused server was written:\n%s", cfg)
	}
	// A misspelt value's name gets the one it is close to.
	out, stderr, code = h.nexus("add", "filesystem", "--value", "path="+h.dir)
	if code != 2 || !strings.Contains(stderr, "did you mean --value paths="+h.dir) {
		t.Errorf("add filesystem --value path=: exit %d, want 2 with did you mean\n%s%s", code, out, stderr)
	}

	// The directory went after the server was added: the server's own words say why.
	node, script := peerScript(t, "@modelcontextprotocol/server-filesystem/dist/index.js")
	h.writeConfig(map[string]any{"servers": map[string]any{"filesystem": map[string]any{"command": node, "args": []string{script, missing}}}})
	const why = "None of the specified directories are accessible"
	out, stderr, code = h.nexus("list-tools")
	if code != 1 || !strings.Contains(stderr, "its stderr says: Error: "+why) {
		t.Errorf("list-tools with a server that dies at start: exit %d, want 1 with its stderr's reason in the error\n%s%s", code, out, stderr)
	}
	out, _, _ = h.nexus("list-servers", "--live")
	if !strings.Contains(out, why) {
		t.Errorf("list-servers --live does not say why the server is down:\n%s", out)
	}
}
