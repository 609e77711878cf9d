package aggregation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/memory/sqlite"
	"github.com/nexus-mcp/nexus/policy"
)

// fixture is a gateway with two children: "good", a stdio child (this test binary
// re-run), and "evil", a streamable HTTP child served in-process so the test can count
// what reaches it. Agent "tester" is denied evil.*; agent "other" may use everything.
type fixture struct {
	t    *testing.T
	g    *Gateway
	evil *testChild
	url  string // the HTTP front
	cfg  string // the config's text, for reload tests to edit
	logs *logBuffer
}

// logBuffer keeps what the gateway logs, for tests of what it logs.
type logBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{} // told of each write
}

func newLogBuffer() *logBuffer { return &logBuffer{wrote: make(chan struct{}, 1)} }

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case l.wrote <- struct{}{}:
	default:
	}
	return l.b.Write(p)
}

// lines returns the logged lines that contain s.
func (l *logBuffer) lines(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

var tokens = map[string]string{"tester": "tok-tester", "other": "tok-other"}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureLimits(t, "{}")
}

// newFixtureLimits is newFixture with the config's limits section.
func newFixtureLimits(t *testing.T, limits string) *fixture {
	t.Helper()
	return newFixtureMemory(t, limits, nil)
}

// openMemory is memory in a SQLite file of the test's, closed when it ends.
func openMemory(t *testing.T) *memory.Memory {
	t.Helper()
	mem, err := memory.Open(context.Background(), memory.Options{Backend: sqlite.File(filepath.Join(t.TempDir(), "memory.db"))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	return mem
}

// newFixtureMemory is newFixtureLimits with memory (nil: off).
func newFixtureMemory(t *testing.T, limits string, mem *memory.Memory) *fixture {
	t.Helper()
	evil := newTestChild("evil")
	cfgJSON := fmt.Sprintf(`{
		"limits": %s,
		"ttl": {"*": "1h"},
		"servers": {
			"good": {"command": %q, "args": ["-test.run=^$"], "env": {"NEXUS_TEST_CHILD": "good"}},
			"evil": {"transport": "streamable-http", "url": %q}
		},
		"agents": {"tester": {"tokenSha256": %q}, "other": {"tokenSha256": %q}},
		"policy": {"agents": {
			"tester": {"allow": ["*"], "deny": ["evil.*"]},
			"other": {"allow": ["*"]}
		}}
	}`, limits, os.Args[0], evil.serveHTTP(t), TokenHash(tokens["tester"]), TokenHash(tokens["other"]))
	cfg, err := config.Parse("test.json", []byte(cfgJSON))
	if err != nil {
		t.Fatal(err)
	}
	redact := func(b []byte) []byte { return bytes.ReplaceAll(b, []byte(canary), []byte("[redacted:canary]")) }
	logs := newLogBuffer()
	g, err := New(cfg, Options{Redact: redact, Logger: slog.New(slog.NewTextHandler(logs, nil)), Memory: mem})
	if err != nil {
		t.Fatal(err)
	}
	srv := serveHTTP(t, g)
	for _, s := range g.Servers() {
		if s.State != "ready" {
			t.Fatalf("server %s: %s %s", s.Name, s.State, s.Error)
		}
	}
	return &fixture{t: t, g: g, evil: evil, url: srv.URL + "/mcp", cfg: cfgJSON, logs: logs}
}

// client opens an initialized session of agent on front.
func (f *fixture) client(front, agent string) *testClient {
	f.t.Helper()
	var c *testClient
	if front == frontStdio {
		c = stdioClient(f.t, f.g, agent)
	} else {
		c = httpClient(f.t, f.url, tokens[agent])
	}
	c.initialize("test-" + agent)
	return c
}

var fronts = []string{frontStdio, frontHTTP}

// TestPolicyOnEveryMethod: every method that reaches a child is decided by policy;
// a denied item is absent from lists and refused, and the child never sees the request.
func TestPolicyOnEveryMethod(t *testing.T) {
	t.Parallel()
	for _, front := range fronts {
		t.Run(front, func(t *testing.T) {
			f := newFixture(t)
			tester := f.client(front, "tester")
			before := map[string]int{}
			for _, m := range []string{"tools/call", "prompts/get", "resources/read", "resources/subscribe", "completion/complete"} {
				before[m] = f.evil.count(m)
			}
			lists := []struct{ method, field, key, good, evil string }{
				{"tools/list", "tools", "name", "good__echo", "evil__echo"},
				{"prompts/list", "prompts", "name", "good__greet", "evil__greet"},
				{"resources/list", "resources", "uri", "mem://good/doc", "mem://evil/doc"},
				{"resources/templates/list", "resourceTemplates", "uriTemplate", "mem://good/item/{id}", "mem://evil/item/{id}"},
			}
			for _, l := range lists {
				got := names(t, tester.request(l.method, nil), l.field, l.key)
				if !slices.Contains(got, l.good) || slices.Contains(got, l.evil) {
					t.Errorf("%s for tester: %v; want %s and not %s", l.method, got, l.good, l.evil)
				}
			}
			requests := []struct {
				method  string
				allowed map[string]any
				denied  map[string]any
			}{
				{"tools/call", map[string]any{"name": "good__echo", "arguments": map[string]any{"text": "hi"}}, map[string]any{"name": "evil__echo", "arguments": map[string]any{"text": "hi"}}},
				{"prompts/get", map[string]any{"name": "good__greet", "arguments": map[string]any{"who": "x"}}, map[string]any{"name": "evil__greet", "arguments": map[string]any{"who": "x"}}},
				{"resources/read", map[string]any{"uri": "mem://good/doc"}, map[string]any{"uri": "mem://evil/doc"}},
				{"resources/read", map[string]any{"uri": "mem://good/item/7"}, map[string]any{"uri": "mem://evil/item/7"}},
				{"resources/subscribe", map[string]any{"uri": "mem://good/doc"}, map[string]any{"uri": "mem://evil/doc"}},
				{"completion/complete", map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "good__greet"}, "argument": map[string]any{"name": "who", "value": "a"}},
					map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "evil__greet"}, "argument": map[string]any{"name": "who", "value": "a"}}},
				{"completion/complete", map[string]any{"ref": map[string]any{"type": "ref/resource", "uri": "mem://good/item/{id}"}, "argument": map[string]any{"name": "id", "value": "1"}},
					map[string]any{"ref": map[string]any{"type": "ref/resource", "uri": "mem://evil/item/{id}"}, "argument": map[string]any{"name": "id", "value": "1"}}},
			}
			for _, r := range requests {
				if m := tester.request(r.method, r.allowed); m.Error != nil || bytes.Contains(m.Result, []byte(`"isError":true`)) {
					t.Errorf("%s %v allowed for tester, got %s %v", r.method, r.allowed, m.Result, m.Error)
				}
				m := tester.request(r.method, r.denied)
				refused := m.Error != nil && strings.Contains(m.Error.Message, `agent "tester" may not`) ||
					bytes.Contains(m.Result, []byte(`"isError":true`)) && bytes.Contains(m.Result, []byte(`may not call`))
				if !refused {
					t.Errorf("%s %v for tester: %s %v; want a refusal naming the agent", r.method, r.denied, m.Result, m.Error)
				}
			}
			for m, n := range before {
				if got := f.evil.count(m); got != n {
					t.Errorf("%d %s request(s) reached the denied server", got-n, m)
				}
			}
			// The same requests from an agent allowed everything do reach evil.
			other := f.client(front, "other")
			if m := other.request("prompts/get", map[string]any{"name": "evil__greet", "arguments": map[string]any{"who": "x"}}); m.Error != nil {
				t.Errorf("other agent refused: %v", m.Error)
			}
			if f.evil.count("prompts/get") != before["prompts/get"]+1 {
				t.Errorf("the allowed prompts/get did not reach evil")
			}
		})
	}
}

