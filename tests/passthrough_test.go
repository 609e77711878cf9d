package tests

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// TestPassThroughInstructions: each child's instructions reach the client in the
// gateway's initialize result under the server's name, in server-name order, after
// Nexus's own line, redacted; a child without instructions adds no heading.
func TestPassThroughInstructions(t *testing.T) {
	t.Parallel()
	const secret = "litcanary-instructions-0123456789"
	h := newHome(t, nil)
	h.writeConfig(map[string]any{"servers": map[string]any{
		"zeta": h.fixtureServer(map[string]any{"env": map[string]string{"FIXTURE_INSTRUCTIONS": "Zeta says: call echo first."}}),
		"alpha": h.fixtureServer(map[string]any{"env": map[string]string{"API_KEY": secret,
			"FIXTURE_INSTRUCTIONS": "Alpha says: be brief, with key " + secret}}),
		"plain": h.fixtureServer(nil),
	}})
	res := h.serveStdioReady([]string{"alpha", "plain", "zeta"}, "--no-memory").initialized
	var init struct {
		Instructions string                     `json:"instructions"`
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(res, &init); err != nil {
		t.Fatal(err)
	}
	want := "Nexus gateway: the tools of several MCP servers, each named after the server it comes from.\n\n" +
		"## alpha\nAlpha says: be brief, with key [redacted:alpha/env/API_KEY]\n\n## zeta\nZeta says: call echo first."
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
	t.Parallel()
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
	// prompts/get and resources/read carry _meta the same way.
	h2 := newHome(t, nil)
	h2.writeConfig(map[string]any{"servers": map[string]any{"fx": h2.fixtureServer(map[string]any{"env": map[string]string{"FIXTURE_META": "1"}})},
		"policy": map[string]any{"default": map[string]any{"allow": []string{"*"}}}})
	s2 := h2.serveStdio("--no-memory")
	meta := map[string]any{"trace/id": "t-2", "progressToken": "p-2", "nexus/x": 1}
	pm := s2.requestMsg("prompts/get", map[string]any{"name": "fx__meta", "_meta": meta})
	if pm.Error != nil || !strings.Contains(string(pm.Result), `{\"trace/id\":\"t-2\"}`) ||
		!strings.Contains(string(pm.Result), `"fixture/back":"from the child"`) || strings.Contains(string(pm.Result), "nexus/forged") {
		t.Errorf("prompts/get: the child saw or answered another _meta: %s", pm.raw)
	}
	rm := s2.requestMsg("resources/read", map[string]any{"uri": "fixture://meta", "_meta": meta})
	if rm.Error != nil || !strings.Contains(string(rm.Result), `{\"trace/id\":\"t-2\"}`) {
		t.Errorf("resources/read: the child saw another _meta: %s", rm.raw)
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
	t.Parallel()
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

// TestPassThroughTasks runs server-everything's task-required tool through Nexus over
// HTTP: the gateway declares tasks because the child does; the task is created, read
// and its result fetched under an id of the gateway's; another agent, or another
// session of the same agent, cannot use that id, and tasks/list shows each session
// its own tasks only.
func TestPassThroughTasks(t *testing.T) {
	t.Parallel()
	node, script := everythingServer(t)
	h := newHome(t, map[string]any{"servers": map[string]any{
		"everything": map[string]any{"command": node, "args": []string{script, "stdio"}},
	}, "policy": map[string]any{"default": map[string]any{"allow": []string{"*"}},
		"agents": map[string]any{"bob": map[string]any{"allow": []string{"everything.echo"}}}}})
	tokens := map[string]string{}
	for _, agent := range []string{"alice", "bob"} {
		out, stderr, code := h.nexus("agent", "add", agent)
		if code != 0 {
			t.Fatalf("agent add %s: %s", agent, stderr)
		}
		tokens[agent] = strings.TrimSpace(out)
	}
	// server-everything's own instructions reach the client under its name.
	var direct, through struct {
		Instructions string `json:"instructions"`
	}
	json.Unmarshal(startSession(t, h.env(), node, script, "stdio").initialized, &direct)
	json.Unmarshal(h.serveStdioReady([]string{"everything"}, "--no-memory").initialized, &through)
	if direct.Instructions == "" || !strings.Contains(through.Instructions, "\n\n## everything\n"+strings.TrimSpace(direct.Instructions)) {
		t.Errorf("server-everything's instructions %q did not reach the client: %q", direct.Instructions, through.Instructions)
	}
	url, stderr := h.serveHTTP("--no-memory")
	waitChildren(t, stderr, "everything")
	alice, err := httpClientNamed(t, url, tokens["alice"], "alice")
	if err != nil {
		t.Fatalf("alice: %v\n%s", err, stderr)
	}
	if caps := alice.GetServerCapabilities(); caps.Tasks == nil || caps.Tasks.List == nil {
		t.Errorf("no tasks capability though server-everything offers it: %+v", caps)
	}
	bob, err := httpClientNamed(t, url, tokens["bob"], "bob")
	if err != nil {
		t.Fatal(err)
	}
	alice2, err := httpClientNamed(t, url, tokens["alice"], "alice")
	if err != nil {
		t.Fatal(err)
	}

	// Without a task the child refuses in its own words (an isError result that
	// names -32601), and they reach the client as the child gave them.
	if res, e := rawRequest(t, alice, "tools/call", map[string]any{"name": "everything__simulate-research-query", "arguments": map[string]any{"topic": "go"}}); e != nil || !strings.Contains(string(res), "requires task augmentation") {
		t.Errorf("a task-required tool called without a task: %s %+v, want the child's refusal", res, e)
	}
	res, e := rawRequest(t, alice, "tools/call", map[string]any{"name": "everything__simulate-research-query",
		"arguments": map[string]any{"topic": "go"}, "task": map[string]any{"ttl": 60000}})
	if e != nil {
		t.Fatalf("task-augmented call: %+v\n%s", e, stderr)
	}
	var created struct {
		Task struct {
			TaskID string `json:"taskId"`
			Status string `json:"status"`
		} `json:"task"`
	}
	if err := json.Unmarshal(res, &created); err != nil || !strings.HasPrefix(created.Task.TaskID, "nexus-task-") {
		t.Fatalf("created task %s: want a gateway task id", res)
	}
	id := created.Task.TaskID
	// A task runs under the agent's policy for its tool.
	if res, e := rawRequest(t, bob, "tools/call", map[string]any{"name": "everything__simulate-research-query",
		"arguments": map[string]any{"topic": "go"}, "task": map[string]any{"ttl": 60000}}); e == nil || e.Code != -32602 || !strings.Contains(e.Message, "bob") {
		t.Errorf("bob's task of a tool his policy refuses: %s %+v, want a refusal", res, e)
	}
	got, e := rawRequest(t, alice, "tasks/get", map[string]any{"taskId": id})
	if e != nil || !strings.Contains(string(got), `"taskId":"`+id+`"`) {
		t.Errorf("tasks/get by its creator: %s %+v", got, e)
	}
	for _, other := range []struct {
		name string
		c    *client.Client
	}{{"another agent", bob}, {"another session of the agent", alice2}} {
		for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
			if res, e := rawRequest(t, other.c, method, map[string]any{"taskId": id}); e == nil || e.Code != -32602 {
				t.Errorf("%s: %s of alice's task: %s %+v, want -32602", other.name, method, res, e)
			}
		}
		if list, e := rawRequest(t, other.c, "tasks/list", map[string]any{}); e != nil || strings.Contains(string(list), id) {
			t.Errorf("%s: tasks/list shows alice's task: %s %+v", other.name, list, e)
		}
	}
	list, e := rawRequest(t, alice, "tasks/list", map[string]any{})
	var listed struct {
		Tasks []struct {
			TaskID string `json:"taskId"`
		} `json:"tasks"`
	}
	if e != nil || json.Unmarshal(list, &listed) != nil || len(listed.Tasks) != 1 || listed.Tasks[0].TaskID != id {
		t.Errorf("alice's tasks/list: %s %+v, want her one task", list, e)
	}
	result, e := rawRequest(t, alice, "tasks/result", map[string]any{"taskId": id})
	if e != nil || !strings.Contains(string(result), "Research Report") {
		t.Fatalf("tasks/result: %s %+v", result, e)
	}
	// The child's own task id never reaches the client.
	if strings.Contains(string(result), `"taskId"`) && !strings.Contains(string(result), `"taskId":"`+id+`"`) {
		t.Errorf("tasks/result carries another task id: %s", result)
	}
	if got, e := rawRequest(t, alice, "tasks/get", map[string]any{"taskId": id}); e != nil || !strings.Contains(string(got), `"status":"completed"`) {
		t.Errorf("tasks/get after the result: %s %+v", got, e)
	}
}

// rawRequest sends one request on c's transport and returns the raw result or error.
func rawRequest(t *testing.T, c *client.Client, method string, params any) (json.RawMessage, *mcp.JSONRPCErrorDetails) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION,
		ID: mcp.NewRequestId("raw-" + method + "-" + time.Now().Format(time.RFC3339Nano)), Method: method, Params: params})
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return resp.Result, resp.Error
}
