package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func memoryHome(t *testing.T, extra map[string]any) *home {
	t.Helper()
	cfg := map[string]any{"policy": map[string]any{"default": map[string]any{"allow": []string{"*"}}}}
	for k, v := range extra {
		cfg[k] = v
	}
	return fixtureHome(t, nil, cfg)
}

func TestMemoryAnswersRepeatedReads(t *testing.T) {
	t.Parallel()
	h := memoryHome(t, nil)
	s := h.serveStdio()
	steps := []struct {
		name   string
		tool   string
		args   map[string]any
		status string
		calls  int // lookups the child has received after the step
	}{
		{"first read is a miss", "fx__lookup", map[string]any{"env": "staging", "n": 1}, "miss", 1},
		{"the same read is a hit", "fx__lookup", map[string]any{"env": "staging", "n": 1}, "hit", 1},
		{"key order and the name's spelling do not matter", "fx.lookup", map[string]any{"n": 1, "env": "staging"}, "hit", 1},
		{"another value is another call", "fx__lookup", map[string]any{"env": "production", "n": 1}, "miss", 2},
		{"another number is another call", "fx__lookup", map[string]any{"env": "staging", "n": 2}, "miss", 3},
	}
	first := ""
	for _, st := range steps {
		r := s.call(st.tool, st.args)
		if r.IsError || r.cacheStatus() != st.status {
			t.Errorf("%s: status %q (%+v), want %q", st.name, r.cacheStatus(), r.Meta, st.status)
		}
		if got := h.calls()["lookup"]; got != st.calls {
			t.Errorf("%s: the child received %d lookups, want %d", st.name, got, st.calls)
		}
		if first == "" {
			first = r.text()
		} else if st.status == "hit" && r.text() != first {
			t.Errorf("%s: a hit answered %q, want the remembered %q", st.name, r.text(), first)
		}
	}
	if age, ok := s.call("fx__lookup", map[string]any{"env": "staging", "n": 1}).Meta["nexus/cache"].(map[string]any)["age_ms"]; !ok || age.(float64) < 0 {
		t.Errorf("a hit carries age_ms, got %v", age)
	}
}

func TestMemoryNeverCachesMutations(t *testing.T) {
	t.Parallel()
	h := memoryHome(t, nil)
	s := h.serveStdio()
	for i := 0; i < 2; i++ {
		if r := s.call("fx__destroy", map[string]any{"target": "x"}); r.cacheStatus() != "bypass" {
			t.Errorf("a destructive tool: status %q, want bypass", r.cacheStatus())
		}
	}
	if n := h.calls()["destroy"]; n != 2 {
		t.Errorf("the child received %d destroy calls, want 2", n)
	}
	// A successful mutating call makes the server's remembered reads stale.
	args := map[string]any{"env": "staging"}
	s.call("fx__lookup", args)
	if r := s.call("fx__lookup", args); r.cacheStatus() != "hit" {
		t.Fatalf("setup: want a hit, got %q", r.cacheStatus())
	}
	s.call("fx__destroy", map[string]any{"target": "y"})
	if r := s.call("fx__lookup", args); r.cacheStatus() != "miss" {
		t.Errorf("after a mutating call: status %q, want miss", r.cacheStatus())
	}
	if n := h.calls()["lookup"]; n != 2 {
		t.Errorf("the child received %d lookups, want 2", n)
	}
}

func TestMemoryTTL(t *testing.T) {
	t.Parallel()
	h := memoryHome(t, map[string]any{"ttl": map[string]any{"fx.lookup": "200ms", "fx.*": "1h"}})
	s := h.serveStdio()
	args := map[string]any{"env": "staging"}
	s.call("fx__lookup", args)
	if r := s.call("fx__lookup", args); r.cacheStatus() != "hit" {
		t.Fatalf("within the TTL: %q", r.cacheStatus())
	}
	// Hits until the entry expires, then one miss; the TTL bounds the poll.
	eventually(t, 10*time.Second, "the entry to expire", func() bool {
		return s.call("fx__lookup", args).cacheStatus() == "miss"
	})
	if n := h.calls()["lookup"]; n != 2 {
		t.Errorf("the child received %d lookups, want 2", n)
	}
}

func TestMemoryCoalescesConcurrentCalls(t *testing.T) {
	t.Parallel()
	h := memoryHome(t, nil)
	s := h.serveStdio()
	var wg sync.WaitGroup
	statuses := make([]string, 6)
	for i := range statuses {
		wg.Go(func() {
			m := s.requestMsg("tools/call", map[string]any{"name": "fx__sleep", "arguments": map[string]any{"ms": 300}})
			var r callResult
			json.Unmarshal(m.Result, &r)
			statuses[i] = r.cacheStatus()
		})
	}
	wg.Wait()
	if n := h.calls()["sleep"]; n != 1 {
		t.Errorf("%d identical concurrent calls made %d child calls, want 1 (statuses %v)", len(statuses), n, statuses)
	}
}