// TestBeforeInitialize: a session that has not initialized gets an error for every
// request but ping; nothing reaches a child.
func TestBeforeInitialize(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := stdioClient(t, f.g, "other")
	before := f.evil.count("tools/call")
	m := c.request("tools/call", map[string]any{"name": "evil__echo", "arguments": map[string]any{}})
	if m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidRequest || !strings.Contains(m.Error.Message, "initialize") {
		t.Errorf("tools/call before initialize: %s %v", m.Result, m.Error)
	}
	if m := c.request("ping", nil); m.Error != nil {
		t.Errorf("ping before initialize: %v", m.Error)
	}
	if f.evil.count("tools/call") != before {
		t.Error("a call before initialize reached the child")
	}
	// Over HTTP, a request without a session is refused the same way.
	resp, err := http.Post(f.url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("HTTP without a token: %d", resp.StatusCode)
	}
}

// TestCanaryNeverReachesAClient: the secret a child puts in a tool description, a log
// wireMsg and a progress wireMsg is redacted in everything a client receives.
func TestCanaryNeverReachesAClient(t *testing.T) {
	t.Parallel()
	for _, front := range fronts {
		t.Run(front, func(t *testing.T) {
			f := newFixture(t)
			c := f.client(front, "other")
			c.request("tools/list", nil)
			c.request("tools/call", map[string]any{"name": "evil__log", "arguments": map[string]any{}})
			m := c.request("tools/call", map[string]any{"name": "evil__progress", "arguments": map[string]any{}, "_meta": map[string]any{"progressToken": "p1"}})
			if m.Error != nil {
				t.Fatal(m.Error)
			}
			if !c.waitNote("notifications/message", nil) || !c.waitNote("notifications/progress", nil) {
				t.Fatalf("log or progress never arrived; got %s", c.received())
			}
			got := c.received()
			if strings.Contains(got, canary) {
				t.Errorf("the canary reached the client:\n%s", got)
			}
			if !strings.Contains(got, "[redacted:canary]") {
				t.Errorf("expected redaction markers in what the client got:\n%s", got)
			}
		})
	}
}

