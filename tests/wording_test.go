package tests

import (
	"strings"
	"testing"
)

// TestCacheClearSaysOneEntry is issue 38's point 13: one forgotten entry is "1
// entry", not "1 entries".
func TestCacheClearSaysOneEntry(t *testing.T) {
	t.Parallel()
	h := memoryHome(t, nil)
	if out, stderr, code := h.nexus("call", "fx.lookup", "--args", `{"env":"one"}`); code != 0 {
		t.Fatalf("call: exit %d\n%s%s", code, out, stderr)
	}
	if out, _, _ := h.nexus("cache", "stats"); !strings.Contains(out, ": 1 entry,") {
		t.Errorf("cache stats with one entry:\n%s", out)
	}
	if out, stderr, code := h.nexus("cache", "clear"); code != 0 || strings.TrimSpace(out) != "forgot 1 entry" {
		t.Errorf("cache clear of one entry: exit %d %q %s", code, out, stderr)
	}
}
