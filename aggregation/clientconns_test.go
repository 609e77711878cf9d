package aggregation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/memory"
)

// sessionsFixture is a gateway with a "client" server (solo: a stdio child, one
// process per client session, at most two), a shared stdio server (good), a
// shared SSE server (sse) and a "client" streamable-HTTP server (web), served over
// HTTP on 127.0.0.1.
type sessionsFixture struct {
	t   *testing.T
	g   *Gateway
	url string
}

func newSessionsFixture(t *testing.T, mem *memory.Memory) *sessionsFixture {
	t.Helper()
	return newSessionsFixturePolicy(t, mem, `{"default": {"allow": ["*"]}}`)
}

// newSessionsFixturePolicy is newSessionsFixture with the config's policy section.
func newSessionsFixturePolicy(t *testing.T, mem *memory.Memory, policy string) *sessionsFixture {
	t.Helper()
	sse := newTestChild("sse")
	webURL := newTestChild("web").serveHTTP(t)
	ts := httptest.NewUnstartedServer(nil)
	ts.Config.Handler = server.NewSSEServer(sse.srv, server.WithBaseURL("http://"+ts.Listener.Addr().String()))
	ts.Start()
	t.Cleanup(ts.Close)
	child := func(name string) string {
		return fmt.Sprintf(`{"command": %q, "args": ["-test.run=^$"], "env": {"NEXUS_TEST_CHILD": %q}, "timeout": "20s"`, os.Args[0], name)
	}
	cfgJSON := fmt.Sprintf(`{
		"servers": {
			"solo": %s, "sessions": "client", "maxSessions": 2, "maxSessionsPerAgent": 2},
			"good": %s},
			"sse": {"transport": "sse", "url": %q, "timeout": "20s"},
			"web": {"transport": "streamable-http", "url": %q, "timeout": "20s", "sessions": "client"}
		},
		"ttl": {"*": "1h"},
		"agents": {"tester": {"tokenSha256": %q}, "other": {"tokenSha256": %q}},
		"policy": %s
	}`, child("solo"), child("good"), ts.URL+"/sse", webURL, TokenHash(tokens["tester"]), TokenHash(tokens["other"]), policy)
	cfg, err := config.Parse("test.json", []byte(cfgJSON))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{Memory: mem})
	if err != nil {
		t.Fatal(err)
	}
	srv := serveHTTP(t, g)
	for _, s := range g.Servers() {
		if s.State != StateReady {
			t.Fatalf("server %s: %s %s", s.Name, s.State, s.Error)
		}
	}
	return &sessionsFixture{t: t, g: g, url: srv.URL + "/mcp"}
}

// client opens an initialized session of agent on front, declaring caps.
func (f *sessionsFixture) client(front, agent string, caps map[string]any) *testClient {
	f.t.Helper()
	var c *testClient
	if front == frontStdio {
		c = stdioClient(f.t, f.g, agent)
	} else {
		c = httpClient(f.t, f.url, tokens[agent])
	}
	c.initializeWith("test-"+agent, caps)
	return c
}

// call calls tool with text and returns the text of its result and whether it is
// an error result.
func call(t *testing.T, c *testClient, tool, text string) (string, bool) {
	t.Helper()
	m := c.requestWithin("tools/call", map[string]any{"name": tool, "arguments": map[string]any{"text": text}}, 30*time.Second)
	if m.Error != nil {
		t.Fatalf("%s: %v", tool, m.Error)
	}
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(m.Result, &res); err != nil || len(res.Content) == 0 {
		t.Fatalf("%s: result %s: %v", tool, m.Result, err)
	}
	return res.Content[0].Text, res.IsError
}

var pidRE = regexp.MustCompile(`pid=(\d+)`)

// pidOf is the process id a "get" answered from.
func pidOf(t *testing.T, got string) int {
	t.Helper()
	m := pidRE.FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("no pid in %q", got)
	}
	var pid int
	fmt.Sscan(m[1], &pid)
	return pid
}

