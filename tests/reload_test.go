package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLiveReload edits a shared config layer while a client session is open: a new
// server appears, a broken edit is ignored, a removed server's tools go.
func TestLiveReload(t *testing.T) {
	t.Parallel()
	h := fixtureHome(t, nil, nil)
	team := filepath.Join(h.dir, "team.json")
	writeLayer := func(v any) {
		t.Helper()
		b, _ := json.Marshal(v)
		tmp := team + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, team); err != nil {
			t.Fatal(err)
		}
	}
	writeLayer(map[string]any{})
	s := startSession(t, h.env(), built.nexus, "--config", team, "serve")
	if _, ok := s.tools()["team__echo"]; ok {
		t.Fatal("team__echo listed before it was configured")
	}

	writeLayer(map[string]any{"servers": map[string]any{"team": map[string]any{"command": built.fixture}}})
	s.waitNote("notifications/tools/list_changed", 10*time.Second, nil)
	eventually(t, 10*time.Second, "the new server's tools are listed", func() bool {
		_, ok := s.tools()["team__echo"]
		return ok
	})
	if r := s.call("team__echo", map[string]any{"message": "hot"}); r.text() != "hot" {
		t.Fatalf("calling the new server: %+v", r)
	}

	// A broken edit is logged and ignored: the running config stays.
	if err := os.WriteFile(team, []byte(`{"servers": {"team": {"comand": "x"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the invalid edit is logged", func() bool {
		return strings.Contains(s.stderr.String(), "config change ignored")
	})
	if r := s.call("team__echo", map[string]any{"message": "still"}); r.text() != "still" {
		t.Fatalf("after a broken edit the gateway should keep serving: %+v", r)
	}

	// Removing the server takes its tools away.
	writeLayer(map[string]any{})
	eventually(t, 10*time.Second, "the removed server's tools go", func() bool {
		_, ok := s.tools()["team__echo"]
		return !ok
	})
	if _, rpcErr := s.request("tools/call", map[string]any{"name": "team__echo", "arguments": map[string]any{"message": "x"}}); rpcErr == nil || rpcErr.Code != -32602 {
		t.Errorf("calling a removed server's tool: %+v", rpcErr)
	}
	if r := s.call("fx__echo", map[string]any{"message": "fx unaffected"}); r.text() != "fx unaffected" {
		t.Errorf("the other server should be unaffected: %+v", r)
	}
}

// TestReloadRestartsChangedServers changes a server's launch settings: it restarts
// with the new environment.
func TestReloadRestartsChangedServers(t *testing.T) {
	t.Parallel()
	h := fixtureHome(t, map[string]any{"env": map[string]string{"FIXTURE_CALL_LOG": "", "MODE": "one"}}, nil)
	s := h.serveStdio()
	if got := s.call("fx__getenv", map[string]any{"name": "MODE"}).text(); got != "one" {
		t.Fatalf("MODE = %q", got)
	}
	h.writeConfig(map[string]any{
		"servers": map[string]any{"fx": h.fixtureServer(map[string]any{"env": map[string]string{"MODE": "two"}})},
		"policy":  map[string]any{"default": map[string]any{"allow": []string{"*"}}},
	})
	eventually(t, 10*time.Second, "the server restarts with the new env", func() bool {
		m := s.requestMsg("tools/call", map[string]any{"name": "fx__getenv", "arguments": map[string]any{"name": "MODE"}})
		var r callResult
		json.Unmarshal(m.Result, &r)
		return r.text() == "two"
	})
}
