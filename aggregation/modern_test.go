package aggregation

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/internal/jsonrpc"
)

// modernMeta is the _meta of a 2026-07-28 request.
func modernMeta(caps map[string]any, extra ...string) map[string]any {
	if caps == nil {
		caps = map[string]any{}
	}
	m := map[string]any{metaProtocolVersion: "2026-07-28", metaClientCaps: caps, metaClientInfo: map[string]any{"name": "modern-test", "version": "1"}}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return m
}

// withMeta is params with a _meta.
func withMeta(params map[string]any, meta map[string]any) map[string]any {
	out := map[string]any{"_meta": meta}
	for k, v := range params {
		out[k] = v
	}
	return out
}

// modernHTTP is one 2026-07-28 POST, headers set as a conforming client sets them
// (headers, when given, replace or remove them: "" removes); it returns the HTTP
// status and every message of the answer (one, or the events of a stream).
func modernHTTP(t *testing.T, url, token string, id any, method string, params map[string]any, headers map[string]string) (int, []wireMsg) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", name)
	}
	if uri, ok := params["uri"].(string); ok {
		req.Header.Set("Mcp-Name", uri)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, readMessages(t, resp)
}

// readMessages reads an HTTP answer's JSON-RPC messages: a JSON body or SSE events.
func readMessages(t *testing.T, resp *http.Response) []wireMsg {
	t.Helper()
	var out []wireMsg
	add := func(b []byte) {
		var m wireMsg
		if len(bytes.TrimSpace(b)) == 0 {
			return
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("not a JSON-RPC message: %v: %s", err, b)
		}
		out = append(out, m)
	}
	switch ct := resp.Header.Get("Content-Type"); {
	case strings.HasPrefix(ct, "application/json"):
		b, _ := io.ReadAll(resp.Body)
		add(b)
		return out
	case !strings.HasPrefix(ct, "text/event-stream"):
		return nil // a refusal before MCP (401, 403): no message
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			add([]byte(data))
		}
	}
	return out
}

// last is the response among an answer's messages.
func last(t *testing.T, msgs []wireMsg) wireMsg {
	t.Helper()
	if len(msgs) == 0 {
		t.Fatal("no answer")
	}
	return msgs[len(msgs)-1]
}

// modernStdio sends a 2026-07-28 request on a stdio connection that never
// initialized.
func modernStdio(c *testClient, method string, params map[string]any) wireMsg {
	return c.request(method, params)
}

// TestModernEveryMethod: every method of 2026-07-28 is served on both fronts without
// initialize, with the era's result fields, the agent's policy and the redactor.
func TestModernEveryMethod(t *testing.T) {
	f := newFixture(t)
	calls := []struct {
		method string
		params map[string]any
		want   string // in the result
	}{
		{"server/discover", nil, `"supportedVersions":["2026-07-28","2025-11-25"`},
		{"tools/list", nil, `"name":"good__echo"`},
		{"tools/call", map[string]any{"name": "good__echo", "arguments": map[string]any{"text": "hi"}}, `good:hi`},
		{"prompts/list", nil, `"name":"good__greet"`},
		{"prompts/get", map[string]any{"name": "good__greet", "arguments": map[string]any{"who": "ann"}}, `good greets ann`},
		{"resources/list", nil, `mem://good/doc`},
		{"resources/templates/list", nil, `mem://good/item/{id}`},
		{"resources/read", map[string]any{"uri": "mem://good/doc"}, `good document`},
		{"completion/complete", map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "good__greet"}, "argument": map[string]any{"name": "who", "value": "a"}}, `"completion"`},
	}
	for _, front := range fronts {
		var stdio *testClient
		if front == frontStdio {
			stdio = stdioClient(t, f.g, "tester")
		}
		for i, tc := range calls {
			t.Run(front+"/"+tc.method, func(t *testing.T) {
				params := withMeta(tc.params, modernMeta(nil))
				var m wireMsg
				if front == frontStdio {
					m = modernStdio(stdio, tc.method, params)
				} else {
					status, msgs := modernHTTP(t, f.url, tokens["tester"], i+1, tc.method, params, nil)
					if status != http.StatusOK {
						t.Fatalf("status %d: %+v", status, msgs)
					}
					m = last(t, msgs)
				}
				if m.Error != nil {
					t.Fatalf("error: %s", m.Error.Message)
				}
				res := string(m.Result)
				var r struct {
					ResultType string                     `json:"resultType"`
					Meta       map[string]json.RawMessage `json:"_meta"`
					TTL        *int                       `json:"ttlMs"`
					Scope      string                     `json:"cacheScope"`
				}
				_ = json.Unmarshal(m.Result, &r)
				if r.ResultType != "complete" || !strings.Contains(string(r.Meta[metaServerInfo]), `"nexus"`) {
					t.Errorf("result lacks resultType or serverInfo: %s", res)
				}
				if cacheable[tc.method] && (r.TTL == nil || *r.TTL < 0 || r.Scope != scopePrivate) {
					t.Errorf("a %s result must carry ttlMs and a private cacheScope (the agents' lists differ): %s", tc.method, res)
				}
				if !strings.Contains(res, tc.want) {
					t.Errorf("result lacks %s: %s", tc.want, res)
				}
				if strings.Contains(res, canary) {
					t.Errorf("the canary reached a client: %s", res)
				}
				if strings.Contains(res, "evil__") {
					t.Errorf("tester's result shows a server its policy denies: %s", res)
				}
			})
		}
	}
}

