package tests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

func fixtureHome(t *testing.T, server map[string]any, extra map[string]any) *home {
	t.Helper()
	h := newHome(t, nil)
	// The core tests exercise routing, not policy: every tool is allowed.
	cfg := map[string]any{"servers": map[string]any{"fx": h.fixtureServer(server)},
		"policy": map[string]any{"default": map[string]any{"allow": []string{"*"}}}}
	for k, v := range extra {
		cfg[k] = v
	}
	h.writeConfig(cfg)
	return h
}

func TestNamespacing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		server   map[string]any
		listed   string
		callable []string
		absent   []string
	}{
		// The child's own name is accepted too, when one server alone has it (MCP Apps call by it).
		{"wire names by default", nil, nil, "fx__echo", []string{"fx__echo", "fx.echo", "echo"}, []string{"Echo", "fx.Echo", " fx.echo", "fx__ech"}},
		{"dotted names on request", []string{"--tool-names", "dotted"}, nil, "fx.echo", []string{"fx.echo", "echo"}, []string{"fx__echo"}},
		{"a custom prefix", nil, map[string]any{"prefix": "f"}, "f__echo", []string{"f__echo", "fx.echo"}, []string{"fx__echo"}},
		{"bare names with an empty prefix", nil, map[string]any{"prefix": ""}, "echo", []string{"echo", "fx.echo"}, []string{"fx__echo"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := fixtureHome(t, tc.server, nil)
			s := h.serveStdio(append(tc.args, "--no-memory")...)
			tools := s.tools()
			if _, ok := tools[tc.listed]; !ok {
				t.Fatalf("tools/list lacks %q: %v", tc.listed, mapKeys(tools))
			}
			for _, name := range tc.callable {
				if got := s.call(name, map[string]any{"message": "hi " + name}); got.IsError || got.text() != "hi "+name {
					t.Errorf("call %q = %+v, want the echo", name, got)
				}
			}
			for _, name := range tc.absent {
				_, rpcErr := s.request("tools/call", map[string]any{"name": name, "arguments": map[string]any{"message": "x"}})
				if rpcErr == nil || rpcErr.Code != -32602 {
					t.Errorf("call %q: got %+v, want -32602", name, rpcErr)
				}
			}
			if n := h.calls()["echo"]; n != len(tc.callable) {
				t.Errorf("the child received %d echo calls, want %d", n, len(tc.callable))
			}
		})
	}
}

func mapKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestSchemasPassThrough compares every tool listed through Nexus with the fixture's
// own listing: schemas and annotations byte for byte, names apart.
func TestSchemasPassThrough(t *testing.T) {
	t.Parallel()
	h := fixtureHome(t, nil, nil)
	direct := startSession(t, h.env("FIXTURE_CALL_LOG="+h.log), built.fixture).tools()
	through := h.serveStdio("--no-memory").tools()
	if len(direct) != len(through) {
		t.Fatalf("direct listing has %d tools, through nexus %d", len(direct), len(through))
	}
	for name, raw := range direct {
		got, ok := through["fx__"+name]
		if !ok {
			t.Errorf("tool %s missing through nexus", name)
			continue
		}
		var d, g map[string]json.RawMessage
		json.Unmarshal(raw, &d)
		json.Unmarshal(got, &g)
		for _, key := range []string{"inputSchema", "outputSchema", "annotations", "description", "title"} {
			if compactOrEmpty(t, d[key]) != compactOrEmpty(t, g[key]) {
				t.Errorf("%s.%s differs:\n direct  %s\n through %s", name, key, d[key], g[key])
			}
		}
	}
	if !strings.Contains(string(through["fx__rich"]), `"anyOf"`) || !strings.Contains(string(through["fx__rich"]), `"$schema"`) {
		t.Errorf("the rich schema lost keywords: %s", through["fx__rich"])
	}
}

func compactOrEmpty(t *testing.T, raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	return compactJSON(t, raw)
}