// waitFor polls cond until it holds, failing the test after a generous bound: the
// condition is what is tested, the bound only keeps a broken gateway from hanging
// the test.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: never happened", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// exited reports whether process pid is gone (the gateway reaped it).
func exited(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func (f *sessionsFixture) upstreamSessions(server string) int {
	for _, s := range f.g.Servers() {
		if s.Name == server {
			return s.UpstreamSessions
		}
	}
	return -1
}

var sampleAndRoots = map[string]any{"sampling": map[string]any{}, "roots": map[string]any{"listChanged": true}}

// TestClientSessionsAreIsolated: with "sessions": "client", each client session has
// its own process of the server: what one client sets another does not see, a call
// with no client (nexus call) goes to the server's own connection, a client past
// maxSessions ends its agent's idle one, and a session's end stops its process and
// frees its place. Over both fronts, and with memory on: a read-only "get" of one
// client is never answered with another's.
func TestClientSessionsAreIsolated(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, frontA, frontB string }{
		{"two HTTP clients", frontHTTP, frontHTTP},
		{"a stdio client and an HTTP client", frontStdio, frontHTTP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := openMemory(t)
			f := newSessionsFixture(t, mem)
			a := f.client(tc.frontA, "other", sampleAndRoots)
			b := f.client(tc.frontB, "tester", sampleAndRoots)

			if _, isErr := call(t, a, "solo__set", "from-A"); isErr {
				t.Fatal("A's set failed")
			}
			gotB, _ := call(t, b, "solo__get", "")
			if !strings.Contains(gotB, `value=""`) {
				t.Errorf("B sees %s, want nothing set: A's state reached B", gotB)
			}
			call(t, b, "solo__set", "from-B")
			gotA, _ := call(t, a, "solo__get", "")
			if !strings.Contains(gotA, `value="from-A"`) {
				t.Errorf("A sees %s, want its own from-A", gotA)
			}
			gotB, _ = call(t, b, "solo__get", "")
			if !strings.Contains(gotB, `value="from-B"`) {
				t.Errorf("B sees %s, want its own from-B (memory must not answer for a client server)", gotB)
			}
			pidA, pidB := pidOf(t, gotA), pidOf(t, gotB)
			if pidA == pidB {
				t.Fatalf("A and B share process %d", pidA)
			}
			// A call with no client goes to the server's own connection.
			raw, err := f.g.Call(context.Background(), "other", "solo__get", json.RawMessage(`{}`))
			if err != nil || !strings.Contains(string(raw), `value=\"\"`) {
				t.Errorf("a call with no client: %s %v, want the server's own, unset", raw, err)
			}
			if n := f.upstreamSessions("solo"); n != 2 {
				t.Errorf("upstream sessions of solo: %d, want 2", n)
			}

			// Past maxSessions (2), every upstream idle: the least recently used
			// (A's) is ended to make room for a third client (upstream.Pool).
			c := f.client(frontHTTP, "other", sampleAndRoots)
			gotC, isErr := call(t, c, "solo__get", "")
			if isErr || !strings.Contains(gotC, `value=""`) {
				t.Errorf("a third client: %q (error %v), want a fresh process", gotC, isErr)
			}
			waitFor(t, "A's idle process is ended for the third client", func() bool { return exited(pidA) })
			if exited(pidB) {
				t.Error("B's process, another agent's, was ended")
			}

			// C's session ends: its process exits, its place is free.
			pidC := pidOf(t, gotC)
			c.end()
			waitFor(t, "C's process exits", func() bool { return exited(pidC) })
			waitFor(t, "C's upstream session is dropped", func() bool { return f.upstreamSessions("solo") == 1 })
			if exited(pidB) {
				t.Error("B's process exited with C's session")
			}
			gotA, isErr = call(t, a, "solo__get", "")
			if isErr || !strings.Contains(gotA, `value=""`) {
				t.Errorf("A once C left: %q (error %v), want a fresh process, its state lost", gotA, isErr)
			}
		})
	}
}