// TestModernRefusals: what a 2026-07-28 request is refused for over HTTP, with the
// code and status the revision gives each, and the request's id on every error.
func TestModernRefusals(t *testing.T) {
	f := newFixture(t)
	call := map[string]any{"name": "good__echo", "arguments": map[string]any{"text": "x"}}
	cases := []struct {
		name    string
		method  string
		params  map[string]any
		headers map[string]string
		status  int
		code    int
		says    string
	}{
		{"no version header", "tools/call", withMeta(call, modernMeta(nil)), map[string]string{"MCP-Protocol-Version": ""}, 400, codeHeaderMismatch, "MCP-Protocol-Version"},
		{"version header and body differ", "tools/call", withMeta(call, modernMeta(nil, metaProtocolVersion, "2099-01-01")), nil, 400, codeHeaderMismatch, "does not match"},
		{"method header differs", "tools/call", withMeta(call, modernMeta(nil)), map[string]string{"Mcp-Method": "tools/list"}, 400, codeHeaderMismatch, "Mcp-Method"},
		{"method header in capitals", "tools/list", withMeta(nil, modernMeta(nil)), map[string]string{"Mcp-Method": "TOOLS/LIST"}, 400, codeHeaderMismatch, "Mcp-Method"},
		{"name header missing", "tools/call", withMeta(call, modernMeta(nil)), map[string]string{"Mcp-Name": ""}, 400, codeHeaderMismatch, "Mcp-Name"},
		{"name header differs", "tools/call", withMeta(call, modernMeta(nil)), map[string]string{"Mcp-Name": "good__get"}, 400, codeHeaderMismatch, "Mcp-Name"},
		{"name header in base64", "tools/call", withMeta(call, modernMeta(nil)), map[string]string{"Mcp-Name": "=?base64?" + base64.StdEncoding.EncodeToString([]byte("good__echo")) + "?="}, 200, 0, ""},
		{"name header with spaces", "tools/call", withMeta(call, modernMeta(nil)), map[string]string{"Mcp-Name": "  good__echo "}, 200, 0, ""},
		{"no _meta", "tools/list", map[string]any{}, nil, 400, jsonrpc.CodeInvalidParams, "_meta"},
		{"no capabilities", "tools/list", withMeta(nil, map[string]any{metaProtocolVersion: "2026-07-28"}), nil, 400, jsonrpc.CodeInvalidParams, metaClientCaps},
		{"unknown version", "tools/list", withMeta(nil, modernMeta(nil, metaProtocolVersion, "2099-01-01")), map[string]string{"MCP-Protocol-Version": "2099-01-01"}, 400, codeUnsupportedVersion, "2026-07-28, 2025-11-25"},
		{"initialize is gone", "initialize", withMeta(nil, modernMeta(nil)), nil, 404, jsonrpc.CodeMethodNotFound, "initialize"},
		{"ping is gone", "ping", withMeta(nil, modernMeta(nil)), nil, 404, jsonrpc.CodeMethodNotFound, "ping"},
		{"setLevel is gone", "logging/setLevel", withMeta(map[string]any{"level": "debug"}, modernMeta(nil)), nil, 404, jsonrpc.CodeMethodNotFound, "logging/setLevel"},
		{"subscribe is gone", "resources/subscribe", withMeta(map[string]any{"uri": "mem://good/doc"}, modernMeta(nil)), nil, 404, jsonrpc.CodeMethodNotFound, "resources/subscribe"},
		{"unknown method", "tools/frobnicate", withMeta(nil, modernMeta(nil)), nil, 404, jsonrpc.CodeMethodNotFound, "not supported"},
		{"unknown log level", "tools/list", withMeta(nil, modernMeta(nil, metaLogLevel, "loud")), nil, 400, jsonrpc.CodeInvalidParams, "loud"},
		{"unknown resource", "resources/read", withMeta(map[string]any{"uri": "mem://nobody/x"}, modernMeta(nil)), nil, 400, jsonrpc.CodeInvalidParams, "not found"},
		{"a denied prompt", "prompts/get", withMeta(map[string]any{"name": "evil__greet"}, modernMeta(nil)), nil, 400, jsonrpc.CodeInvalidParams, "may not"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := 100 + i
			status, msgs := modernHTTP(t, f.url, tokens["tester"], id, tc.method, tc.params, tc.headers)
			m := last(t, msgs)
			if status != tc.status {
				t.Errorf("status %d, want %d: %+v", status, tc.status, m)
			}
			if tc.code == 0 {
				if m.Error != nil {
					t.Errorf("refused: %s", m.Error.Message)
				}
				return
			}
			if m.Error == nil || m.Error.Code != tc.code || !strings.Contains(m.Error.Message, tc.says) {
				t.Fatalf("want error %d saying %q, got %+v", tc.code, tc.says, m)
			}
			if string(m.ID) != fmt.Sprint(id) {
				t.Errorf("the error carries id %s, want %d", m.ID, id)
			}
		})
	}
	t.Run("the denied tool", func(t *testing.T) {
		_, msgs := modernHTTP(t, f.url, tokens["tester"], 1, "tools/call", withMeta(map[string]any{"name": "evil__echo"}, modernMeta(nil)), nil)
		if m := last(t, msgs); !strings.Contains(string(m.Result), "may not") || f.evil.count("tools/call") != 0 {
			t.Errorf("tester's call of a denied tool: %s (evil saw %d calls)", m.Result, f.evil.count("tools/call"))
		}
	})
	t.Run("GET has no stream in this era", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, f.url, nil)
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Authorization", "Bearer "+tokens["tester"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("GET: status %d, want 405", resp.StatusCode)
		}
	})
	t.Run("no token", func(t *testing.T) {
		status, _ := modernHTTP(t, f.url, "", 1, "tools/list", withMeta(nil, modernMeta(nil)), nil)
		if status != http.StatusUnauthorized {
			t.Errorf("status %d, want 401", status)
		}
	})
}

