package tests

import (
	"encoding/json"
	"strings"
	"testing"
)

// everythingServer is the path of @modelcontextprotocol/server-everything, installed
// by .ci/run from tests/package-lock.json (npm ci). A missing install skips the test
// with the command to run, and fails it when the run asked for every peer
// (.ci/run sets NEXUS_REQUIRE_NODE_PEERS=1).
func everythingServer(t *testing.T) (node, script string) {
	t.Helper()
	return peerScript(t, "@modelcontextprotocol/server-everything/dist/index.js")
}

// TestServerEverythingThroughNexus runs a real third-party server as a child and checks
// that every tool it lists reaches the client unchanged apart from its name.
func TestServerEverythingThroughNexus(t *testing.T) {
	t.Parallel()
	node, script := everythingServer(t)
	h := newHome(t, map[string]any{"servers": map[string]any{
		"everything": map[string]any{"command": node, "args": []string{script, "stdio"}},
	}, "policy": map[string]any{"default": map[string]any{"allow": []string{"*"}}}})
	direct := startSession(t, h.env(), node, script, "stdio").tools()
	// Listed once the child is connected: a node server may take longer to
	// start than the gateway waits before its first list on a loaded machine.
	s := h.serveStdioReady([]string{"everything"}, "--no-memory")
	// This client answers sampling and roots from the start: server-everything
	// asks for roots as it starts, and on a loaded machine that can fall
	// during the first call, when the question is this client's to answer.
	s.mu.Lock()
	s.answer = func(m message) (any, *rpcError) {
		switch m.Method {
		case "sampling/createMessage":
			return map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "sampled by the test client"}, "model": "test", "stopReason": "endTurn"}, nil
		case "roots/list":
			return map[string]any{"roots": []map[string]any{{"uri": "file:///work/root-from-client", "name": "root"}}}, nil
		}
		return nil, &rpcError{Code: -32601, Message: m.Method}
	}
	s.mu.Unlock()
	through := s.tools()
	if len(direct) == 0 {
		t.Fatal("server-everything listed no tools")
	}
	if len(through) != len(direct) {
		t.Errorf("direct: %d tools, through nexus: %d", len(direct), len(through))
	}
	for name, raw := range direct {
		got, ok := through["everything__"+name]
		if !ok {
			t.Errorf("tool %s missing through nexus", name)
			continue
		}
		if a, b := withoutName(t, raw), withoutName(t, got); a != b {
			t.Errorf("tool %s changed on the way:\n direct  %s\n through %s", name, a, b)
		}
	}
	// One real call, with the child's structured answer.
	if r := s.call("everything__echo", map[string]any{"message": "hello everything"}); r.IsError || r.text() == "" {
		t.Errorf("echo through nexus: %+v", r)
	}

	// Beyond tools: resources keep their URIs, prompts are namespaced like tools.
	d := startSession(t, h.env(), node, script, "stdio")
	for _, list := range []struct{ method, field, key, prefix string }{
		{"resources/list", "resources", "uri", ""},
		{"resources/templates/list", "resourceTemplates", "uriTemplate", ""},
		{"prompts/list", "prompts", "name", "everything__"},
	} {
		want, got := listKeys(t, d, list.method, list.field, list.key), listKeys(t, s, list.method, list.field, list.key)
		if len(want) == 0 {
			t.Errorf("%s: the child listed nothing", list.method)
		}
		for _, k := range want {
			if !contains(got, list.prefix+k) {
				t.Errorf("%s: %q missing through nexus (got %v)", list.method, list.prefix+k, got)
			}
		}
	}
	uri := listKeys(t, d, "resources/list", "resources", "uri")[0]
	rd, rt := d.requestMsg("resources/read", map[string]any{"uri": uri}), s.requestMsg("resources/read", map[string]any{"uri": uri})
	if rt.Error != nil || compactJSON(t, rd.Result) != compactJSON(t, rt.Result) {
		t.Errorf("resources/read %s: direct %s, through %s", uri, rd.raw, rt.raw)
	}
	if m := s.requestMsg("resources/read", map[string]any{"uri": "demo://resource/dynamic/text/7"}); m.Error != nil || !strings.Contains(string(m.Result), "7") {
		t.Errorf("a templated resource through nexus: %s", m.raw)
	}
	pd := d.requestMsg("prompts/get", map[string]any{"name": "args-prompt", "arguments": map[string]string{"city": "Lyon"}})
	pt := s.requestMsg("prompts/get", map[string]any{"name": "everything__args-prompt", "arguments": map[string]string{"city": "Lyon"}})
	if pt.Error != nil || compactJSON(t, pd.Result) != compactJSON(t, pt.Result) {
		t.Errorf("prompts/get: direct %s, through %s", pd.raw, pt.raw)
	}
	// A request the child sends back during a call reaches the calling client.
	if r := s.call("everything__trigger-sampling-request", map[string]any{"prompt": "hi", "maxTokens": 10}); r.IsError || !strings.Contains(r.text(), "sampled by the test client") {
		t.Errorf("sampling through nexus: %+v", r)
	}
	// server-everything asks for roots as it starts, usually with no call in
	// flight, and is answered none; before this client's first call to it,
	// Nexus tells it the roots changed, and the client's roots are what it
	// reports.
	if r := s.call("everything__get-roots-list", map[string]any{}); r.IsError || !strings.Contains(r.text(), "root-from-client") {
		t.Errorf("roots through nexus: %+v\ngateway log:\n%s", r, s.stderr)
	}

	cm := s.requestMsg("completion/complete", map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "everything__completable-prompt"},
		"argument": map[string]any{"name": "department", "value": "E"}})
	if cm.Error != nil || !strings.Contains(string(cm.Result), "Engineering") {
		t.Errorf("completion through nexus: %s", cm.raw)
	}
}

func listKeys(t *testing.T, s *session, method, field, key string) []string {
	t.Helper()
	res, rpcErr := s.request(method, map[string]any{})
	if rpcErr != nil {
		t.Fatalf("%s: %+v", method, rpcErr)
	}
	var m map[string][]map[string]any
	json.Unmarshal(res, &m)
	var out []string
	for _, it := range m[field] {
		if v, ok := it[key].(string); ok {
			out = append(out, v)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// withoutName re-encodes a tool object without its name (and with absent annotations
// as {}), in canonical key order, for comparison.
func withoutName(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "name")
	if _, ok := m["annotations"]; !ok {
		m["annotations"] = map[string]any{}
	}
	b, _ := json.Marshal(m)
	return string(b)
}
