package tests

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDoctorRetryReachesRunningGateways: nexus doctor --retry makes every running
// gateway of the home try its failed servers once more, and says how many did.
func TestDoctorRetryReachesRunningGateways(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	h.writeConfig(map[string]any{
		"servers": map[string]any{"fx": h.fixtureServer(nil)},
		"policy":  map[string]any{"default": map[string]any{"allow": []string{"*"}}},
	})
	s := h.serveStdio()
	if got := s.call("fx__echo", map[string]any{"message": "hi"}).text(); got != "hi" {
		t.Fatalf("echo = %q", got)
	}
	out, stderr, _ := h.nexus("doctor", "--retry", "--json")
	var report struct {
		Checks []struct {
			Area, Status, Detail string
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("doctor --json: %v\n%s\n%s", err, out, stderr)
	}
	found := false
	for _, ch := range report.Checks {
		if ch.Area == "running gateways" {
			found = true
			if ch.Status != "ok" || !strings.HasPrefix(ch.Detail, "1 running gateway(s)") {
				t.Errorf("retry check: %s %q", ch.Status, ch.Detail)
			}
		}
	}
	if !found {
		t.Errorf("no retry check in the report:\n%s", out)
	}
}
