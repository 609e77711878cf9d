package tests

import (
	"strings"
	"testing"
)

// TestCatalogAllowHintOnlyForHiddenTools is issue 38's point 8: nexus add prints
// the policy allow command only for tools the default policy hides: none for the
// filesystem server's read-only tools under the built-in default, all of them
// under a default that does not allow read-only tools, and a pattern that grants
// more than read-only tools always.
func TestCatalogAllowHintOnlyForHiddenTools(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		config map[string]any
		entry  string
		want   string // in the hint; "" for no hint
	}{
		{"read-only tools the default allows", map[string]any{}, "filesystem", ""},
		{"a default without @readonly", map[string]any{"policy": map[string]any{"default": map[string]any{"allow": []string{"other.*"}}}},
			"filesystem", "nexus policy allow --agent AGENT filesystem.read_file filesystem.read_text_file"},
		{"a pattern", map[string]any{}, "doc-kg-sample", "nexus policy allow --agent AGENT doc-kg-sample.*"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHome(t, tc.config)
			out, stderr, code := h.nexus("add", tc.entry, "--yes", "--value", "paths="+h.dir)
			if tc.entry != "filesystem" {
				out, stderr, code = h.nexus("add", tc.entry, "--yes")
			}
			if code != 0 {
				t.Fatalf("nexus add %s: exit %d\n%s%s", tc.entry, code, out, stderr)
			}
			switch {
			case tc.want == "" && strings.Contains(out, "policy allow"):
				t.Errorf("nexus add %s suggests allowing tools the default policy already allows:\n%s", tc.entry, out)
			case tc.want != "" && !strings.Contains(out, tc.want):
				t.Errorf("nexus add %s: want %q in\n%s", tc.entry, tc.want, out)
			}
		})
	}
}
