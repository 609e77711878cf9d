package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/internal/skips"
)

// Memory a user can trust, end to end: real children, real sessions, a real
// memory.db shared by the processes of one home.

// peerScript finds an npm peer's entry point, skipping (or failing, with
// NEXUS_REQUIRE_NODE_PEERS=1) when npm ci has not run in tests/.
func peerScript(t *testing.T, rel string) (node, script string) {
	t.Helper()
	script, _ = filepath.Abs(filepath.Join("node_modules", rel))
	node, err := exec.LookPath("node")
	if _, statErr := os.Stat(script); statErr != nil || err != nil {
		if os.Getenv("NEXUS_REQUIRE_NODE_PEERS") == "1" {
			t.Fatalf("%s is not installed (run npm ci in tests/): %v %v", rel, statErr, err)
		}
		skips.Need(t, "node packages", "npm ci in tests/", rel+" is not installed: run `npm ci` in tests/")
	}
	return node, script
}

// TestFilesystemServerMemory puts the npm filesystem server behind Nexus: a
// write is never answered from memory, and a file changed outside the gateway
// is read fresh unless a ttl says its contents keep.
func TestFilesystemServerMemory(t *testing.T) {
	// Not parallel (a 3s ttl), but its two cases, each with a server and a root of
	// its own, run beside each other: they mostly wait.
	node, script := peerScript(t, "@modelcontextprotocol/server-filesystem/dist/index.js")
	for _, tc := range []struct {
		name string
		ttl  map[string]any
		kept bool // a read after an outside edit still sees the old contents
	}{
		{"no ttl: every read is fresh", map[string]any{}, false},
		{"a ttl: exactly the stated freshness", map[string]any{"files.read_text_file": "3s"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			file := filepath.Join(root, "notes.txt")
			if err := os.WriteFile(file, []byte("first version"), 0o600); err != nil {
				t.Fatal(err)
			}
			h := newHome(t, map[string]any{"servers": map[string]any{
				"files": map[string]any{"command": node, "args": []string{script, root}},
			}, "policy": map[string]any{"default": map[string]any{"allow": []string{"*"}}}, "ttl": tc.ttl})
			s := h.serveStdio()
			// create_directory is idempotent, not read-only: never skipped.
			for i, dir := range []string{"made-once", "made-once"} {
				path := filepath.Join(root, dir)
				if i == 1 {
					if err := os.Remove(path); err != nil {
						t.Fatal(err)
					}
				}
				r := s.call("files__create_directory", map[string]any{"path": path})
				if r.IsError || r.cacheStatus() == "hit" {
					t.Fatalf("create_directory %d: %q %s", i, r.cacheStatus(), r.text())
				}
				if st, err := os.Stat(path); err != nil || !st.IsDir() {
					t.Fatalf("create_directory %d answered %q but no directory exists: %v", i, r.text(), err)
				}
			}
			read := func() callResult {
				r := s.call("files__read_text_file", map[string]any{"path": file})
				if r.IsError {
					t.Fatalf("read_text_file: %s", r.text())
				}
				return r
			}
			stored := time.Now()
			if r := read(); !strings.Contains(r.text(), "first version") {
				t.Fatalf("first read: %s", r.text())
			}
			if err := os.WriteFile(file, []byte("second version"), 0o600); err != nil {
				t.Fatal(err)
			}
			r := read()
			if !tc.kept {
				if r.cacheStatus() == "hit" || !strings.Contains(r.text(), "second version") {
					t.Fatalf("without a ttl the read is fresh: %q %s", r.cacheStatus(), r.text())
				}
				return
			}
			const ttl = 3 * time.Second
			if time.Since(stored) < ttl-time.Second && (r.cacheStatus() != "hit" || !strings.Contains(r.text(), "first version")) {
				t.Fatalf("within the 3s ttl the read is a hit of the old contents: %q %s", r.cacheStatus(), r.text())
			}
			// The old contents until the ttl ends, then the new ones.
			for r.cacheStatus() == "hit" {
				if !strings.Contains(r.text(), "first version") {
					t.Fatalf("a hit of other contents: %s", r.text())
				}
				time.Sleep(100 * time.Millisecond)
				r = read()
			}
			if time.Since(stored) < ttl || !strings.Contains(r.text(), "second version") {
				t.Fatalf("the stored contents went after %v, before the 3s ttl, or the refetch is stale: %s", time.Since(stored), r.text())
			}
		})
	}
}