// TestCapabilitiesAreHonest: a child is told only what Nexus can honour. A shared
// child may ask for sampling, elicitation and roots (Nexus forwards them to the
// client of the call); a "client" child gets exactly its client's; an SSE child
// gets none, since mcp-go's SSE client transport cannot receive its requests, so
// its sampling is refused by the child itself at once instead of waiting.
func TestCapabilitiesAreHonest(t *testing.T) {
	t.Parallel()
	f := newSessionsFixture(t, nil)
	for _, tc := range []struct {
		name       string
		tool       string
		clientCaps map[string]any
		want       []string // capabilities the child sees
	}{
		{"shared stdio child", "good__caps", sampleAndRoots, []string{"sampling", "elicitation", "roots"}},
		{"client child of a client with roots only", "solo__caps", map[string]any{"roots": map[string]any{}}, []string{"roots"}},
		{"client child of a client with sampling and elicitation", "solo__caps",
			map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{"form": map[string]any{}}}, []string{"sampling", "elicitation"}},
		{"client child of a client with none", "solo__caps", map[string]any{}, nil},
		{"streamable-HTTP client child of a client with roots only", "web__caps", map[string]any{"roots": map[string]any{}}, []string{"roots"}},
		{"SSE child", "sse__caps", sampleAndRoots, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := f.client(frontHTTP, "other", tc.clientCaps)
			defer c.end() // its place among solo's two is free once DELETE is answered
			got, isErr := call(t, c, tc.tool, "")
			if isErr {
				t.Fatalf("caps: %s", got)
			}
			var caps map[string]json.RawMessage
			if err := json.Unmarshal([]byte(got), &caps); err != nil {
				t.Fatalf("caps %q: %v", got, err)
			}
			for _, k := range []string{"sampling", "elicitation", "roots"} {
				_, has := caps[k]
				want := strings.Contains(strings.Join(tc.want, ","), k)
				if has != want {
					t.Errorf("the child sees %s: %v, want %v (it sees %s)", k, has, want, got)
				}
			}
		})
	}
	for _, server := range []string{"solo", "web"} {
		t.Run(server+" child's sampling", func(t *testing.T) {
			c := f.client(frontHTTP, "other", sampleAndRoots)
			defer c.end()
			c.answer = answersEverything
			if got, isErr := call(t, c, server+"__sample", ""); isErr || !strings.Contains(got, modelOutput) {
				t.Errorf("sampling of a client child: %q (error %v), want its client's answer", got, isErr)
			}
		})
	}
	t.Run("SSE child's sampling", func(t *testing.T) {
		c := f.client(frontHTTP, "other", sampleAndRoots)
		c.answer = answersEverything
		got, isErr := call(t, c, "sse__sample", "")
		if !isErr || strings.Contains(got, modelOutput) {
			t.Errorf("sampling of an SSE child: %q (error %v), want the child's own refusal", got, isErr)
		}
		if strings.Contains(c.received(), "sampling/createMessage") {
			t.Error("the client was asked for sampling by an SSE child")
		}
	})
}

// rootsOf answers roots/list with one root.
func rootsOf(uri string) func(string, json.RawMessage) (any, *RPCError) {
	return func(method string, _ json.RawMessage) (any, *RPCError) {
		if method != "roots/list" {
			return nil, &RPCError{Code: jsonrpc.CodeMethodNotFound, Message: method}
		}
		return map[string]any{"roots": []map[string]any{{"uri": uri, "name": "root"}}}, nil
	}
}