// TestProgressGoesOnlyToItsCaller: a child cannot send progress into another call,
// not even with a token it saw (one given to another child) or guessed.
func TestProgressGoesOnlyToItsCaller(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	release := make(chan struct{})
	f.evil.mu.Lock()
	f.evil.release = release
	f.evil.mu.Unlock()
	caller := f.client(frontHTTP, "other")
	bystander := f.client(frontStdio, "other")
	done := make(chan wireMsg, 1)
	go func() {
		done <- caller.request("tools/call", map[string]any{"name": "evil__wait", "arguments": map[string]any{}, "_meta": map[string]any{"progressToken": "mine"}})
	}()
	var token string
	deadline := time.Now().Add(5 * time.Second)
	for token == "" && time.Now().Before(deadline) {
		f.evil.mu.Lock()
		if len(f.evil.tokens) > 0 {
			token = fmt.Sprint(f.evil.tokens[0])
		}
		f.evil.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	if token == "" || strings.Contains(token, "mine") {
		t.Fatalf("the child was given token %q, want a gateway token", token)
	}
	// good (another child) tries the real token and guessable ones, on behalf of the
	// bystander's call.
	forged := []string{token, "nexus-progress-1", "nexus-progress-2", "mine"}
	m := bystander.request("tools/call", map[string]any{"name": "good__forge", "arguments": map[string]any{"tokens": forged}, "_meta": map[string]any{"progressToken": "b"}})
	if m.Error != nil {
		t.Fatal(m.Error)
	}
	close(release)
	<-done
	// The sentinel: a log good sends after the forged progress, through the same
	// queue of the child and the same pump of the gateway, which both clients may
	// see. A forged progress routed to either would have reached it first.
	if m := bystander.request("tools/call", map[string]any{"name": "good__log", "arguments": map[string]any{"text": "sentinel"}}); m.Error != nil {
		t.Fatal(m.Error)
	}
	for _, c := range []*testClient{caller, bystander} {
		if !c.waitNote("notifications/message", mentioning("sentinel")) {
			t.Fatalf("the sentinel log never arrived; got %s", c.received())
		}
	}
	for _, c := range []*testClient{caller, bystander} {
		if got := c.received(); strings.Contains(got, "forged by") {
			t.Errorf("forged progress reached a client:\n%s", got)
		}
	}
}

// TestChildNotificationsKeepTheirBytes: a stdio child's notification reaches
// the client with its values as the child wrote them, numbers included: an id
// past 2^53, 1.0, a number no float64 holds, and an object's key order.
func TestChildNotificationsKeepTheirBytes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client(frontStdio, "tester")
	data := `{"z":1,"id":12345678901234567891,"ratio":1.0,"big":1e400}`
	if m := c.request("tools/call", map[string]any{"name": "good__log", "arguments": map[string]any{"text": "json:" + data}}); m.Error != nil {
		t.Fatal(m.Error)
	}
	if !c.waitNote("notifications/message", mentioning("ratio")) {
		t.Fatalf("the log never arrived; got %s", c.received())
	}
	got := string(c.notesOf("notifications/message")[0].Params)
	if !strings.Contains(got, data) {
		t.Errorf("the log's data reached the client as\n%s\nwant it to hold %s", got, data)
	}
}