// TestResultPassThrough checks that a result with every content type, structured
// content and _meta reaches the client as the child sent it.
func TestResultPassThrough(t *testing.T) {
	t.Parallel()
	h := fixtureHome(t, nil, nil)
	direct := startSession(t, h.env(), built.fixture).requestMsg("tools/call", map[string]any{"name": "rich", "arguments": map[string]any{"mode": "a"}})
	through := h.serveStdio("--no-memory").requestMsg("tools/call", map[string]any{"name": "fx__rich", "arguments": map[string]any{"mode": "a"}})
	if direct.Error != nil || through.Error != nil {
		t.Fatalf("errors: direct %+v, through %+v", direct.Error, through.Error)
	}
	if compactJSON(t, direct.Result) != compactJSON(t, through.Result) {
		t.Errorf("result changed on the way:\n direct  %s\n through %s", direct.Result, through.Result)
	}
	for _, want := range []string{`"image"`, `"audio"`, `"resource_link"`, `"resource"`, `"structuredContent"`, `"fixture/trace"`} {
		if !strings.Contains(string(through.Result), want) {
			t.Errorf("result lacks %s: %s", want, through.Result)
		}
	}
}

func TestProgressReachesTheCaller(t *testing.T) {
	t.Parallel()
	h := fixtureHome(t, nil, nil)
	s := h.serveStdio()
	res, rpcErr := s.request("tools/call", map[string]any{"name": "fx__progress", "arguments": map[string]any{"steps": 3},
		"_meta": map[string]any{"progressToken": "tok-7"}})
	if rpcErr != nil {
		t.Fatal(rpcErr)
	}
	if !strings.Contains(string(res), "done 3 steps") {
		t.Fatalf("result %s", res)
	}
	for i := 1; i <= 3; i++ {
		n := s.waitNote("notifications/progress", 5*time.Second, nil)
		var p struct {
			Token    any     `json:"progressToken"`
			Progress float64 `json:"progress"`
		}
		json.Unmarshal(n.Params, &p)
		if p.Token != "tok-7" || p.Progress != float64(i) {
			t.Errorf("progress %d: %s", i, n.Params)
		}
	}
}

func TestToolAddedAtRunTime(t *testing.T) {
	t.Parallel()
	h := fixtureHome(t, nil, nil)
	s := h.serveStdio()
	if _, ok := s.tools()["fx__late_tool"]; ok {
		t.Fatal("late_tool listed before it was added")
	}
	s.call("fx__add_tool", map[string]any{})
	s.waitNote("notifications/tools/list_changed", 5*time.Second, nil)
	if _, ok := s.tools()["fx__late_tool"]; !ok {
		t.Fatal("late_tool not listed after list_changed")
	}
	if r := s.call("fx.late_tool", map[string]any{}); r.text() != "late" {
		t.Errorf("late_tool answered %q", r.text())
	}
}

func TestCrashAndRecovery(t *testing.T) {
	t.Parallel()
	h := fixtureHome(t, nil, nil)
	s := h.serveStdio()
	r := s.call("fx__crash", map[string]any{})
	if !r.IsError || !strings.Contains(r.text(), "fx") {
		t.Fatalf("a crashing child should give a tool error naming the server, got %+v", r)
	}
	s.waitNote("notifications/tools/list_changed", 10*time.Second, nil)
	eventually(t, 15*time.Second, "the fixture's tools come back", func() bool {
		_, ok := s.tools()["fx__echo"]
		return ok
	})
	if got := s.call("fx__echo", map[string]any{"message": "again"}); got.text() != "again" {
		t.Errorf("after recovery echo = %+v", got)
	}
	eventually(t, 5*time.Second, "the child's stderr reaches the log prefixed by its name", func() bool {
		return strings.Contains(s.stderr.String(), "[fx] fixture: crashing on request")
	})
}