// TestAnswersMadeWithCallerInputAreNotShared: a read-only tool that asks its
// client for roots, an elicited answer or a model's output is answered anew
// for every caller, across two gateways sharing one memory.
func TestAnswersMadeWithCallerInputAreNotShared(t *testing.T) {
	t.Parallel()
	h := memoryHome(t, nil)
	answering := func(who string) func(m message) (any, *rpcError) {
		return func(m message) (any, *rpcError) {
			switch m.Method {
			case "roots/list":
				return map[string]any{"roots": []map[string]any{{"uri": "file:///home/" + who, "name": who}}}, nil
			case "elicitation/create":
				return map[string]any{"action": "accept", "content": map[string]any{"name": who}}, nil
			case "sampling/createMessage":
				return map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "I am " + who}, "model": "m", "stopReason": "endTurn"}, nil
			}
			return nil, &rpcError{Code: -32601, Message: m.Method}
		}
	}
	alice, bob := h.serveStdio("--agent", "alice"), h.serveStdio("--agent", "bob")
	for _, s := range []struct {
		s   *session
		who string
	}{{alice, "alice"}, {bob, "bob"}} {
		s.s.mu.Lock()
		s.s.answer = answering(s.who)
		s.s.mu.Unlock()
	}
	for _, what := range []string{"roots", "elicitation", "sampling"} {
		t.Run(what, func(t *testing.T) {
			before := h.calls()["ask"]
			for _, c := range []struct {
				s        *session
				who, not string
			}{{alice, "alice", "bob"}, {bob, "bob", "alice"}, {alice, "alice", "bob"}} {
				r := c.s.call("fx__ask", map[string]any{"what": what})
				if r.IsError || !strings.Contains(r.text(), c.who) || strings.Contains(r.text(), c.not) {
					t.Fatalf("%s got %q (%s)", c.who, r.text(), r.cacheStatus())
				}
				if r.cacheStatus() == "hit" {
					t.Fatalf("%s was served a remembered answer made with a caller's input", c.who)
				}
			}
			if n := h.calls()["ask"] - before; n != 3 {
				t.Fatalf("the child was asked %d times, want 3 (one per call)", n)
			}
		})
	}
}

// TestTimedOutWriteInvalidates: a mutating call that times out at the gateway
// may still complete at the child, so it invalidates like a success.
func TestTimedOutWriteInvalidates(t *testing.T) {
	// The timeout also bounds the child's handshake: 1s leaves room for a loaded
	// machine to start the fixture.
	h := fixtureHome(t, map[string]any{"timeout": "1s",
		// sleep stands for a slow write here.
		"annotations": map[string]any{"sleep": map[string]any{"readOnlyHint": false}}}, nil)
	s := h.serveStdio()
	s.call("fx__lookup", map[string]any{"env": "a"})
	if r := s.call("fx__lookup", map[string]any{"env": "a"}); r.cacheStatus() != "hit" {
		t.Fatalf("second read: %q", r.cacheStatus())
	}
	if r := s.call("fx__sleep", map[string]any{"ms": 4000}); !r.IsError || !strings.Contains(r.text(), "did not answer") {
		t.Fatalf("the slow write: %+v", r)
	}
	if r := s.call("fx__lookup", map[string]any{"env": "a"}); r.cacheStatus() != "miss" {
		t.Fatalf("read after a write whose outcome is unknown: %q, want miss", r.cacheStatus())
	}
}

