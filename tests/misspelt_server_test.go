package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCacheTTLMisspeltServer is issue 38's point 10 for nexus cache ttl: a server no
// config layer has is refused with the closest one and nothing written; --later
// sets it for a server added afterwards.
func TestCacheTTLMisspeltServer(t *testing.T) {
	t.Parallel()
	h := fixtureHome(t, nil, nil)
	ttlFile := filepath.Join(h.dir, "ttl.json")
	tests := []struct {
		name    string
		args    []string
		code    int
		stderr  string
		written bool
	}{
		{"a misspelt server", []string{"cache", "ttl", "fxx", "5m"}, 2, `fxx.*: no server "fxx" is configured, nothing was written; did you mean fx.*?`, false},
		{"a misspelt server's tool", []string{"cache", "ttl", "fxx.lookup", "5m"}, 2, "did you mean fx.lookup?", false},
		{"nothing close", []string{"cache", "ttl", "zzzzzzzz", "5m"}, 2, "`nexus list-servers` shows the servers", false},
		{"a server added later", []string{"cache", "ttl", "--later", "notes", "5m"}, 0, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := h.nexus(tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("nexus %v: exit %d, want %d with %q\n%s%s", tc.args, code, tc.code, tc.stderr, out, stderr)
			}
			data, _ := os.ReadFile(ttlFile)
			if name := strings.TrimSuffix(tc.args[len(tc.args)-2], ".*"); strings.Contains(string(data), `"`+name) != tc.written {
				t.Errorf("nexus %v: written %v, want %v:\n%s", tc.args, !tc.written, tc.written, data)
			}
		})
	}
}