// TestModernParamHeaders: the Mcp-Param headers of a tool whose schema mirrors
// arguments into them must say what the arguments say, or the call is refused
// before it reaches the child.
func TestModernParamHeaders(t *testing.T) {
	f := newFixture(t)
	b64 := func(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }
	cases := []struct {
		name    string
		args    map[string]any
		headers map[string]string
		ok      bool
	}{
		{"both mirrored", map[string]any{"region": "us-west1", "opts": map[string]any{"limit": 5}}, map[string]string{"Mcp-Param-Region": "us-west1", "mcp-param-limit": "5"}, true},
		{"base64", map[string]any{"region": "über"}, map[string]string{"Mcp-Param-Region": b64("über")}, true},
		{"no argument, no header", map[string]any{}, nil, true},
		{"header missing", map[string]any{"region": "us-west1"}, nil, false},
		{"header differs", map[string]any{"region": "us-west1"}, map[string]string{"Mcp-Param-Region": "eu-north1"}, false},
		{"nested header differs", map[string]any{"opts": map[string]any{"limit": 5}}, map[string]string{"Mcp-Param-Limit": "50"}, false},
		{"header without argument", map[string]any{}, map[string]string{"Mcp-Param-Region": "us-west1"}, false},
		{"malformed base64", map[string]any{"region": "x"}, map[string]string{"Mcp-Param-Region": "=?base64?***?="}, false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, msgs := modernHTTP(t, f.url, tokens["tester"], i+1, "tools/call", withMeta(map[string]any{"name": "good__region", "arguments": tc.args}, modernMeta(nil)), tc.headers)
			m := last(t, msgs)
			if tc.ok {
				if status != http.StatusOK || m.Error != nil || !strings.Contains(string(m.Result), "region call") {
					t.Fatalf("refused: %d %s %+v", status, m.Result, m.Error)
				}
				return
			}
			if status != http.StatusBadRequest || m.Error == nil || m.Error.Code != codeHeaderMismatch {
				t.Fatalf("want 400 -32020, got %d %s %+v", status, m.Result, m.Error)
			}
		})
	}
}

// TestModernLogLevel: a request gets the log messages of its servers only when its
// _meta asked for them and at its level, on its own stream, before its result (the
// raw child writes its log line before its result).
func TestModernLogLevel(t *testing.T) {
	_, url := agentsGateway(t, testChildServer("raw", "raw", ""))
	call := map[string]any{"name": "raw__note", "arguments": map[string]any{}}
	_, quiet := modernHTTP(t, url, tokens["tester"], 1, "tools/call", withMeta(call, modernMeta(nil)), nil)
	_, loud := modernHTTP(t, url, tokens["tester"], 2, "tools/call", withMeta(call, modernMeta(nil, metaLogLevel, "debug")), nil)
	_, above := modernHTTP(t, url, tokens["tester"], 3, "tools/call", withMeta(call, modernMeta(nil, metaLogLevel, "error")), nil)
	count := func(msgs []wireMsg) int {
		n := 0
		for _, m := range msgs {
			if m.Method == "notifications/message" {
				n++
				if strings.Contains(string(m.Params), canary) {
					t.Errorf("a log message carried the canary: %s", m.Params)
				}
			}
		}
		return n
	}
	if n := count(quiet); n != 0 {
		t.Errorf("a request without a logLevel got %d log messages", n)
	}
	if n := count(loud); n != 1 {
		t.Errorf("a request with logLevel debug got %d log messages, want 1: %+v", n, loud)
	}
	if n := count(above); n != 0 {
		t.Errorf("a request with logLevel error got %d warnings", n)
	}
}

// TestModernLogLevelLegacyChild: a modern request's logLevel reaches a legacy
// child as its session's level, so the logs it sends at that level or above
// come back on the request's stream, and a request without one gets none.
func TestModernLogLevelLegacyChild(t *testing.T) {
	_, url := agentsGateway(t, `{"e": `+eraServer("legacy", filepath.Join(t.TempDir(), "era.log"), "")+`}`)
	call := map[string]any{"name": "e__log", "arguments": map[string]any{}}
	count := func(msgs []wireMsg) int {
		n := 0
		for _, m := range msgs {
			if m.Method == "notifications/message" {
				n++
			}
		}
		return n
	}
	for i, tt := range []struct {
		level string
		want  int
	}{{"", 0}, {"info", 1}, {"error", 0}, {"warning", 1}} {
		meta := modernMeta(nil)
		if tt.level != "" {
			meta = modernMeta(nil, metaLogLevel, tt.level)
		}
		_, msgs := modernHTTP(t, url, tokens["tester"], i+1, "tools/call", withMeta(call, meta), nil)
		if n := count(msgs); n != tt.want {
			t.Errorf("a request with logLevel %q got %d log messages, want %d: %+v", tt.level, n, tt.want, msgs)
		}
	}
}

// TestModernSetLevelOnStdio: a 2026-07-28 client on stdio that sends
// logging/setLevel without initialize (the official Go SDK's does) is answered as
// servers answer it, and its later requests that name no level of their own
// get the log messages at that level.
func TestModernSetLevelOnStdio(t *testing.T) {
	g := comebackGateway(t, `{"e": `+eraServer("legacy", filepath.Join(t.TempDir(), "era.log"), "")+`}`, nil)
	waitState(t, g.kids()["e"], StateReady)
	c := stdioClient(t, g, "anonymous")
	if m := c.request("logging/setLevel", map[string]any{"level": "info"}); m.Error != nil {
		t.Fatalf("logging/setLevel before any initialize: %+v", m.Error)
	}
	if m := c.request("tools/call", withMeta(map[string]any{"name": "e__log", "arguments": map[string]any{}}, modernMeta(nil))); m.Error != nil {
		t.Fatalf("the call: %+v", m.Error)
	}
	if !c.waitNote("notifications/message", func(m wireMsg) bool { return strings.Contains(string(m.Params), "a warning") }) {
		t.Errorf("no log message after logging/setLevel; received:\n%s", c.received())
	}
	if m := c.request("logging/setLevel", map[string]any{"level": "loud"}); m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("an unknown level was answered %+v", m.Error)
	}
}

// samplingHandler answers every sampling request, counting them.
type samplingHandler struct {
	mu sync.Mutex
	n  int
}

func (h *samplingHandler) CreateMessage(_ context.Context, _ mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	h.mu.Lock()
	h.n++
	h.mu.Unlock()
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("hello from the model")}, Model: "test-model"}, nil
}