func TestMemoryAfterPolicy(t *testing.T) {
	t.Parallel()
	h := memoryHome(t, map[string]any{"policy": map[string]any{"agents": map[string]any{
		"reader":  map[string]any{"allow": []string{"fx.lookup"}},
		"blocked": map[string]any{"deny": []string{"fx.*"}},
	}}})
	reader := startSession(t, h.env(), built.nexus, "serve", "--agent", "reader")
	reader.call("fx__lookup", map[string]any{"env": "x"})
	blocked := startSession(t, h.env(), built.nexus, "serve", "--agent", "blocked")
	r := blocked.call("fx__lookup", map[string]any{"env": "x"})
	if !r.IsError || r.cacheStatus() != "" || !strings.Contains(r.text(), `"blocked"`) {
		t.Errorf("a denied call must be refused before memory: %+v", r)
	}
	if n := h.calls()["lookup"]; n != 1 {
		t.Errorf("the child received %d lookups, want 1", n)
	}
}

func TestMemorySharedAcrossProcesses(t *testing.T) {
	t.Parallel()
	h := memoryHome(t, nil)
	// Each run's child exits when the run ends: a clean shutdown, not a crash,
	// so every later run is a hit.
	for i, want := range []string{"miss", "hit", "hit", "hit", "hit"} {
		out, stderr, code := h.nexus("call", "fx.lookup", "--args", `{"env":"shared"}`)
		if code != 0 || !strings.Contains(out, `"status": "`+want+`"`) {
			t.Errorf("call %d: want %s, got %d\n%s%s", i, want, code, out, stderr)
		}
		if strings.Contains(stderr, "remembered answers") {
			t.Errorf("call %d: shutdown taken for a restart:\n%s", i, stderr)
		}
	}
	out, _, _ := h.nexus("cache", "stats", "--json")
	var st struct {
		Entries int64 `json:"entries"`
		Hits    int64 `json:"hits"`
	}
	if json.Unmarshal([]byte(out), &st) != nil || st.Entries != 1 || st.Hits != 4 {
		t.Errorf("cache stats: %s", out)
	}
	if out, _, _ := h.nexus("cache", "list"); !strings.Contains(out, "fx.lookup") {
		t.Errorf("cache list: %s", out)
	}
	if _, _, code := h.nexus("remove", "fx"); code != 0 {
		t.Fatal("remove failed")
	}
	out, _, _ = h.nexus("cache", "stats", "--json")
	if json.Unmarshal([]byte(out), &st) != nil || st.Entries != 0 {
		t.Errorf("nexus remove should drop the server's entries: %s", out)
	}
}

func TestMemoryStepsAsideOnACorruptDatabase(t *testing.T) {
	t.Parallel()
	h := memoryHome(t, nil)
	if err := os.WriteFile(filepath.Join(h.dir, "memory.db"), []byte(strings.Repeat("not a database ", 500)), 0o600); err != nil {
		t.Fatal(err)
	}
	s := h.serveStdio()
	for i := 0; i < 2; i++ {
		r := s.call("fx__lookup", map[string]any{"env": "x"})
		if r.IsError || r.cacheStatus() != "bypass" {
			t.Errorf("call %d on a corrupt database: %+v", i, r)
		}
	}
	if n := h.calls()["lookup"]; n != 2 {
		t.Errorf("both calls should reach the child, got %d", n)
	}
}

func TestMemoryOff(t *testing.T) {
	t.Parallel()
	h := memoryHome(t, map[string]any{"memory": map[string]any{"enabled": false}})
	s := h.serveStdio()
	for i := 0; i < 2; i++ {
		if r := s.call("fx__lookup", map[string]any{"env": "x"}); r.cacheStatus() != "" {
			t.Errorf("memory is off: status %q", r.cacheStatus())
		}
	}
	if n := h.calls()["lookup"]; n != 2 {
		t.Errorf("the child received %d lookups, want 2", n)
	}
}

// TestMemoryHotLayerSeesOtherProcesses: a serving gateway answers a
// repeated read from its hot layer; a mutating call made by another
// process (`nexus call`) or `nexus cache clear` is seen on its next call.
func TestMemoryHotLayerSeesOtherProcesses(t *testing.T) {
	t.Parallel()
	h := memoryHome(t, nil)
	s := h.serveStdio()
	args := map[string]any{"env": "hot"}
	steps := []struct {
		name  string
		other []string // what another process runs first
	}{
		{"a mutating call by another process", []string{"call", "fx.destroy", "--args", `{"target":"z"}`}},
		{"cache clear by another process", []string{"cache", "clear"}},
	}
	for _, st := range steps {
		s.call("fx__lookup", args)
		for range 3 {
			if r := s.call("fx__lookup", args); r.cacheStatus() != "hit" {
				t.Fatalf("%s: setup: want a hit, got %q", st.name, r.cacheStatus())
			}
		}
		if out, stderr, code := h.nexus(st.other...); code != 0 {
			t.Fatalf("%s: nexus %v exited %d\n%s%s", st.name, st.other, code, out, stderr)
		}
		if r := s.call("fx__lookup", args); r.cacheStatus() != "miss" {
			t.Errorf("after %s: status %q, want miss", st.name, r.cacheStatus())
		}
	}
}
