package tests

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Children of either protocol era, end to end: Nexus finds each child's era
// (initialize first; a dual-era child keeps a session), lists its tools, calls
// one, and list-servers --live says the era.

// tsEraServer is testdata/era-server.mjs, a TypeScript SDK v2 server, once
// npm ci installed the SDK in tests/ (see peerScript).
func tsEraServer(t *testing.T) (node, script string) {
	t.Helper()
	node, _ = peerScript(t, "@modelcontextprotocol/server/package.json")
	script, err := filepath.Abs(filepath.Join("testdata", "era-server.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	return node, script
}

// liveProtocols is what list-servers --live --json says of each server's
// protocol.
func liveProtocols(t *testing.T, h *home) map[string]string {
	t.Helper()
	out, stderr, code := h.nexus("list-servers", "--live", "--json")
	if code != 0 {
		t.Fatalf("list-servers --live: %d %s", code, stderr)
	}
	var rows []struct {
		Name, State, Error, Protocol string
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("list-servers --live --json: %v: %s", err, out)
	}
	got := map[string]string{}
	for _, r := range rows {
		if r.State != "ready" {
			t.Errorf("server %s is %s: %s", r.Name, r.State, r.Error)
		}
		got[r.Name] = r.Protocol
	}
	return got
}

// TestTypeScriptChildEras: TypeScript SDK v2 servers serving both eras and
// only the modern one, and server-everything (SDK v1, legacy), behind one
// gateway.
func TestTypeScriptChildEras(t *testing.T) {
	t.Parallel()
	node, era := tsEraServer(t)
	_, everything := everythingServer(t)
	h := newHome(t, map[string]any{"servers": map[string]any{
		"dual":       map[string]any{"command": node, "args": []string{era, "dual"}},
		"modern":     map[string]any{"command": node, "args": []string{era, "modern"}},
		"everything": map[string]any{"command": node, "args": []string{everything, "stdio"}},
	}, "policy": map[string]any{"default": map[string]any{"allow": []string{"*"}}}})
	want := map[string]string{"dual": "2025-11-25 (session)", "modern": "2026-07-28 (stateless)", "everything": "2025-11-25 (session)"}
	if got := liveProtocols(t, h); len(got) != len(want) || got["dual"] != want["dual"] || got["modern"] != want["modern"] || got["everything"] != want["everything"] {
		t.Errorf("protocols %v, want %v", got, want)
	}
	// The first list must hold every child's tools: initialize once they are
	// connected (see serveStdioReady).
	s := h.serveStdioReady([]string{"dual", "modern", "everything"}, "--no-memory")
	tools := s.tools()
	for _, name := range []string{"dual__echo", "modern__echo", "everything__echo"} {
		if _, ok := tools[name]; !ok {
			t.Errorf("tool %s not listed", name)
		}
	}
	for _, server := range []string{"dual", "modern"} {
		if got := s.call(server+"__echo", map[string]any{"text": "hi"}).text(); got != "ts:hi" {
			t.Errorf("%s__echo answered %q", server, got)
		}
	}
	if got := s.call("everything__echo", map[string]any{"message": "hi"}).text(); !strings.Contains(got, "hi") {
		t.Errorf("everything__echo answered %q", got)
	}
}

// TestTypeScriptPinnedEra: a server pinned to the legacy era that serves only
// the modern one fails to start, and list-servers says why.
func TestTypeScriptPinnedEra(t *testing.T) {
	t.Parallel()
	node, era := tsEraServer(t)
	h := newHome(t, map[string]any{"servers": map[string]any{
		"modern": map[string]any{"command": node, "args": []string{era, "modern"}, "protocolVersion": "2025-11-25"},
	}, "policy": map[string]any{"default": map[string]any{"allow": []string{"*"}}}})
	out, _, _ := h.nexus("list-servers", "--live")
	if !strings.Contains(out, "servers.modern.protocolVersion is 2025-11-25") {
		t.Errorf("list-servers --live does not say the pinned version is why: %s", out)
	}
}

// serveTSHTTP starts era-server.mjs serving streamable HTTP in mode and
// returns its URL; the server ends with the test.
func serveTSHTTP(t *testing.T, node, script, mode string) string {
	t.Helper()
	cmd := exec.Command(node, script, mode)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("%s printed no URL: %v", mode, err)
	}
	return strings.TrimSpace(line)
}

// TestTypeScriptHTTPChildEras: TypeScript SDK v2 servers over streamable HTTP,
// serving both eras and only the modern one: the dual one keeps a session, the
// other is spoken the modern era; their tools are listed and called, and a tool
// each adds reaches the gateway's tools/list (on the session's stream, or the
// subscriptions/listen one).
func TestTypeScriptHTTPChildEras(t *testing.T) {
	t.Parallel()
	node, era := tsEraServer(t)
	servers := map[string]any{}
	for _, name := range []string{"dual", "modern"} {
		servers[name] = map[string]any{"transport": "streamable-http", "url": serveTSHTTP(t, node, era, "http-"+name)}
	}
	h := newHome(t, map[string]any{"servers": servers, "policy": map[string]any{"default": map[string]any{"allow": []string{"*"}}}})
	if got := liveProtocols(t, h); got["dual"] != "2025-11-25 (session)" || got["modern"] != "2026-07-28 (stateless)" {
		t.Errorf("protocols %v, want the dual server with a session, the modern one stateless", got)
	}
	s := h.serveStdio("--no-memory")
	for _, server := range []string{"dual", "modern"} {
		if got := s.call(server+"__echo", map[string]any{"text": "hi"}).text(); got != "ts:hi" {
			t.Errorf("%s__echo answered %q", server, got)
		}
	}
	if got := s.call("modern__grow", map[string]any{}).text(); got != "grew" {
		t.Fatalf("modern__grow answered %q", got)
	}
	eventually(t, 20*time.Second, "modern__grown in tools/list", func() bool {
		_, ok := s.tools()["modern__grown"]
		return ok
	})
}