func TestCallTimeout(t *testing.T) {
	// The timeout also bounds the child's handshake: 1s leaves room for a loaded
	// machine to start the fixture.
	h := fixtureHome(t, map[string]any{"timeout": "1s"}, nil)
	s := h.serveStdio()
	start := time.Now()
	r := s.call("fx__sleep", map[string]any{"ms": 5000})
	if !r.IsError || !strings.Contains(r.text(), "did not answer") || !strings.Contains(r.text(), "timeout") {
		t.Fatalf("want a timeout tool error, got %+v", r)
	}
	if time.Since(start) > 4*time.Second {
		t.Errorf("the timeout did not cut the call short")
	}
	eventually(t, 5*time.Second, "the child hears the cancellation", func() bool { return h.calls()["sleep-cancelled"] == 1 })
}

func TestCancellation(t *testing.T) {
	t.Parallel()
	h := fixtureHome(t, nil, nil)
	s := h.serveStdio()
	ch := s.expect("99")
	s.send(map[string]any{"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": map[string]any{"name": "fx__sleep", "arguments": map[string]any{"ms": 10000}}})
	eventually(t, 5*time.Second, "the call reaches the child", func() bool { return h.calls()["sleep"] == 1 })
	s.notify("notifications/cancelled", map[string]any{"requestId": 99, "reason": "user gave up"})
	eventually(t, 5*time.Second, "the child hears the cancellation", func() bool { return h.calls()["sleep-cancelled"] == 1 })
	// The specification: a cancelled request gets no response. One sent after
	// it is answered, and by then nothing came for the cancelled one.
	if _, rpcErr := s.request("tools/list", nil); rpcErr != nil {
		t.Fatalf("tools/list after the cancellation: %+v", rpcErr)
	}
	select {
	case m := <-ch:
		t.Errorf("the cancelled call was answered: %s", m.raw)
	default:
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	h := fixtureHome(t, nil, map[string]any{"maxMessageBytes": 4096})
	s := h.serveStdio()
	tests := []struct {
		name    string
		raw     string
		code    int
		message string
	}{
		{"unknown tool suggests the closest", `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"fx__ech","arguments":{}}}`, -32602, `did you mean "fx__echo"`},
		{"arguments must be an object", `{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"fx__echo","arguments":[1,2]}}`, -32602, "must be a JSON object"},
		{"params must be an object", `{"jsonrpc":"2.0","id":"c","method":"tools/call","params":"echo"}`, -32602, "tools/call params"},
		{"over-size message", `{"jsonrpc":"2.0","id":"d","method":"tools/call","params":{"name":"fx__echo","arguments":{"message":"` + strings.Repeat("x", 5000) + `"}}}`, -32600, "larger than 4096"},
		{"unknown method", `{"jsonrpc":"2.0","id":"e","method":"no/such","params":{}}`, -32601, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var id string
			var m map[string]any
			if json.Unmarshal([]byte(tc.raw), &m) == nil {
				id = fmt.Sprintf("%q", m["id"])
			} else {
				id = "null"
			}
			// An over-size message is answered with its id, read as it streamed past:
			// a client must be able to match the answer.
			ch := s.expect(id)
			s.sendRaw([]byte(tc.raw))
			got := s.wait(ch, tc.name)
			if got.Error == nil || got.Error.Code != tc.code || !strings.Contains(got.Error.Message, tc.message) {
				t.Errorf("got %s, want code %d with %q", got.raw, tc.code, tc.message)
			}
		})
	}
	ch := s.expect("null")
	s.sendRaw([]byte(`{"jsonrpc":"2.0","id":1,"method":`))
	if got := s.wait(ch, "malformed JSON"); got.Error == nil || got.Error.Code != -32700 {
		t.Errorf("malformed JSON: got %s, want -32700", got.raw)
	}
	if got := s.call("fx__echo", map[string]any{"message": "still here"}); got.text() != "still here" {
		t.Errorf("after bad input the gateway should still serve: %+v", got)
	}
	if h.calls()["echo"] != 1 {
		t.Errorf("bad input reached the child: %v", h.calls())
	}
	// Nothing but JSON-RPC on stdout.
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, line := range strings.Split(strings.TrimSpace(string(s.stdout)), "\n") {
		if !json.Valid([]byte(line)) || !strings.Contains(line, `"jsonrpc":"2.0"`) {
			t.Errorf("stdout carried a non-MCP line: %q", line)
		}
	}
}