// TestNotificationsReachOnlyTheirSessions: logs go to the sessions that may see the
// server, resource updates to subscribers, list_changed to the sessions whose lists
// changed.
func TestNotificationsReachOnlyTheirSessions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tester := f.client(frontStdio, "tester")
	other := f.client(frontHTTP, "other")
	quiet := f.client(frontHTTP, "other")

	if m := other.request("resources/subscribe", map[string]any{"uri": "mem://evil/doc"}); m.Error != nil {
		t.Fatal(m.Error)
	}
	other.request("tools/call", map[string]any{"name": "evil__log", "arguments": map[string]any{}})
	other.request("tools/call", map[string]any{"name": "evil__touch", "arguments": map[string]any{}})
	if !other.waitNote("notifications/message", nil) {
		t.Error("the log of evil did not reach a session allowed to see evil")
	}
	if !other.waitNote("notifications/resources/updated", nil) {
		t.Error("the update did not reach the subscriber")
	}
	if !quiet.waitNote("notifications/message", nil) {
		t.Error("the log of evil did not reach another allowed session")
	}
	// The sentinels. The log and the update above were seen, so evil's
	// notification pump has them; the log evil sends next is pumped after them,
	// so once quiet has it, whatever the first two were routed to quiet went
	// before it on its stream, and was written to tester's pipe, which tester's
	// ping answer then follows.
	other.request("tools/call", map[string]any{"name": "evil__log", "arguments": map[string]any{"text": "sentinel"}})
	if !quiet.waitNote("notifications/message", mentioning("sentinel")) {
		t.Fatalf("the sentinel log never reached quiet; got %s", quiet.received())
	}
	if m := tester.request("ping", nil); m.Error != nil {
		t.Fatal(m.Error)
	}
	if n := tester.notesOf("notifications/message"); len(n) > 0 {
		t.Errorf("evil's log reached tester, who is denied evil: %s", n[0].Params)
	}
	if n := quiet.notesOf("notifications/resources/updated"); len(n) > 0 {
		t.Errorf("an update reached a session that did not subscribe: %s", n[0].Params)
	}

	// A policy change that affects only tester tells only tester (both listed their
	// tools: a client that never listed has nothing to be told about).
	tester.request("tools/list", nil)
	other.request("tools/list", nil)
	cfg := *f.g.cfg.Load()
	cfg.Policy.Agents = map[string]policy.Rules{
		"tester": {Allow: []string{"*"}, Deny: []string{"evil.*", "good.echo"}},
		"other":  {Allow: []string{"*"}},
	}
	if err := f.g.Reload(&cfg); err != nil {
		t.Fatal(err)
	}
	if !tester.waitNote("notifications/tools/list_changed", nil) {
		t.Error("tester's tools changed but it was not told")
	}
	// The sentinels. A wrong list_changed could come from the rebuild the reload
	// scheduled (rebuildDelay later): the rebuild loop takes one signal at a time
	// and rebuilds after each, so once it has taken two more, that rebuild is
	// over. A log evil sends next reaches other on its stream after anything
	// that rebuild sent it (other is not the caller: the log comes unasked).
	f.g.lists.due <- struct{}{}
	f.g.lists.due <- struct{}{}
	quiet.request("tools/call", map[string]any{"name": "evil__log", "arguments": map[string]any{"text": "after the rebuild"}})
	if !other.waitNote("notifications/message", mentioning("after the rebuild")) {
		t.Fatalf("the sentinel log never reached other; got %s", other.received())
	}
	if n := other.notesOf("notifications/tools/list_changed"); len(n) > 0 {
		t.Error("other was told of a change to tester's tools")
	}
}