// TestModernClientLegacyChild: mcp-go's own 2026-07-28 client calls a tool whose
// legacy child asks for a sampling during the call. The child's request reaches the
// client as an InputRequiredResult, the client retries with its answer, and the
// child gets it: the client sees one call.
func TestModernClientLegacyChild(t *testing.T) {
	f := newFixture(t)
	h := &samplingHandler{}
	tr, err := transport.NewStreamableHTTP(f.url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tokens["tester"]}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithSamplingHandler(h))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "modern-sdk", Version: "1"}}}); err != nil {
		t.Fatal(err)
	}
	if v := c.ProtocolVersion(); v != "2026-07-28" {
		t.Fatalf("mcp-go's client settled on %s with Nexus, want 2026-07-28", v)
	}
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "good__sample"}})
	if err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprint(res.Content)
	if res.IsError || !strings.Contains(text, "hello from the model") {
		t.Fatalf("the call did not get the client's sampling: %s", text)
	}
	if h.n != 1 {
		t.Errorf("the client was asked %d times, want 1", h.n)
	}
	if got := len(f.g.flights.m); got != 0 {
		t.Errorf("%d flights left waiting after the call ended", got)
	}
}

// askCases are what the test child's ask tool may ask its client for: the
// capability that lets it, the answer a client gives, and what the tool then says.
var askCases = []struct {
	what   string
	caps   map[string]any
	answer map[string]any
	says   string
}{
	{"sampling", map[string]any{"sampling": map[string]any{}},
		map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "the answer"}, "model": "m"}, "the answer"},
	{"elicitation", map[string]any{"elicitation": map[string]any{"form": map[string]any{}}},
		map[string]any{"action": "accept", "content": map[string]any{"name": "ann"}}, "elicited: accept map[name:ann]"},
	{"roots", map[string]any{"roots": map[string]any{}},
		map[string]any{"roots": []any{map[string]any{"uri": "file:///work", "name": "work"}}}, "roots: file:///work"},
}

// TestModernInputRequired drives a legacy child's requests during a call (sampling,
// elicitation, roots) through the wire on both fronts: the InputRequiredResult, a
// retry without the answer (asked again), a tampered state, another agent's use of
// the state, the retry that finishes, and a state used once more after that.
func TestModernInputRequired(t *testing.T) {
	f := newFixture(t)
	for _, front := range fronts {
		for _, tc := range askCases {
			t.Run(front+"/"+tc.what, func(t *testing.T) {
				call := map[string]any{"name": "good__ask", "arguments": map[string]any{"text": tc.what}}
				var stdio *testClient
				if front == frontStdio {
					stdio = stdioClient(t, f.g, "tester")
				}
				send := func(agent string, params map[string]any) wireMsg {
					if front == frontStdio {
						return stdio.request("tools/call", params)
					}
					_, msgs := modernHTTP(t, f.url, tokens[agent], 7, "tools/call", params, nil)
					return last(t, msgs)
				}
				first := send("tester", withMeta(call, modernMeta(tc.caps)))
				var ir struct {
					ResultType    string `json:"resultType"`
					InputRequests map[string]struct {
						Method string `json:"method"`
					} `json:"inputRequests"`
					RequestState string `json:"requestState"`
				}
				if err := json.Unmarshal(first.Result, &ir); err != nil || ir.ResultType != "input_required" || len(ir.InputRequests) != 1 || ir.RequestState == "" {
					t.Fatalf("want an InputRequiredResult with one request and a state, got %s %+v", first.Result, first.Error)
				}
				var key string
				for k := range ir.InputRequests {
					key = k
				}
				retry := func(state string, answers map[string]any) map[string]any {
					p := withMeta(call, modernMeta(tc.caps))
					p["requestState"], p["inputResponses"] = state, answers
					return p
				}
				// The answer left out: asked again, under the same key.
				again := send("tester", retry(ir.RequestState, map[string]any{}))
				if !strings.Contains(string(again.Result), `"`+key+`"`) || !strings.Contains(string(again.Result), "input_required") {
					t.Fatalf("a retry without the answer: %s %+v", again.Result, again.Error)
				}
				var ir2 struct {
					RequestState string `json:"requestState"`
				}
				_ = json.Unmarshal(again.Result, &ir2)
				tampered := []byte(ir2.RequestState)
				tampered[2] ^= 1
				if m := send("tester", retry(string(tampered), map[string]any{})); m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidParams {
					t.Fatalf("a tampered state: %s %+v", m.Result, m.Error)
				}
				if front == frontHTTP {
					if m := send("other", retry(ir2.RequestState, map[string]any{})); m.Error == nil || !strings.Contains(m.Error.Message, "another agent") {
						t.Fatalf("another agent's retry with tester's state: %s %+v", m.Result, m.Error)
					}
				}
				done := send("tester", retry(ir2.RequestState, map[string]any{key: tc.answer}))
				if done.Error != nil || !strings.Contains(string(done.Result), tc.says) || !strings.Contains(string(done.Result), `"resultType":"complete"`) {
					t.Fatalf("the retry with the answer: %s %+v", done.Result, done.Error)
				}
				if m := send("tester", retry(ir2.RequestState, map[string]any{key: tc.answer})); m.Error == nil {
					t.Fatalf("a finished call's state was accepted again: %s", m.Result)
				}
			})
		}
	}
	t.Run("without the capability", func(t *testing.T) {
		call := map[string]any{"name": "good__sample", "arguments": map[string]any{}}
		_, msgs := modernHTTP(t, f.url, tokens["tester"], 9, "tools/call", withMeta(call, modernMeta(nil)), nil)
		if m := last(t, msgs); strings.Contains(string(m.Result), "input_required") || !strings.Contains(string(m.Result), "sampling failed") {
			t.Errorf("a client that cannot sample was asked to: %s", m.Result)
		}
	})
}

