package tests

import (
	"strings"
	"testing"
	"time"
)

// failedStartLines are the lines of a command's stderr that report server's
// failure to start.
func failedStartLines(stderr, server string) int {
	n := 0
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, "failed to start") && strings.Contains(line, "server="+server) {
			n++
		}
	}
	return n
}

// TestOneShotCommandsAndFailedServers is issue 38's points 7 and 6: a server whose
// program is not installed gets one line that says what to install, not a retry
// per backoff step; call waits for its tool's server only, not for a server that
// never answers; list-tools lists the others' tools and exits 1 naming the failed
// server (and 1 when every server failed).
func TestOneShotCommandsAndFailedServers(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	missing := "nexus-test-no-such-program"
	h.writeConfig(map[string]any{
		"servers": map[string]any{
			"fx":      h.fixtureServer(nil),
			"missing": map[string]any{"command": missing},
			"silent":  h.fixtureServer(map[string]any{"env": map[string]string{"FIXTURE_MODE": "hang"}, "timeout": "60s"}),
		},
		"policy": map[string]any{"default": map[string]any{"allow": []string{"*"}}},
	})

	started := time.Now()
	out, stderr, code := h.nexus("call", "fx.echo", "--args", `{"message":"only fx"}`)
	if took := time.Since(started); code != 0 || !strings.Contains(out, "only fx") || took > 30*time.Second {
		t.Errorf("nexus call fx.echo: exit %d after %s (the silent server's timeout is 60 s)\n%s%s", code, took.Round(time.Millisecond), out, stderr)
	}
	if n := failedStartLines(stderr, "missing"); n > 1 || strings.Contains(stderr, "attempt=2") {
		t.Errorf("nexus call: %d lines about the missing server, want at most one:\n%s", n, stderr)
	}
	out, stderr, code = h.nexus("call", "missing.anything")
	if n := failedStartLines(stderr, "missing"); code == 0 || n != 1 || !strings.Contains(out+stderr, missing+" is not installed or not on PATH") {
		t.Errorf("nexus call missing.anything: exit %d, %d lines about the missing server, want one that says it is not installed:\n%s%s", code, n, out, stderr)
	}

	h.writeConfig(map[string]any{
		"servers": map[string]any{
			"fx":      h.fixtureServer(nil),
			"missing": map[string]any{"command": missing},
		},
	})
	out, stderr, code = h.nexus("list-tools")
	if code != 1 || !strings.Contains(out, "fx.echo") {
		t.Errorf("nexus list-tools with a failed server: exit %d, want 1 with fx's tools listed\n%s%s", code, out, stderr)
	}
	if !strings.Contains(stderr, "1 of 2 servers did not connect") || !strings.Contains(stderr, "missing (failed)") {
		t.Errorf("nexus list-tools does not name the failed server:\n%s", stderr)
	}
	if n := failedStartLines(stderr, "missing"); n != 1 || !strings.Contains(stderr, missing+" is not installed or not on PATH") {
		t.Errorf("nexus list-tools: %d lines about the missing server, want one that says it is not installed:\n%s", n, stderr)
	}

	h.writeConfig(map[string]any{"servers": map[string]any{"missing": map[string]any{"command": missing}}})
	if out, stderr, code = h.nexus("list-tools", "--json"); code != 1 || !strings.Contains(stderr, "1 of 1 servers") {
		t.Errorf("nexus list-tools --json with every server failed: exit %d, want 1\n%s%s", code, out, stderr)
	}
}