// TestRootsReachChildrenOverHTTP: a client's notifications/roots/list_changed goes to
// its children, which ask for the roots again outside any call; over the HTTP front
// a "client" child's request reaches its own client on the session's stream, each
// client's child getting its own client's roots. A shared child asking outside a
// call gets none: nothing says which client it means (during a call it gets the
// caller's, see TestChildRequestsNeedAVisibleCall).
func TestRootsReachChildrenOverHTTP(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		tool    string // roots_seen of the child
		clients int
		want    []string // what each client's child was answered, in client order
	}{
		{"client child, one client", "solo__roots_seen", 1, []string{"file:///a"}},
		{"client child, two clients", "solo__roots_seen", 2, []string{"file:///a", "file:///b"}},
		{"shared child, one client", "good__roots_seen", 1, []string{"[]"}},
		{"shared child, two clients", "good__roots_seen", 2, []string{"[]", "[]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newSessionsFixture(t, nil)
			var cs []*testClient
			for i := range tc.clients {
				c := f.client(frontHTTP, "other", sampleAndRoots)
				c.answer = rootsOf("file:///" + string(rune('a'+i)))
				call(t, c, strings.Replace(tc.tool, "roots_seen", "get", 1), "") // opens a client child's session
				cs = append(cs, c)
			}
			asked := 0
			for i, c := range cs {
				c.notify("notifications/roots/list_changed", map[string]any{})
				if strings.HasPrefix(tc.tool, "good") {
					asked++ // a shared child asks again for every client's change
				} else {
					asked = 1
				}
				// A shared child's request during a call goes to the caller:
				// its roots are read by a call with no client, so that only
				// the notification's own request is seen.
				var got string
				if strings.HasPrefix(tc.tool, "good") {
					raw, err := f.g.Call(context.Background(), "other", tc.tool, json.RawMessage(fmt.Sprintf(`{"text":"%d"}`, asked)))
					if err != nil {
						t.Fatal(err)
					}
					var res struct {
						Content []struct {
							Text string `json:"text"`
						} `json:"content"`
					}
					if err := json.Unmarshal(raw, &res); err != nil || len(res.Content) == 0 {
						t.Fatalf("roots_seen: %s %v", raw, err)
					}
					got = res.Content[0].Text
				} else {
					var isErr bool
					if got, isErr = call(t, c, tc.tool, fmt.Sprint(asked)); isErr {
						t.Fatalf("client %d: %s", i, got)
					}
				}
				answers := strings.Split(got, "\n")
				last := answers[len(answers)-1]
				if want := tc.want[i]; !strings.Contains(last, want) || (want == "[]" && strings.Contains(last, "file://")) {
					t.Errorf("client %d: the child was answered %s, want %s (all answers: %q)", i, last, want, answers)
				}
			}
		})
	}
}

// TestClientChildFollowsItsSession: a "client" child's logging level is its own
// client's, and its logs and resource updates reach its own client only; a shared
// child is asked for the most verbose level any session set, and what it sends
// reaches every session that may see it.
func TestClientChildFollowsItsSession(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		server string
		// levels each client's child has; shared: the most verbose of both
		levelA, levelB string
		own            bool // A's logs and updates reach A only
	}{
		{"solo", "error", "debug", true},
		{"good", "debug", "debug", false},
	} {
		t.Run(tc.server, func(t *testing.T) {
			f := newSessionsFixture(t, nil)
			a := f.client(frontHTTP, "other", sampleAndRoots)
			b := f.client(frontHTTP, "tester", sampleAndRoots)
			for _, c := range []*testClient{a, b} {
				call(t, c, tc.server+"__get", "") // opens a client child's session
			}
			for c, level := range map[*testClient]string{a: "error", b: "debug"} {
				if m := c.request("logging/setLevel", map[string]any{"level": level}); m.Error != nil {
					t.Fatal(m.Error)
				}
			}
			for c, want := range map[*testClient]string{a: tc.levelA, b: tc.levelB} {
				if got, _ := call(t, c, tc.server+"__level", ""); got != "level="+want {
					t.Errorf("the child of %p has %s, want %s", c, got, want)
				}
			}

			// Logs: the child's warning, under B's level (debug) only. A (level
			// error) never gets one; B gets the warning of every child that serves
			// it: its own only for a client child, A's too for a shared one, on the
			// same stream before B's second (one child, one pump).
			count := func(c *testClient, method string, ok func(wireMsg) bool) int {
				n := 0
				for _, m := range c.notesOf(method) {
					if ok(m) {
						n++
					}
				}
				return n
			}
			logOf := func(n wireMsg) bool { return strings.Contains(string(n.Params), `"logger":"`+tc.server+`"`) }
			saying := func(word string) func(wireMsg) bool {
				return func(n wireMsg) bool { return logOf(n) && strings.Contains(string(n.Params), word) }
			}
			call(t, b, tc.server+"__log", "b1")
			call(t, a, tc.server+"__log", "a1")
			call(t, b, tc.server+"__log", "b2")
			if !b.waitNote("notifications/message", saying("b2")) {
				t.Fatal("B never got its child's second log")
			}
			want := 3
			if tc.own {
				want = 2
			}
			if got := count(b, "notifications/message", logOf); got != want {
				t.Errorf("B got %d logs, want %d: %s", got, want, b.received())
			}
			if got := count(a, "notifications/message", logOf); got != 0 {
				t.Errorf("A, at level error, got %d warnings", got)
			}

			// Resource updates: both subscribe; A's child's update reaches A,
			// and B's reaches A only when the child is shared.
			uri := "mem://" + tc.server + "/doc"
			for _, c := range []*testClient{a, b} {
				if m := c.request("resources/subscribe", map[string]any{"uri": uri}); m.Error != nil {
					t.Fatal(m.Error)
				}
			}
			by := func(word string) func(wireMsg) bool {
				return func(n wireMsg) bool { return strings.Contains(string(n.Params), `"by":"`+word+`"`) }
			}
			updated := func(n wireMsg) bool { return strings.Contains(string(n.Params), uri) }
			call(t, a, tc.server+"__touch", "a1")
			call(t, b, tc.server+"__touch", "b1")
			call(t, a, tc.server+"__touch", "a2")
			if !a.waitNote("notifications/resources/updated", by("a2")) {
				t.Fatal("A never got its second update")
			}
			wantA := 3
			if tc.own {
				wantA = 2
			}
			if got := count(a, "notifications/resources/updated", updated); got != wantA {
				t.Errorf("A got %d updates, want %d", got, wantA)
			}
			if !b.waitNote("notifications/resources/updated", by("b1")) {
				t.Error("B never got its own update")
			}
		})
	}
}