// TestListenOnStdio: a listen stream on a stdio connection leaves the connection
// free for other requests, tags its notifications with its id, and ends with the
// client's notifications/cancelled, which gets no answer.
func TestListenOnStdio(t *testing.T) {
	f := newFixture(t)
	c := stdioClient(t, f.g, "tester")
	c.post([]byte(`{"jsonrpc":"2.0","id":"listen-1","method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"notifications":{"toolsListChanged":true}}}`))
	if !c.waitNote("notifications/subscriptions/acknowledged", func(m wireMsg) bool { return strings.Contains(string(m.Params), `"listen-1"`) }) {
		t.Fatalf("no acknowledgement; received:\n%s", c.received())
	}
	// The connection still answers while the stream is open.
	if m := c.requestWithin("tools/list", withMeta(nil, modernMeta(nil)), 10*time.Second); m.Error != nil || !strings.Contains(string(m.Result), "good__echo") {
		t.Fatalf("a request while listening: %s %+v", m.Result, m.Error)
	}
	cfg, err := config.Parse("test.json", []byte(strings.Replace(f.cfg, `"deny": ["evil.*"]`, `"deny": ["evil.*", "good.echo"]`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.g.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if !c.waitNote("notifications/tools/list_changed", func(m wireMsg) bool { return strings.Contains(string(m.Params), `"listen-1"`) }) {
		t.Fatalf("no tagged list change; received:\n%s", c.received())
	}
	c.notify("notifications/cancelled", map[string]any{"requestId": "listen-1"})
	// A request after the cancellation is answered, and the listen never is.
	if m := c.request("tools/list", withMeta(nil, modernMeta(nil))); m.Error != nil {
		t.Fatalf("a request after the cancellation: %+v", m.Error)
	}
	if strings.Contains(c.received(), `"id":"listen-1","result"`) || strings.Contains(c.received(), `"id":"listen-1","error"`) {
		t.Errorf("a cancelled listen was answered:\n%s", c.received())
	}
}

// TestListen: subscriptions/listen acknowledges first, tags every notification with
// its id, carries only what it was asked for, and ends with the client.
func TestListen(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := listenEvents(t, ctx, f.url, tokens["tester"], "sub-1",
		map[string]any{"resourceSubscriptions": []string{"mem://good/doc", "mem://evil/doc"}, "toolsListChanged": true})
	next := func(what string) wireMsg {
		t.Helper()
		select {
		case m := <-events:
			return m
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s on the listen stream", what)
		}
		return wireMsg{}
	}
	ack := next("acknowledgement")
	if ack.Method != "notifications/subscriptions/acknowledged" || !strings.Contains(string(ack.Params), `"`+metaSubscriptionID+`":"sub-1"`) {
		t.Fatalf("first message: %s %s", ack.Method, ack.Params)
	}
	if !strings.Contains(string(ack.Params), "mem://good/doc") || strings.Contains(string(ack.Params), "mem://evil/doc") {
		t.Errorf("the acknowledgement must list the readable resource and not evil's: %s", ack.Params)
	}
	// A log and an update of the resource: only the update comes.
	modernHTTP(t, f.url, tokens["tester"], 2, "tools/call", withMeta(map[string]any{"name": "good__log", "arguments": map[string]any{}}, modernMeta(nil)), nil)
	modernHTTP(t, f.url, tokens["tester"], 3, "tools/call", withMeta(map[string]any{"name": "good__touch", "arguments": map[string]any{"text": "me"}}, modernMeta(nil)), nil)
	up := next("resource update")
	if up.Method != "notifications/resources/updated" || !strings.Contains(string(up.Params), "mem://good/doc") || !strings.Contains(string(up.Params), `"sub-1"`) {
		t.Fatalf("want the resource update tagged sub-1, got %s %s", up.Method, up.Params)
	}
	// A policy change that hides a tool from tester changes its list.
	cfg := strings.Replace(f.cfg, `"deny": ["evil.*"]`, `"deny": ["evil.*", "good.echo"]`, 1)
	parsed, err := config.Parse("test.json", []byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.g.Reload(parsed); err != nil {
		t.Fatal(err)
	}
	if m := next("tools list change"); m.Method != "notifications/tools/list_changed" || !strings.Contains(string(m.Params), `"sub-1"`) {
		t.Fatalf("want tools/list_changed tagged sub-1, got %s %s", m.Method, m.Params)
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && len(f.g.subs.subscribers(subKey{server: "good", uri: "mem://good/doc"})) > 0 {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(f.g.subs.subscribers(subKey{server: "good", uri: "mem://good/doc"})); n != 0 {
		t.Errorf("the subscription outlived its stream (%d subscribers)", n)
	}
}

// TestModernTasksExtension: a modern child that offers the tasks extension answers a
// call with a task only when the client declared the extension; the client knows
// the task by a handle of Nexus's, which it polls and cancels through Nexus, which
// another agent cannot use and which cannot be forged.
func TestModernTasksExtension(t *testing.T) {
	_, url := agentsGateway(t, testChildServer("raw", "raw-tasks", ""))
	ext := map[string]any{"extensions": map[string]any{tasksExtension: map[string]any{}}}
	ask := func(agent, method string, params map[string]any, caps map[string]any) wireMsg {
		t.Helper()
		_, msgs := modernHTTP(t, url, tokens[agent], 1, method, withMeta(params, modernMeta(caps)), nil)
		return last(t, msgs)
	}
	if m := ask("tester", "server/discover", nil, nil); !strings.Contains(string(m.Result), `"extensions":{"`+tasksExtension+`":{}}`) {
		t.Errorf("discover does not offer the tasks extension: %s", m.Result)
	}
	if m := ask("tester", "tools/call", map[string]any{"name": "raw__job"}, nil); !strings.Contains(string(m.Result), "done at once") {
		t.Fatalf("a call without the extension: %s %+v", m.Result, m.Error)
	}
	created := ask("tester", "tools/call", map[string]any{"name": "raw__job"}, ext)
	var task struct {
		ResultType string `json:"resultType"`
		TaskID     string `json:"taskId"`
		Status     string `json:"status"`
	}
	if err := json.Unmarshal(created.Result, &task); err != nil || task.ResultType != "task" || task.TaskID == "" || task.Status != "working" {
		t.Fatalf("a call with the extension: %s %+v", created.Result, created.Error)
	}
	if task.TaskID == "job-1" || strings.Contains(string(created.Result), "job-1") {
		t.Fatalf("the child's own task id reached the client: %s", created.Result)
	}
	got := ask("tester", "tasks/get", map[string]any{"taskId": task.TaskID}, ext)
	if !strings.Contains(string(got.Result), "the job is done") || !strings.Contains(string(got.Result), `"taskId":"`+task.TaskID+`"`) || strings.Contains(string(got.Result), "job-1") {
		t.Fatalf("tasks/get: %s %+v", got.Result, got.Error)
	}
	if m := ask("other", "tasks/get", map[string]any{"taskId": task.TaskID}, ext); m.Error == nil || !strings.Contains(m.Error.Message, "another agent") {
		t.Errorf("another agent polled tester's task: %s %+v", m.Result, m.Error)
	}
	forged := []byte(task.TaskID)
	forged[3] ^= 1
	if m := ask("tester", "tasks/get", map[string]any{"taskId": string(forged)}, ext); m.Error == nil {
		t.Errorf("a forged handle was honoured: %s", m.Result)
	}
	if m := ask("tester", "tasks/get", map[string]any{"taskId": "job-1"}, ext); m.Error == nil {
		t.Errorf("the child's own id was honoured: %s", m.Result)
	}
	if m := ask("tester", "tasks/cancel", map[string]any{"taskId": task.TaskID}, ext); m.Error != nil {
		t.Errorf("tasks/cancel: %+v", m.Error)
	}
}

// agentsGateway serves a gateway of the servers given (a config's "servers" object)
// to the agents tester and other, both allowed everything, and returns it with its
// /mcp URL.
func agentsGateway(t *testing.T, servers string) (*Gateway, string) {
	t.Helper()
	cfg, err := config.Parse("test.json", []byte(fmt.Sprintf(`{
		"servers": %s,
		"agents": {"tester": {"tokenSha256": %q}, "other": {"tokenSha256": %q}},
		"policy": {"agents": {"tester": {"allow": ["*"]}, "other": {"allow": ["*"]}}}
	}`, servers, TokenHash(tokens["tester"]), TokenHash(tokens["other"]))))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return g, serveHTTP(t, g).URL + "/mcp"
}

// testChildServer is a "servers" entry that runs this test binary as the child
// NEXUS_TEST_CHILD names, with more environment in env ("K": "V" pairs).
func testChildServer(name, child, env string) string {
	if env != "" {
		env = ", " + env
	}
	return fmt.Sprintf(`{%q: {"command": %q, "args": ["-test.run=^$"], "env": {"NEXUS_TEST_CHILD": %q%s}}}`, name, os.Args[0], child, env)
}

// modernChildFixture is a gateway whose one child, fresh, is the test child spoken
// 2026-07-28: its ask tool asks for input with an InputRequiredResult of its own.
func modernChildFixture(t *testing.T) (*Gateway, string) {
	t.Helper()
	g, url := agentsGateway(t, testChildServer("fresh", "fresh", `"NEXUS_TEST_CHILD_ERA": "modern"`))
	if st := g.Servers(); len(st) != 1 || !strings.Contains(st[0].Protocol, "stateless") {
		t.Fatalf("the child is not spoken the modern era: %+v", st)
	}
	return g, url
}

// TestLegacyClientModernChild: a legacy client calls a tool whose modern child asks
// for input with an InputRequiredResult. Nexus sends each input request to the
// client as a request of its own, asks the child again with the answers and its
// state, and the client sees one call.
func TestLegacyClientModernChild(t *testing.T) {
	g, url := modernChildFixture(t)
	for _, front := range fronts {
		for _, tc := range askCases {
			t.Run(front+"/"+tc.what, func(t *testing.T) {
				var c *testClient
				if front == frontStdio {
					c = stdioClient(t, g, "tester")
				} else {
					c = httpClient(t, url, tokens["tester"])
				}
				var asked []string
				var mu sync.Mutex
				c.answer = func(method string, _ json.RawMessage) (any, *RPCError) {
					mu.Lock()
					asked = append(asked, method)
					mu.Unlock()
					return tc.answer, nil
				}
				c.initializeWith("legacy-"+tc.what, tc.caps)
				m := c.request("tools/call", map[string]any{"name": "fresh__ask", "arguments": map[string]any{"text": tc.what}})
				if m.Error != nil || !strings.Contains(string(m.Result), tc.says) || strings.Contains(string(m.Result), "input_required") {
					t.Fatalf("the call: %s %+v", m.Result, m.Error)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(asked) != 1 {
					t.Errorf("the client was asked %v, want one request", asked)
				}
			})
		}
	}
	t.Run("without the capability", func(t *testing.T) {
		c := httpClient(t, url, tokens["tester"])
		c.initializeWith("no-caps", nil)
		m := c.request("tools/call", map[string]any{"name": "fresh__ask", "arguments": map[string]any{"text": "sampling"}})
		if m.Error == nil || !strings.Contains(m.Error.Message, "cannot give (sampling/createMessage") {
			t.Errorf("a client that cannot sample: %s %+v", m.Result, m.Error)
		}
	})
}

// TestModernClientModernChild: a modern child's InputRequiredResult reaches a
// modern client with its state sealed inside Nexus's; the retry brings the child
// its own state back, and a tampered state, another agent's retry or a request
// for what the client did not declare never reach the child.
func TestModernClientModernChild(t *testing.T) {
	_, url := modernChildFixture(t)
	for _, tc := range askCases {
		t.Run(tc.what, func(t *testing.T) {
			call := map[string]any{"name": "fresh__ask", "arguments": map[string]any{"text": tc.what}}
			send := func(agent string, params map[string]any) (int, wireMsg) {
				status, msgs := modernHTTP(t, url, tokens[agent], 3, "tools/call", params, nil)
				return status, last(t, msgs)
			}
			_, first := send("tester", withMeta(call, modernMeta(tc.caps)))
			var ir struct {
				ResultType    string                     `json:"resultType"`
				InputRequests map[string]json.RawMessage `json:"inputRequests"`
				RequestState  string                     `json:"requestState"`
			}
			if err := json.Unmarshal(first.Result, &ir); err != nil || ir.ResultType != "input_required" || ir.InputRequests["q"] == nil {
				t.Fatalf("want the child's InputRequiredResult, got %s %+v", first.Result, first.Error)
			}
			if ir.RequestState == "state-of-"+tc.what || strings.Contains(ir.RequestState, "state-of") {
				t.Fatalf("the child's own state reached the client: %q", ir.RequestState)
			}
			retry := func(state string, answers map[string]any) map[string]any {
				p := withMeta(call, modernMeta(tc.caps))
				p["requestState"], p["inputResponses"] = state, answers
				return p
			}
			if _, m := send("tester", retry(ir.RequestState, map[string]any{})); !strings.Contains(string(m.Result), "input_required") {
				t.Errorf("a retry without the answer: %s %+v", m.Result, m.Error)
			}
			tampered := []byte(ir.RequestState)
			tampered[4] ^= 1
			if status, m := send("tester", retry(string(tampered), map[string]any{"q": tc.answer})); status != http.StatusBadRequest || m.Error == nil {
				t.Errorf("a tampered state: %d %s %+v", status, m.Result, m.Error)
			}
			if _, m := send("other", retry(ir.RequestState, map[string]any{"q": tc.answer})); m.Error == nil || !strings.Contains(m.Error.Message, "another agent") {
				t.Errorf("another agent's retry: %s %+v", m.Result, m.Error)
			}
			_, done := send("tester", retry(ir.RequestState, map[string]any{"q": tc.answer}))
			if done.Error != nil || !strings.Contains(string(done.Result), tc.says) {
				t.Fatalf("the retry with the answer (the child checks its own state came back): %s %+v", done.Result, done.Error)
			}
		})
	}
	t.Run("what the client did not declare", func(t *testing.T) {
		status, msgs := modernHTTP(t, url, tokens["tester"], 4, "tools/call", withMeta(map[string]any{"name": "fresh__ask", "arguments": map[string]any{"text": "elicitation"}}, modernMeta(map[string]any{"sampling": map[string]any{}})), nil)
		m := last(t, msgs)
		if status != http.StatusBadRequest || m.Error == nil || m.Error.Code != codeMissingCapability || !strings.Contains(fmt.Sprint(m.Error.Data), "elicitation") {
			t.Errorf("want 400 -32021 naming elicitation, got %d %s %+v", status, m.Result, m.Error)
		}
	})
}

// TestModernHTTPChildParamHeaders: a modern HTTP child checks that a call mirrors
// the arguments its tool's schema names (x-mcp-header) into Mcp-Param headers, as
// mcp-go's server does; Nexus, its client, mirrors them, for clients of either era.
func TestModernHTTPChildParamHeaders(t *testing.T) {
	c := newTestChild("far")
	h := server.NewStreamableHTTPServer(c.srv) // dual-era: pinned, Nexus speaks it 2026-07-28
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	g, url := agentsGateway(t, fmt.Sprintf(`{"far": {"transport": "streamable-http", "url": %q, "protocolVersion": "2026-07-28"}}`, ts.URL+"/mcp"))
	if st := g.Servers(); !strings.Contains(st[0].Protocol, "stateless") {
		t.Fatalf("the child is not spoken 2026-07-28: %+v", st[0])
	}
	args := map[string]any{"region": "us-west1", "opts": map[string]any{"limit": 3}}
	legacy := httpClient(t, url, tokens["tester"])
	legacy.initialize("legacy")
	if m := legacy.request("tools/call", map[string]any{"name": "far__region", "arguments": args}); m.Error != nil || !strings.Contains(string(m.Result), `region call {\"opts\":{\"limit\":3},\"region\":\"us-west1\"}`) {
		t.Errorf("a legacy client's call: %s %+v", m.Result, m.Error)
	}
	_, msgs := modernHTTP(t, url, tokens["tester"], 2, "tools/call", withMeta(map[string]any{"name": "far__region", "arguments": args}, modernMeta(nil)),
		map[string]string{"Mcp-Param-Region": "us-west1", "Mcp-Param-Limit": "3"})
	if m := last(t, msgs); m.Error != nil || !strings.Contains(string(m.Result), "region call") {
		t.Errorf("a modern client's call: %s %+v", m.Result, m.Error)
	}
}

// TestInputRequestsOnlyForInput: a child's InputRequiredResult may ask its client
// for a sampling, an elicitation or the roots, nothing else; one that asks the
// client to run anything else reaches no client, of either era.
func TestInputRequestsOnlyForInput(t *testing.T) {
	_, url := agentsGateway(t, testChildServer("raw", "raw-tasks", ""))
	caps := map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{}, "roots": map[string]any{}}
	_, msgs := modernHTTP(t, url, tokens["tester"], 1, "tools/call", withMeta(map[string]any{"name": "raw__overreach"}, modernMeta(caps)), nil)
	if m := last(t, msgs); m.Error == nil || !strings.Contains(m.Error.Message, "not an input request") || strings.Contains(string(m.Result), "delete_everything") {
		t.Errorf("a modern client: %s %+v", m.Result, m.Error)
	}
	legacy := httpClient(t, url, tokens["tester"])
	var asked []string
	legacy.answer = func(method string, _ json.RawMessage) (any, *RPCError) {
		asked = append(asked, method)
		return map[string]any{}, nil
	}
	legacy.initializeWith("legacy", caps)
	if m := legacy.request("tools/call", map[string]any{"name": "raw__overreach"}); m.Error == nil || len(asked) != 0 {
		t.Errorf("a legacy client: %s %+v (asked %v)", m.Result, m.Error, asked)
	}
}

// TestListenEndsWithItsToken: a reload that revokes the token a listen stream was
// opened with ends the stream at once: it must not go on carrying what the agent
// may see.
func TestListenEndsWithItsToken(t *testing.T) {
	f := newFixture(t)
	events := listenEvents(t, context.Background(), f.url, tokens["tester"], 1, map[string]any{"toolsListChanged": true})
	select {
	case m := <-events:
		if m.Method != "notifications/subscriptions/acknowledged" {
			t.Fatalf("first message: %s", m.Method)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no acknowledgement")
	}
	cfg, err := config.Parse("test.json", []byte(strings.Replace(f.cfg, fmt.Sprintf("%q", TokenHash(tokens["tester"])), `"`+strings.Repeat("0", 64)+`"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.g.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case _, open := <-events:
			if !open {
				return // the stream ended
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the listen stream outlived its revoked token")
		}
	}
}

// TestModernBatchRefused: 2026-07-28 has no batches; one sent in that version is
// refused with the reason, not taken for a legacy session's.
func TestModernBatchRefused(t *testing.T) {
	f := newFixture(t)
	req, _ := http.NewRequest(http.MethodPost, f.url, strings.NewReader(`[{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}]`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Authorization", "Bearer "+tokens["tester"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "batch is not part of protocol version") {
		t.Errorf("status %d: %s", resp.StatusCode, b)
	}
}

// TestModernClientServerRefused: a server whose clients each get a session of their
// own ("sessions": "client") cannot give one to a 2026-07-28 request, which has no
// session: the call is refused with the setting to change, and no upstream is opened.
func TestModernClientServerRefused(t *testing.T) {
	g, url := agentsGateway(t, fmt.Sprintf(`{"mine": {"command": %q, "args": ["-test.run=^$"], "env": {"NEXUS_TEST_CHILD": "mine"}, "sessions": "client"}}`, os.Args[0]))
	_, msgs := modernHTTP(t, url, tokens["tester"], 1, "tools/call", withMeta(map[string]any{"name": "mine__echo", "arguments": map[string]any{"text": "x"}}, modernMeta(nil)), nil)
	m := last(t, msgs)
	if !strings.Contains(string(m.Result), `servers.mine.sessions`) || !strings.Contains(string(m.Result), `"isError":true`) {
		t.Errorf("want a tool error naming servers.mine.sessions, got %s %+v", m.Result, m.Error)
	}
	if st := g.Servers(); st[0].UpstreamSessions != 0 {
		t.Errorf("%d upstream sessions were opened for a modern request", st[0].UpstreamSessions)
	}
}

// TestPromptInputBothEras: a modern child's prompt that asks for input (an
// elicitation) is bridged for a legacy client (asked as a request of its own) and
// passed to a modern one (an InputRequiredResult whose sealed state its retry
// brings back), as a tool's is.
func TestPromptInputBothEras(t *testing.T) {
	_, url := modernChildFixture(t)
	elicit := map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}
	answer := map[string]any{"action": "accept", "content": map[string]any{"name": "ann"}}
	legacy := httpClient(t, url, tokens["tester"])
	legacy.answer = func(method string, _ json.RawMessage) (any, *RPCError) {
		if method != "elicitation/create" {
			return nil, &RPCError{Code: jsonrpc.CodeMethodNotFound, Message: method}
		}
		return answer, nil
	}
	legacy.initializeWith("legacy", elicit)
	if m := legacy.request("prompts/get", map[string]any{"name": "fresh__named"}); m.Error != nil || !strings.Contains(string(m.Result), "fresh greets map[name:ann]") {
		t.Errorf("a legacy client: %s %+v", m.Result, m.Error)
	}
	_, msgs := modernHTTP(t, url, tokens["tester"], 1, "prompts/get", withMeta(map[string]any{"name": "fresh__named"}, modernMeta(elicit)), nil)
	var ir struct {
		ResultType   string `json:"resultType"`
		RequestState string `json:"requestState"`
	}
	if m := last(t, msgs); json.Unmarshal(m.Result, &ir) != nil || ir.ResultType != "input_required" || ir.RequestState == "" || ir.RequestState == "prompt-state" {
		t.Fatalf("a modern client's first request: %s %+v", m.Result, m.Error)
	}
	retry := withMeta(map[string]any{"name": "fresh__named", "requestState": ir.RequestState, "inputResponses": map[string]any{"who": answer}}, modernMeta(elicit))
	_, msgs = modernHTTP(t, url, tokens["tester"], 2, "prompts/get", retry, nil)
	if m := last(t, msgs); m.Error != nil || !strings.Contains(string(m.Result), "fresh greets map[name:ann]") {
		t.Errorf("a modern client's retry: %s %+v", m.Result, m.Error)
	}
}

// listenEvents opens a subscriptions/listen stream of agent token's over HTTP with
// the notification filter given, and returns its messages as they come; the channel
// closes when the stream ends.
func listenEvents(t *testing.T, ctx context.Context, url, token string, id any, filter map[string]any) <-chan wireMsg {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
		"params": withMeta(map[string]any{"notifications": filter}, modernMeta(nil))})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen", "Authorization": "Bearer " + token} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan wireMsg, 16)
	go func() {
		defer close(events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m wireMsg
				_ = json.Unmarshal([]byte(data), &m)
				events <- m
			}
		}
	}()
	return events
}

// TestNotificationsComeBeforeTheAnswer: a log message a child writes before its
// answer reaches the client before the answer does, as it would directly: on a
// plain call, and on one answered after an input round (the child's question
// put to a legacy client). The raw child writes both in that order on one
// stream; the race this guards against is lost now and then, not every time,
// so each case makes a few calls.
func TestNotificationsComeBeforeTheAnswer(t *testing.T) {
	t.Parallel()
	g, _ := agentsGateway(t, testChildServer("raw", "raw", ""))
	for _, tool := range []string{"raw__note", "raw__ask"} {
		t.Run(tool, func(t *testing.T) {
			c := stdioClient(t, g, "tester")
			asked := 0
			c.answer = func(string, json.RawMessage) (any, *RPCError) {
				asked++
				return askCases[0].answer, nil
			}
			c.initializeWith("order", askCases[0].caps)
			if m := c.request("logging/setLevel", map[string]any{"level": "debug"}); m.Error != nil {
				t.Fatal(m.Error)
			}
			for i := range 10 {
				m := c.request("tools/call", map[string]any{"name": tool, "arguments": map[string]any{}})
				if m.Error != nil || !strings.Contains(string(m.Result), "noted") {
					t.Fatalf("the call: %s %+v", m.Result, m.Error)
				}
				got := c.received()
				before := got[:strings.Index(got, `"id":`+string(m.ID)+`,"result"`)]
				if n := strings.Count(before, "raw note"); n != i+1 {
					t.Fatalf("call %d: %d log messages came before its answer, want %d:\n%s", i, n, i+1, got)
				}
			}
			if want := map[string]int{"raw__note": 0, "raw__ask": 10}[tool]; asked != want {
				t.Errorf("the client was asked %d times, want %d", asked, want)
			}
		})
	}
}