// TestChildEnvironment checks that the gateway's environment does not leak into a
// child, and that configured env does reach it.
func TestChildEnvironment(t *testing.T) {
	t.Parallel()
	h := fixtureHome(t, map[string]any{"env": map[string]string{"FIXTURE_CALL_LOG": "", "GIVEN": "configured", "FROM_ENV": "${env:NEXUS_TEST_INJECTED}"}}, nil)
	s := startSession(t, h.env("GATEWAY_ONLY=leak", "NEXUS_TEST_INJECTED=injected"), built.nexus, "serve")
	// A value injected with ${env:...} is registered for redaction: the child's echo of
	// exactly that value comes back as its label.
	for name, want := range map[string]string{"GATEWAY_ONLY": "<unset>", "GIVEN": "configured", "FROM_ENV": "[redacted:fx/env/FROM_ENV]"} {
		if got := s.call("fx__getenv", map[string]any{"name": name}).text(); got != want {
			t.Errorf("%s in the child = %q, want %q", name, got, want)
		}
	}
}

func TestDisabledAndFailingServers(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	h.writeConfig(map[string]any{"servers": map[string]any{
		"fx":     h.fixtureServer(nil),
		"off":    h.fixtureServer(map[string]any{"disabled": true}),
		"broken": map[string]any{"command": "/nonexistent/program"},
	}})
	s := h.serveStdio()
	tools := s.tools()
	if _, ok := tools["fx__echo"]; !ok {
		t.Fatal("a broken server must not hold up the others")
	}
	for name := range tools {
		if strings.HasPrefix(name, "off__") || strings.HasPrefix(name, "broken__") {
			t.Errorf("tool %s of a disabled or broken server is listed", name)
		}
	}
	eventually(t, 5*time.Second, "the broken server's failure is logged", func() bool {
		return strings.Contains(s.stderr.String(), "broken")
	})
}

func TestBareNameCollisionRefusedAtStart(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	h.writeConfig(map[string]any{"servers": map[string]any{
		"one": h.fixtureServer(map[string]any{"prefix": ""}),
		"two": h.fixtureServer(map[string]any{"prefix": ""}),
	}})
	_, stderr, code := h.nexus("list-tools")
	if code == 0 || !strings.Contains(stderr, "both go by") {
		t.Errorf("colliding bare names should be refused at start, got code %d:\n%s", code, stderr)
	}
}

func TestLongNamesAreShortenedStably(t *testing.T) {
	t.Parallel()
	long := "a_tool_with_a_very_long_name_that_goes_on_and_on_past_the_limit_of_clients"
	h := fixtureHome(t, map[string]any{"env": map[string]string{"FIXTURE_EXTRA_TOOLS": long}}, nil)
	var names []string
	for i := 0; i < 2; i++ {
		out, _, code := h.nexus("list-tools", "--json")
		if code != 0 {
			t.Fatal(out)
		}
		var rows []struct{ Canonical, Wire string }
		json.Unmarshal([]byte(out), &rows)
		for _, r := range rows {
			if r.Canonical == "fx."+long {
				names = append(names, r.Wire)
			}
		}
	}
	if len(names) != 2 || names[0] != names[1] || len(names[0]) > 64 {
		t.Fatalf("wire names of the long tool across two runs: %v", names)
	}
	s := h.serveStdio()
	if r := s.call(names[0], map[string]any{}); r.text() != long {
		t.Errorf("calling the shortened name: %+v", r)
	}
	if r := s.call("fx."+long, map[string]any{}); r.text() != long {
		t.Errorf("calling the canonical name: %+v", r)
	}
}
