package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestListServersShowsTheRunningGatewaysIdle: `nexus list-servers --live` shows
// the state of the gateway a desktop client started (stdio, this home): a lazy
// server it has not started is "idle (not started yet)", one it stopped when idle
// says since when, and --fresh connects to each server instead; once the gateway
// is gone, --live connects again.
func TestListServersShowsTheRunningGatewaysIdle(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	h.writeConfig(map[string]any{
		"servers":  map[string]any{"fx": h.fixtureServer(nil)},
		"children": map[string]any{"start": "lazy", "idleTimeout": "3s"},
	})
	// A first run lists fx, so that the next one knows its tools without it.
	h.serveStdioReady([]string{"fx"}).close()

	s := h.serveStdioReady([]string{"fx"})
	defer s.close()
	running := fmt.Sprintf("the gateway running as pid %d", s.cmd.Process.Pid)
	type row struct {
		Name      string    `json:"name"`
		State     string    `json:"state"`
		Tools     *int      `json:"tools"`
		IdleSince time.Time `json:"idleSince"`
	}
	live := func(args ...string) (row, string, string) {
		t.Helper()
		stdout, stderr, code := h.nexus(append([]string{"list-servers", "--live", "--json"}, args...)...)
		var rows []row
		if code != 0 || json.Unmarshal([]byte(stdout), &rows) != nil || len(rows) != 1 {
			t.Fatalf("list-servers --live --json %v: exit %d\n%s\n%s", args, code, stdout, stderr)
		}
		table, _, _ := h.nexus(append([]string{"list-servers", "--live"}, args...)...)
		return rows[0], table, stderr
	}

	r, table, stderr := live()
	if !strings.Contains(stderr, running) {
		t.Errorf("--live with a gateway running does not say it shows that gateway's state:\n%s", stderr)
	}
	if r.State != "idle" || !r.IdleSince.IsZero() || r.Tools == nil || *r.Tools == 0 || !strings.Contains(table, "idle (not started yet)") {
		t.Errorf("a lazy server not started yet: %+v\n%s", r, table)
	}

	if res := s.call("fx__echo", map[string]any{"message": "wake up"}); res.IsError {
		t.Fatalf("fx__echo: %s", res.text())
	}
	if r, _, _ := live(); r.State != "ready" {
		t.Errorf("after a call: %+v, want ready", r)
	}
	eventually(t, 15*time.Second, "fx is stopped after 3s idle", func() bool {
		r, _, _ := live()
		return r.State == "idle" && !r.IdleSince.IsZero()
	})
	if _, table, _ := live(); !strings.Contains(table, "idle (stopped ") {
		t.Errorf("an idle server does not say since when it is stopped:\n%s", table)
	}

	r, _, stderr = live("--fresh")
	if strings.Contains(stderr, "running as pid") || r.Tools == nil || *r.Tools == 0 {
		t.Errorf("--fresh: %+v\n%s", r, stderr)
	}

	// With another layer, the running gateway's state is not this config's.
	team := filepath.Join(h.dir, "team.json")
	if err := os.WriteFile(team, []byte(`{"servers": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r, _, stderr = live("--config", team)
	if strings.Contains(stderr, "the state of the gateway") || !strings.Contains(stderr, "read other config files") || r.State != "ready" {
		t.Errorf("--live --config %s, with the gateway reading only the home's config: %+v\n%s", team, r, stderr)
	}
	s.close()
	if _, _, stderr := live(); strings.Contains(stderr, "running as pid") {
		t.Errorf("--live after the gateway ended still reads it:\n%s", stderr)
	}
}
