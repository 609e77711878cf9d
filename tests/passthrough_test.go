package tests

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestPassThroughInstructions: each child's instructions reach the client in the
// gateway's initialize result under the server's name, in server-name order, after
// Nexus's own line; a child without instructions adds no heading.
func TestPassThroughInstructions(t *testing.T) {
	h := newHome(t, nil)
	h.writeConfig(map[string]any{"servers": map[string]any{
		"zeta":  h.fixtureServer(map[string]any{"env": map[string]string{"FIXTURE_INSTRUCTIONS": "Zeta says: call echo first."}}),
		"alpha": h.fixtureServer(map[string]any{"env": map[string]string{"FIXTURE_INSTRUCTIONS": "Alpha says: be brief."}}),
		"plain": h.fixtureServer(nil),
	}})
	res := h.serveStdio("--no-memory").initialized
	var init struct {
		Instructions string                     `json:"instructions"`
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(res, &init); err != nil {
		t.Fatal(err)
	}
	want := "Nexus gateway: the tools of several MCP servers, each named after the server it comes from.\n\n" +
		"## alpha\nAlpha says: be brief.\n\n## zeta\nZeta says: call echo first."
	if init.Instructions != want {
		t.Errorf("instructions:\n%s\nwant:\n%s", init.Instructions, want)
	}
	if _, ok := init.Capabilities["tasks"]; ok {
		t.Errorf("the tasks capability is declared though no child offers tasks: %s", res)
	}
}

// TestPassThroughMeta: the _meta of a request reaches the child, less the keys Nexus
// owns (its progress token replaces the client's; nexus/* never pass), and the
// child's result _meta reaches the client, less nexus/* keys; progress still works.
func TestPassThroughMeta(t *testing.T) {
	h := newHome(t, nil)
	h.writeConfig(map[string]any{"servers": map[string]any{"fx": h.fixtureServer(nil)}})
	s := h.serveStdio("--no-memory")
	for _, tc := range []struct {
		name      string
		meta      map[string]any
		wantChild map[string]any // what the child saw, apart from progressToken
		token     bool           // the child got a progress token
	}{
		{"none", nil, map[string]any{}, false},
		{"client keys", map[string]any{"trace/id": "t-1", "io.example/x": map[string]any{"a": 1.0}},
			map[string]any{"trace/id": "t-1", "io.example/x": map[string]any{"a": 1.0}}, false},
		{"nexus keys dropped", map[string]any{"nexus/cache": "bypass", "keep": true}, map[string]any{"keep": true}, false},
		{"progress token replaced", map[string]any{"progressToken": "client-token", "keep": "yes"}, map[string]any{"keep": "yes"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := map[string]any{"name": "fx__meta", "arguments": map[string]any{"n": tc.name}}
			if tc.meta != nil {
				params["_meta"] = tc.meta
			}
			res, rpcErr := s.request("tools/call", params)
			if rpcErr != nil {
				t.Fatalf("tools/call: %+v", rpcErr)
			}
			var r callResult
			if err := json.Unmarshal(res, &r); err != nil {
				t.Fatal(err)
			}
			var seen map[string]any
			if err := json.Unmarshal([]byte(r.text()), &seen); err != nil && r.text() != "null" {
				t.Fatalf("the child's answer %q: %v", r.text(), err)
			}
			if seen == nil {
				seen = map[string]any{}
			}
			tok, hasTok := seen["progressToken"]
			delete(seen, "progressToken")
			if hasTok != tc.token || hasTok && !strings.HasPrefix(tok.(string), "nexus-") {
				t.Errorf("the child's progress token: %v (want one of Nexus's: %v)", tok, tc.token)
			}
			if a, b := mustJSON(t, seen), mustJSON(t, tc.wantChild); a != b {
				t.Errorf("the child saw _meta %s, want %s", a, b)
			}
			if r.Meta["fixture/back"] != "from the child" {
				t.Errorf("the child's result _meta did not reach the client: %s", res)
			}
			if _, ok := r.Meta["nexus/forged"]; ok {
				t.Errorf("a child's nexus/* result key reached the client: %s", res)
			}
		})
	}
	// Progress still reaches the client under its own token.
	res, rpcErr := s.request("tools/call", map[string]any{"name": "fx__progress", "arguments": map[string]any{"steps": 2},
		"_meta": map[string]any{"progressToken": "p-1", "other": 1}})
	if rpcErr != nil {
		t.Fatalf("progress: %+v %s", rpcErr, res)
	}
	s.waitNote("notifications/progress", 5*time.Second, func(m message) bool { return strings.Contains(string(m.Params), `"progressToken":"p-1"`) })
}

// TestPassThroughChildErrors: a child's own JSON-RPC error to tools/call and
// resources/read reaches the client with its code, message and data; Nexus's own
// errors (an unknown name it decides) stay Nexus's.
func TestPassThroughChildErrors(t *testing.T) {
	h := newHome(t, nil)
	h.writeConfig(map[string]any{"servers": map[string]any{
		"raw": h.fixtureServer(map[string]any{"env": map[string]string{"FIXTURE_MODE": "raw", "FIXTURE_ERRORS": "1", "FIXTURE_CALL_LOG": h.log}}),
		"fx":  h.fixtureServer(map[string]any{"env": map[string]string{"FIXTURE_ERRORS": "1", "FIXTURE_CALL_LOG": h.log}}),
	}, "policy": map[string]any{"default": map[string]any{"allow": []string{"*"}}}})
	s := h.serveStdio("--no-memory")
	for _, tc := range []struct {
		name, method string
		params       map[string]any
		code         int
		message      string
		data         string
	}{
		{"child's own code and data", "tools/call", map[string]any{"name": "raw__rpc_error", "arguments": map[string]any{}},
			-32099, "raw: refused by the child", `{"why":"its own reason"}`},
		{"child's internal error", "tools/call", map[string]any{"name": "fx__fail", "arguments": map[string]any{}},
			-32603, "fixture failed on purpose", ""},
		{"child's resource not found", "resources/read", map[string]any{"uri": "raw://missing"},
			-32002, "raw: no such resource", `{"uri":"raw://missing"}`},
		{"Nexus's unknown tool", "tools/call", map[string]any{"name": "fx__nope", "arguments": map[string]any{}},
			-32602, `unknown tool "fx__nope"`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := s.requestMsg(tc.method, tc.params)
			var e struct {
				Error *struct {
					Code    int             `json:"code"`
					Message string          `json:"message"`
					Data    json.RawMessage `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal(m.raw, &e); err != nil || e.Error == nil {
				t.Fatalf("want a JSON-RPC error, got %s", m.raw)
			}
			if e.Error.Code != tc.code || !strings.Contains(e.Error.Message, tc.message) {
				t.Errorf("error %d %q, want %d containing %q", e.Error.Code, e.Error.Message, tc.code, tc.message)
			}
			if tc.data != "" && compactJSON(t, e.Error.Data) != tc.data {
				t.Errorf("error data %s, want %s", e.Error.Data, tc.data)
			}
		})
	}
}