// TestSamplingReachesTheCaller: a child's sampling request during a call reaches the
// client that made the call, on both fronts and from both kinds of child.
func TestSamplingReachesTheCaller(t *testing.T) {
	t.Parallel()
	for _, front := range fronts {
		for _, server := range []string{"good", "evil"} {
			t.Run(front+"/"+server, func(t *testing.T) {
				f := newFixture(t)
				c := f.client(front, "other")
				c.answer = func(method string, params json.RawMessage) (any, *RPCError) {
					if method != "sampling/createMessage" {
						return nil, &RPCError{Code: jsonrpc.CodeMethodNotFound, Message: method}
					}
					return map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "hello from the client"}, "model": "test"}, nil
				}
				m := c.request("tools/call", map[string]any{"name": server + "__sample", "arguments": map[string]any{}})
				if m.Error != nil || !bytes.Contains(m.Result, []byte("hello from the client")) {
					t.Errorf("sampling through %s: %s %v", front, m.Result, m.Error)
				}
			})
		}
	}
}

// TestOverSizeAndUnknownNames: an over-size request is answered with its id; a huge
// unknown name is answered at once with a bounded echo.
func TestOverSizeAndUnknownNames(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, front := range fronts {
		c := f.client(front, "other")
		huge := strings.Repeat("n", 3<<20)
		start := time.Now()
		m := c.requestWithin("tools/call", map[string]any{"name": huge, "arguments": map[string]any{}}, 30*time.Second)
		if m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidParams && m.Error.Code != jsonrpc.CodeInvalidRequest {
			t.Errorf("%s: huge unknown name: %v", front, m.Error)
		}
		if m.Error != nil && len(m.Error.Message) > 400 {
			t.Errorf("%s: the error echoes %d bytes", front, len(m.Error.Message))
		}
		// Not a speed test: the bound is far above what a loaded machine
		// takes (7 s seen under the race detector on 2 busy cores; 0.7 s on
		// an idle one) and far below what a walk quadratic in the name's 3 MiB
		// would (hours).
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("%s: a huge unknown name took %s", front, d)
		}
		m = c.requestWithin("tools/call", map[string]any{"name": "good__echo", "arguments": map[string]any{"text": strings.Repeat("x", 5<<20)}}, 30*time.Second)
		if m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidRequest || !strings.Contains(m.Error.Message, "larger than") {
			t.Errorf("%s: over-size request: %s %v", front, m.Result, m.Error)
		}
	}
}

// TestHTTPRefusals: what the HTTP front refuses before any MCP handling.
func TestHTTPRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := httpClient(t, f.url, tokens["tester"])
	c.initialize("owner")
	tests := []struct {
		name    string
		header  map[string]string
		status  int
		closeIt bool
	}{
		{"no token", map[string]string{}, http.StatusUnauthorized, true},
		{"wrong token", map[string]string{"Authorization": "Bearer nope"}, http.StatusUnauthorized, true},
		{"rebound host", map[string]string{"Authorization": "Bearer tok-other", "Host": "evil.example.com"}, http.StatusForbidden, false},
		{"foreign origin", map[string]string{"Authorization": "Bearer tok-other", "Origin": "http://evil.example.com"}, http.StatusForbidden, false},
		{"unknown protocol version", map[string]string{"Authorization": "Bearer tok-other", "Mcp-Protocol-Version": "1999-01-01"}, http.StatusBadRequest, false},
		{"another agent's session", map[string]string{"Authorization": "Bearer tok-other", "Mcp-Session-Id": "SESSION"}, http.StatusForbidden, false},
		{"unknown session", map[string]string{"Authorization": "Bearer tok-other", "Mcp-Session-Id": "0123"}, http.StatusNotFound, false},
	}
	var session string
	for _, s := range f.g.sessions.snapshot() {
		if s.front == frontHTTP {
			session = s.id
		}
	}
	for _, tc := range tests {
		req, _ := http.NewRequest(http.MethodPost, f.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range tc.header {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, strings.ReplaceAll(v, "SESSION", session))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.status)
		}
		if tc.closeIt && !resp.Close {
			t.Errorf("%s: the connection of an unauthenticated client stays open", tc.name)
		}
	}
}