// TestRootsChangeForgetsSharedAnswers: a client's roots/list_changed marks stale
// what memory holds of a shared child that asked for roots (its answers may have
// been made with the old roots); before the child ever asked, its answers stay.
func TestRootsChangeForgetsSharedAnswers(t *testing.T) {
	t.Parallel()
	mem := openMemory(t)
	f := newSessionsFixture(t, mem)
	c := f.client(frontHTTP, "other", sampleAndRoots)
	c.answer = rootsOf("file:///a")
	ctx := context.Background()
	echo := func() string {
		t.Helper()
		raw, err := f.g.Call(ctx, "other", "good__echo", json.RawMessage(`{"text":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		st, _, _ := memory.CacheStatus(raw)
		return st
	}
	// rootsSeen waits until the child asked for roots n times: by then the
	// gateway handled the notification that made it ask.
	rootsSeen := func(n int) {
		t.Helper()
		if _, err := f.g.Call(ctx, "other", "good__roots_seen", json.RawMessage(fmt.Sprintf(`{"text":"%d"}`, n))); err != nil {
			t.Fatal(err)
		}
	}
	echo()
	if st := echo(); st != memory.StatusHit {
		t.Fatalf("a second echo: %q, want a hit", st)
	}
	c.notify("notifications/roots/list_changed", map[string]any{})
	rootsSeen(1)
	if st := echo(); st != memory.StatusHit {
		t.Errorf("after a roots change, before the child ever asked for roots: %q, want a hit", st)
	}
	c.notify("notifications/roots/list_changed", map[string]any{})
	rootsSeen(2)
	if st := echo(); st == memory.StatusHit {
		t.Errorf("after a roots change of a child that asked for roots: %q, want no hit", st)
	}
}

// TestClientChildExitAndReload: a client session's process that exits is started
// afresh on the session's next request (its state lost, as with a direct
// connection), the gateway and the other sessions untouched; a reload that changes
// only maxSessions keeps the sessions' processes, and one that makes the server
// shared stops them.
func TestClientChildExitAndReload(t *testing.T) {
	t.Parallel()
	f := newSessionsFixture(t, nil)
	a := f.client(frontHTTP, "other", sampleAndRoots)
	b := f.client(frontHTTP, "tester", sampleAndRoots)
	call(t, a, "solo__set", "from-A")
	call(t, b, "solo__set", "from-B")
	gotA, _ := call(t, a, "solo__get", "")
	gotB, _ := call(t, b, "solo__get", "")
	pidA, pidB := pidOf(t, gotA), pidOf(t, gotB)

	if err := syscall.Kill(pidA, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "A's process is reaped", func() bool { return exited(pidA) })
	// A call that reaches the connection before the gateway has read the
	// process's end fails, as it would on a direct connection; the next is the
	// one that must start afresh.
	waitFor(t, "the gateway sees A's process end", func() bool { return f.upstreamSessions("solo") == 1 })
	got, isErr := call(t, a, "solo__get", "")
	if isErr || !strings.Contains(got, `value=""`) || pidOf(t, got) == pidA {
		t.Errorf("A after its process died: %q (error %v), want a fresh process", got, isErr)
	}
	if got, _ := call(t, b, "solo__get", ""); !strings.Contains(got, `value="from-B"`) || pidOf(t, got) != pidB {
		t.Errorf("B after A's process died: %q, want its own process and state", got)
	}

	reload := func(solo string) {
		t.Helper()
		cfg := f.g.Config()
		next := *cfg
		next.Servers = maps.Clone(cfg.Servers)
		s := *cfg.Servers["solo"]
		var over struct {
			Sessions    string `json:"sessions"`
			MaxSessions int    `json:"maxSessions"`
		}
		if err := json.Unmarshal([]byte(solo), &over); err != nil {
			t.Fatal(err)
		}
		s.Sessions, s.MaxSessions = over.Sessions, over.MaxSessions
		next.Servers["solo"] = &s
		if err := f.g.Reload(&next); err != nil {
			t.Fatal(err)
		}
	}
	reload(`{"sessions": "client", "maxSessions": 5}`)
	if got, _ := call(t, b, "solo__get", ""); pidOf(t, got) != pidB {
		t.Errorf("B after a reload of maxSessions: %q, want its process kept", got)
	}
	if st := f.upstreamSessions("solo"); st != 2 {
		t.Errorf("upstream sessions after the reload: %d, want 2", st)
	}
	reload(`{"sessions": "shared"}`)
	waitFor(t, "B's process stops once solo is shared", func() bool { return exited(pidB) })
	got, _ = call(t, b, "solo__get", "")
	if got2, _ := call(t, a, "solo__get", ""); pidOf(t, got) != pidOf(t, got2) {
		t.Errorf("a shared solo answers A and B from two processes: %q, %q", got, got2)
	}
}

// TestPolicyDecidesBeforeASessionOpens: a request the policy refuses opens no
// upstream session: no process is started for a client that may not use the server.
func TestPolicyDecidesBeforeASessionOpens(t *testing.T) {
	t.Parallel()
	f := newSessionsFixturePolicy(t, nil, `{"default": {"allow": ["*"]}, "agents": {"tester": {"allow": ["*"], "deny": ["solo.*"]}}}`)
	c := f.client(frontHTTP, "tester", sampleAndRoots)
	got, isErr := call(t, c, "solo__get", "")
	if !isErr || !strings.Contains(got, "may not call") {
		t.Errorf("a denied call: %q (error %v), want the policy's refusal", got, isErr)
	}
	for _, req := range []struct {
		method string
		params map[string]any
	}{
		{"resources/read", map[string]any{"uri": "mem://solo/doc"}},
		{"resources/subscribe", map[string]any{"uri": "mem://solo/doc"}},
		{"prompts/get", map[string]any{"name": "solo__greet"}},
	} {
		if m := c.request(req.method, req.params); m.Error == nil {
			t.Errorf("%s of a denied server: %s, want a refusal", req.method, m.Result)
		}
	}
	if n := f.upstreamSessions("solo"); n != 0 {
		t.Errorf("upstream sessions of solo after refused requests: %d, want 0", n)
	}
	other := f.client(frontHTTP, "other", sampleAndRoots)
	if _, isErr := call(t, other, "solo__get", ""); isErr {
		t.Error("an allowed agent's call failed")
	}
	if n := f.upstreamSessions("solo"); n != 1 {
		t.Errorf("upstream sessions of solo after an allowed call: %d, want 1", n)
	}
}