// TestStaleIfError: with the child down, an expired answer younger than the
// window is served and says so; never while the child answers; off unless
// configured.
func TestStaleIfError(t *testing.T) {
	// Not parallel (a 200ms ttl and a 2s timeout), but its two cases, each with a
	// child and a down file of its own, run beside each other: they mostly wait.
	for _, tc := range []struct {
		name   string
		window map[string]any
		stale  bool
	}{
		{"configured", map[string]any{"fx.*": "1h"}, true},
		{"off by default", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			down := filepath.Join(t.TempDir(), "down")
			extra := map[string]any{"ttl": map[string]any{"fx.lookup": "200ms"}} // crash is read-only here so that it invalidates nothing: only
			// the child's death makes the entry stale.

			if tc.window != nil {
				extra["staleIfError"] = tc.window
			}
			// A call made while its server restarts waits for it, up to the
			// server's timeout; then the child has failed.
			h := fixtureHome(t, map[string]any{"timeout": "2s", "env": map[string]string{"FIXTURE_CALL_LOG": filepath.Join(t.TempDir(), "calls"), "FIXTURE_DOWN_FILE": down},
				"annotations": map[string]any{"crash": map[string]any{"readOnlyHint": true}}}, extra)
			s := h.serveStdio()
			first := s.call("fx__lookup", map[string]any{"env": "prod"})
			if first.IsError || first.cacheStatus() != "miss" {
				t.Fatalf("first read: %+v", first)
			}
			// Polls until the entry stops being a fresh hit (its ttl ended, or the
			// child's death made it stale), and returns that answer.
			next := func() callResult {
				t.Helper()
				deadline := time.Now().Add(10 * time.Second)
				for {
					r := s.call("fx__lookup", map[string]any{"env": "prod"})
					if r.cacheStatus() != "hit" {
						return r
					}
					if time.Now().After(deadline) {
						t.Fatal("still a fresh hit after 10s with a 200ms ttl")
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			// While the child answers, an expired entry is never served.
			last := next()
			if last.cacheStatus() != "miss" || last.IsError || last.text() == first.text() {
				t.Fatalf("expired, child up: %+v", last)
			}
			if err := os.WriteFile(down, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			s.call("fx__crash", map[string]any{})
			r := next()
			if !tc.stale {
				if !r.IsError || r.cacheStatus() == "stale" {
					t.Fatalf("stale-if-error is off, yet: %+v", r)
				}
				return
			}
			rep, _ := r.Meta["nexus/cache"].(map[string]any)
			if r.IsError || rep["status"] != "stale" || r.text() != last.text() || !strings.Contains(rep["error"].(string), "not running") {
				t.Fatalf("with the child down: %+v", r)
			}
			if age, _ := rep["age_ms"].(float64); age <= 0 {
				t.Fatalf("age_ms %v", rep["age_ms"])
			}
			// The child comes back: its own answer again, never the stale one.
			os.Remove(down)
			deadline := time.Now().Add(30 * time.Second)
			for {
				r := s.call("fx__lookup", map[string]any{"env": "prod"})
				if r.cacheStatus() == "miss" && !r.IsError {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the child never came back: %+v", r)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// TestCacheTTLCommand: nexus cache ttl turns memory on for a server, list-tools
// and cache stats say where each ttl came from, and off turns it off again.
func TestCacheTTLCommand(t *testing.T) {
	t.Parallel()
	// Only fx.echo has a ttl in the config (this replaces the harness's "*").
	h := memoryHome(t, map[string]any{"ttl": map[string]any{"fx.echo": "1m"}})
	run := func(args ...string) string {
		t.Helper()
		out, stderr, code := h.nexus(args...)
		if code != 0 {
			t.Fatalf("nexus %s: exit %d\n%s%s", strings.Join(args, " "), code, out, stderr)
		}
		return out
	}
	ttlOf := func() map[string][2]string {
		var rows []struct{ Canonical, TTL, TTLFrom string }
		if err := json.Unmarshal([]byte(run("list-tools", "--json")), &rows); err != nil {
			t.Fatal(err)
		}
		out := map[string][2]string{}
		for _, r := range rows {
			out[r.Canonical] = [2]string{r.TTL, r.TTLFrom}
		}
		return out
	}
	if got := ttlOf(); got["fx.lookup"] != [2]string{"none", ""} || got["fx.echo"] != [2]string{"1m", "config"} || got["fx.destroy"] != [2]string{"none", ""} {
		t.Fatalf("before: %v", got)
	}
	if out := run("cache", "ttl", "fx", "10m"); !strings.Contains(out, "fx.* are kept for 10m") {
		t.Fatalf("cache ttl: %s", out)
	}
	got := ttlOf()
	if got["fx.lookup"] != [2]string{"10m", "command"} || got["fx.echo"] != [2]string{"1m", "config"} || got["fx.destroy"] != [2]string{"none", ""} {
		t.Fatalf("after cache ttl: %v", got)
	}
	run("call", "fx.lookup", "--args", `{"env":"x"}`)
	var st struct {
		Tools []struct{ Tool, TTL, TTLFrom string }
	}
	if err := json.Unmarshal([]byte(run("cache", "stats", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Tools) != 1 || st.Tools[0].Tool != "fx.lookup" || st.Tools[0].TTLFrom != "command" {
		t.Fatalf("cache stats: %+v", st.Tools)
	}
	run("cache", "ttl", "fx", "off")
	if got := ttlOf(); got["fx.lookup"] != [2]string{"none", ""} {
		t.Fatalf("after off: %v", got)
	}
	if _, stderr, code := h.nexus("cache", "ttl", "fx", "soon"); code != 2 || !strings.Contains(stderr, "ttl") {
		t.Fatalf("a bad duration: exit %d %s", code, stderr)
	}
}

// TestResultsReadStrictly: a child that spells isError twice or in another case
// has its answer passed on as it sent it, never stored; a write with such a
// result counts as done.
func TestResultsReadStrictly(t *testing.T) {
	t.Parallel()
	h := fixtureHome(t, map[string]any{"env": map[string]string{"FIXTURE_MODE": "raw", "FIXTURE_CALL_LOG": filepath.Join(t.TempDir(), "calls")}}, nil)
	s := h.serveStdio()
	for _, tc := range []struct {
		shape  string
		stored bool
	}{
		{"plain", true},
		{"error", false},
		{"error-then-case", false},
		{"case-only", false},
		{"duplicate", false},
	} {
		t.Run(tc.shape, func(t *testing.T) {
			first := s.call("fx__shape", map[string]any{"shape": tc.shape})
			second := s.call("fx__shape", map[string]any{"shape": tc.shape})
			if got := second.cacheStatus() == "hit"; got != tc.stored {
				t.Fatalf("second call %q (%s), stored %v, want %v", second.cacheStatus(), second.text(), got, tc.stored)
			}
			if !tc.stored && first.text() == second.text() {
				t.Fatalf("the child was not asked again: %q", second.text())
			}
		})
	}
	// A mutating call whose isError is ambiguous counts as done: it invalidates.
	s.call("fx__shape", map[string]any{"shape": "plain"})
	if r := s.call("fx__shape", map[string]any{"shape": "plain"}); r.cacheStatus() != "hit" {
		t.Fatalf("plain read: %q", r.cacheStatus())
	}
	s.call("fx__write_shape", map[string]any{"shape": "error"}) // the child said plainly it failed
	if r := s.call("fx__shape", map[string]any{"shape": "plain"}); r.cacheStatus() != "hit" {
		t.Fatalf("after a write that failed: %q", r.cacheStatus())
	}
	s.call("fx__write_shape", map[string]any{"shape": "error-then-case"})
	if r := s.call("fx__shape", map[string]any{"shape": "plain"}); r.cacheStatus() != "miss" {
		t.Fatalf("after a write whose failure is ambiguous: %q, want miss", r.cacheStatus())
	}
}
