package tests

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuthStatusWithoutKeychain is issue 38's point 12: on a machine without a
// keychain, nexus auth status reports each remote server's login as unknown and
// why, and exits 0, rather than failing outright.
func TestAuthStatusWithoutKeychain(t *testing.T) {
	t.Parallel()
	h := newHome(t, map[string]any{"servers": map[string]any{"remote": map[string]any{"url": "https://mcp.example.com/mcp"}}})
	noKeychain := []string{"DBUS_SESSION_BUS_ADDRESS=unix:path=" + filepath.Join(h.dir, "no-bus")}
	out, stderr, code := h.nexusWith("", noKeychain, "auth", "status")
	if code != 0 || !strings.Contains(out, "remote  unknown") || !strings.Contains(out, "logins are unknown: OS keychain unavailable") {
		t.Errorf("auth status without a keychain: exit %d\n%s%s", code, out, stderr)
	}
	out, stderr, code = h.nexusWith("", noKeychain, "auth", "status", "--json")
	var rows []struct{ Server, State, Error string }
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil || len(rows) != 1 || rows[0].State != "unknown" || !strings.Contains(rows[0].Error, "secret store cannot be opened") {
		t.Errorf("auth status --json without a keychain: exit %d (%v)\n%s%s", code, err, out, stderr)
	}
}