// TestBatches: a batch takes the same path as single messages, on both fronts.
func TestBatches(t *testing.T) {
	t.Parallel()
	for _, front := range fronts {
		t.Run(front, func(t *testing.T) {
			f := newFixture(t)
			c := f.client(front, "tester")
			before := f.evil.count("tools/call")
			waits := map[string]chan wireMsg{`"b1"`: make(chan wireMsg, 1), `"b2"`: make(chan wireMsg, 1)}
			c.mu.Lock()
			maps.Copy(c.waiting, waits)
			c.mu.Unlock()
			c.post([]byte(`[{"jsonrpc":"2.0","id":"b1","method":"tools/call","params":{"name":"good__echo","arguments":{"text":"one"}}},` +
				`{"jsonrpc":"2.0","id":"b2","method":"tools/call","params":{"name":"evil__echo","arguments":{"text":"two"}}},` +
				`{"jsonrpc":"2.0","method":"notifications/initialized"}]`))
			var out []wireMsg
			for _, id := range []string{`"b1"`, `"b2"`} {
				select {
				case m := <-waits[id]:
					out = append(out, m)
				case <-time.After(5 * time.Second):
				}
			}
			if len(out) != 2 {
				t.Fatalf("batch answers: %v", out)
			}
			if !bytes.Contains(out[0].Result, []byte("good:one")) {
				t.Errorf("b1: %s", out[0].Result)
			}
			if !bytes.Contains(out[1].Result, []byte(`may not call`)) {
				t.Errorf("b2 (denied) in a batch: %s", out[1].Result)
			}
			if f.evil.count("tools/call") != before {
				t.Error("a denied call in a batch reached the child")
			}
		})
	}
}

// TestExplainCoversPromptsAndResources: what `nexus policy show|explain` prints
// decides prompts and resources by the same rules the session layer enforces.
func TestExplainCoversPromptsAndResources(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	got := map[string]bool{}
	for _, it := range f.g.Explain("tester") {
		got[it.Kind+" "+it.Name] = it.Allowed
	}
	for item, allowed := range map[string]bool{
		"tool good.echo": true, "tool evil.echo": false,
		"prompt good.greet": true, "prompt evil.greet": false,
		"resources good": true, "resources evil": false,
	} {
		if a, ok := got[item]; !ok || a != allowed {
			t.Errorf("Explain(tester) %s: allowed %v (listed %v), want %v", item, a, ok, allowed)
		}
	}
	for name, want := range map[string]string{
		"evil__greet": "prompt evil.greet", "good.greet": "prompt good.greet",
		"mem://evil/item/3": "resources evil", "evil.echo": "tool evil.echo",
	} {
		it, err := f.g.ExplainName(context.Background(), "tester", name)
		if err != nil || it.Kind+" "+it.Name != want {
			t.Errorf("ExplainName(%q) = %s %s, %v; want %s", name, it.Kind, it.Name, err, want)
		}
	}
	if it, _ := f.g.ExplainName(context.Background(), "tester", "mem://evil/doc"); it.Allowed || !strings.Contains(it.Hint(), "revoke --agent tester 'evil.*'") {
		t.Errorf("a denied resource's hint: %q", it.Hint())
	}
}

// mentioning matches a message whose params hold s.
func mentioning(s string) func(wireMsg) bool {
	return func(m wireMsg) bool { return strings.Contains(string(m.Params), s) }
}

// serveHTTP starts g, waits for its children, and serves its HTTP front until
// the test ends.
func serveHTTP(t *testing.T, g *Gateway) *httptest.Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.HTTPHandler(HTTPOptions{}))
	t.Cleanup(func() { srv.Close(); cancel(); g.Close() })
	return srv
}
