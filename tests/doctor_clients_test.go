package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDoctorChecksEveryClient: doctor reports each client whose file is on the
// machine: connected or not, the agent it names, and an entry whose nexus is
// gone (a failure, with the command that fixes it).
func TestDoctorChecksEveryClient(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	write := func(client, body string) string {
		t.Helper()
		path := clPlace(t, h, client, "")
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write("goose", "GOOSE_PROVIDER: anthropic\n")
	write("windsurf", `{"mcpServers": {"fetch": {"command": "uvx", "args": ["mcp-server-fetch"]}}}`)
	zed := write("zed", `{"context_servers": {"nexus": {"command": "/gone/nexus", "args": ["serve"], "env": {"NEXUS_HOME": "`+h.dir+`"}}}}`)
	if _, stderr, code := h.nexusEnv(clEnv(h), "setup", "goose", "--agent", "goose"); code != 0 {
		t.Fatalf("setup goose: %s", stderr)
	}

	out, stderr, code := h.nexusEnv(clEnv(h), "doctor", "--json")
	if code != 1 {
		t.Errorf("doctor: exit %d, want 1 (the Zed entry is broken)\n%s%s", code, out, stderr)
	}
	var res struct {
		Checks []struct{ Area, Name, Status, Detail, Fix string }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got := map[string]string{}
	for _, c := range res.Checks {
		if c.Area == "clients" {
			got[c.Name] = c.Status + " " + c.Detail + " " + c.Fix
		}
	}
	for name, want := range map[string][]string{
		"Goose":    {"ok ", "as agent goose"},
		"Windsurf": {"ok ", "not connected", "nexus setup windsurf"},
		"Zed":      {"fail ", "/gone/nexus", "nexus setup zed", zed},
	} {
		for _, w := range want {
			if !strings.Contains(got[name], w) {
				t.Errorf("%s: %q lacks %q", name, got[name], w)
			}
		}
	}
	if _, ok := got["Cursor"]; ok {
		t.Error("doctor reports a client that is not on the machine")
	}
}
