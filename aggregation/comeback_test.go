package aggregation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/upstream"
)

// restartable serves a test child over streamable HTTP on one 127.0.0.1 port, and
// can be restarted there as a new server: the sessions of the old one are unknown to
// the new one, as when a real server restarts.
type restartable struct {
	t    *testing.T
	addr string

	mu    sync.Mutex
	child *testChild
	srv   *http.Server
	// gate, when set, holds every initialize until it is closed.
	gate chan struct{}
	// typescript answers a session it does not know as the TypeScript SDK
	// does: 400 with a JSON-RPC error, not 404.
	typescript bool
}

func newRestartable(t *testing.T, gate chan struct{}) *restartable {
	t.Helper()
	r := &restartable{t: t, gate: gate}
	r.start("127.0.0.1:0")
	t.Cleanup(r.stop)
	return r
}

func (r *restartable) url() string { return "http://" + r.addr + "/mcp" }

func (r *restartable) start(addr string) {
	r.t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		r.t.Fatal(err)
	}
	c := newTestChild("web")
	h := server.NewStreamableHTTPServer(c.srv, server.WithStateful(true), server.WithStreamableHTTPProtocolVersions("2025-11-25"))
	issued := map[string]bool{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost {
			body, _ := io.ReadAll(req.Body)
			initialize := bytes.Contains(body, []byte(`"initialize"`))
			if initialize && r.gate != nil {
				select {
				case <-r.gate:
				case <-req.Context().Done():
					return
				}
			}
			r.mu.Lock()
			known := issued[req.Header.Get("Mcp-Session-Id")]
			r.mu.Unlock()
			if r.typescript && !initialize && !known {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}`)
				return
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, req)
		if id := w.Header().Get("Mcp-Session-Id"); id != "" {
			r.mu.Lock()
			issued[id] = true
			r.mu.Unlock()
		}
	})}
	// Each request on its own connection: a request written to a kept-alive
	// connection of the old server fails with EOF, which leaves unknown whether
	// it was processed (a real restart takes long enough for the client to see
	// the old connections close first).
	srv.SetKeepAlivesEnabled(false)
	go func() { _ = srv.Serve(l) }()
	r.mu.Lock()
	r.addr, r.child, r.srv = l.Addr().String(), c, srv
	r.mu.Unlock()
}

func (r *restartable) stop() {
	r.mu.Lock()
	srv := r.srv
	r.mu.Unlock()
	_ = srv.Close()
}

// restart stops the server and starts a new one on the same port.
func (r *restartable) restart() {
	r.stop()
	r.start(r.addr)
}

func (r *restartable) current() *testChild {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.child
}

// comebackGateway starts a gateway for the servers JSON, with every agent allowed
// everything; tune adjusts its children before they start.
func comebackGateway(t *testing.T, servers string, tune func(map[string]*child)) *Gateway {
	t.Helper()
	cfg, err := config.Parse("test.json", []byte(`{"servers": `+servers+`, "policy": {"agents": {"anonymous": {"allow": ["*"]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tune != nil {
		tune(g.kids())
	}
	startGateway(t, g)
	return g
}

// startGateway starts g for the rest of the test.
func startGateway(t *testing.T, g *Gateway) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); g.Close() })
}

// waitState waits, on the child's own change signal, until it is in state.
func waitState(t *testing.T, c *child, state State) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		changed := c.life.Updated()
		now := c.life.Snapshot().State
		if now == state {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("server %s is %s, not %s", c.name, now, state)
		}
	}
}

func callText(t *testing.T, g *Gateway, tool, args string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	raw, err := g.Call(ctx, "anonymous", tool, json.RawMessage(args))
	if err != nil {
		return "error: " + err.Error()
	}
	return string(raw)
}

// TestRestartedHTTPChildComesBack: a streamable HTTP child that restarts forgets the
// gateway's session. A call it refused for that (404: not processed) is sent once
// more on a new session and succeeds; a call that reached the old server is never
// sent to the new one.
func TestRestartedHTTPChildComesBack(t *testing.T) {
	// Not parallel: a restart binds the port it closed again, which a test
	// running beside it could take in between.
	tests := []struct {
		name string
		// during runs while a call to tool is in flight, or before it when tool
		// is "": it restarts the server.
		tool string
		// typescript: the server answers an unknown session as the TypeScript
		// SDK does (400, "No valid session ID").
		typescript bool
		// wantFirst is in the answer to the call to tool; newCalls is how many
		// tools/call the new server gets in all.
		wantFirst string
		newCalls  int
	}{
		{name: "refused for its session (404): sent again", newCalls: 1},
		{name: "refused for its session (No valid session ID): sent again", typescript: true, newCalls: 1},
		{name: "reached the old server: never sent again", tool: "web__wait", wantFirst: "isError", newCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			web := newRestartable(t, nil)
			web.typescript = tt.typescript
			g := comebackGateway(t, fmt.Sprintf(`{"web": {"transport": "streamable-http", "url": %q, "timeout": "20s"}}`, web.url()), nil)
			if err := g.Ready(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := callText(t, g, "web__echo", `{"text":"one"}`); !strings.Contains(got, "web:one") {
				t.Fatalf("first call: %s", got)
			}
			old := web.current()
			if tt.tool == "" {
				web.restart()
			} else {
				entered := make(chan struct{}, 1)
				old.mu.Lock()
				old.entered = entered
				old.mu.Unlock()
				answer := make(chan string, 1)
				go func() { answer <- callText(t, g, tt.tool, `{}`) }()
				<-entered
				web.restart()
				if got := <-answer; !strings.Contains(got, tt.wantFirst) {
					t.Fatalf("the call the old server was running: %s", got)
				}
			}
			if got := callText(t, g, "web__echo", `{"text":"two"}`); !strings.Contains(got, "web:two") {
				t.Fatalf("call after the restart: %s", got)
			}
			if n := web.current().count("tools/call"); n != tt.newCalls {
				t.Errorf("the new server got %d tools/call, want %d", n, tt.newCalls)
			}
			if n := web.current().count("initialize"); n != 1 {
				t.Errorf("the new server was initialized %d times, want 1", n)
			}
		})
	}
}

// TestFailedChildComesBackOnCall: a child that used up its attempts stays failed
// only until someone needs it: the next call to one of its tools makes one fresh
// attempt and waits for it. On the fake clock, with the real backoff.
func TestFailedChildComesBackOnCall(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g, web, _ := memGateway(t, true)
		c := g.kids()["web"]
		time.Sleep(time.Minute) // its 8 attempts take 31.75s
		synctest.Wait()
		if st := c.status(); st.State != StateFailed {
			t.Fatalf("a minute down: %s, want failed", st.Describe())
		}
		tests := []struct {
			name     string
			up       bool
			want     string
			attempts int
		}{
			{name: "still down: one attempt, then the reason", want: "is not running (failed", attempts: 1},
			{name: "up again: the call is served", up: true, want: "web:back", attempts: 2},
		}
		for _, tt := range tests { // no t.Run in a bubble
			if tt.up {
				web.set(false, false)
			}
			if got := callText(t, g, "web__echo", `{"text":"back"}`); !strings.Contains(got, tt.want) {
				t.Errorf("%s: call: %s, want %q in it", tt.name, got, tt.want)
			}
			attempts := c.life.Snapshot().Attempts
			if attempts != tt.attempts {
				t.Errorf("%s: %d fresh attempts, want %d", tt.name, attempts, tt.attempts)
			}
		}
		if st := c.status(); st.State != StateReady {
			t.Errorf("state after it came back: %s", st.Describe())
		}
	})
}

// TestRetryAfterReload: a reload makes a failed child try once more, at once
// (what nexus doctor --retry asks of a running gateway).
func TestRetryAfterReload(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g, web, _ := memGateway(t, true)
		c := g.kids()["web"]
		time.Sleep(time.Minute)
		synctest.Wait()
		if st := c.status(); st.State != StateFailed {
			t.Fatalf("a minute down: %s, want failed", st.Describe())
		}
		web.set(false, false)
		before := time.Now()
		if err := g.Reload(g.Config()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if st := c.status(); st.State != StateReady || time.Since(before) != 0 {
			t.Errorf("after the reload: %s, %s later; want ready at once", st.Describe(), time.Since(before))
		}
	})
}

// TestRequestsWaitForSlowStart: a prompt, a resource or a completion of a server
// still making its first attempt waits for it, as a tools/call does, instead of
// answering "unknown" (or going to another server); so do a client's first lists.
func TestRequestsWaitForSlowStart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method string
		params map[string]any
		want   string
	}{
		{"prompts/get", map[string]any{"name": "web__greet", "arguments": map[string]any{"who": "you"}}, "web greets you"},
		{"resources/read", map[string]any{"uri": "mem://web/doc"}, "web document"},
		{"resources/read", map[string]any{"uri": "mem://web/item/7"}, "web item"},
		{"completion/complete", map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "web__greet"}, "argument": map[string]any{"name": "who", "value": "y"}}, "completion"},
		// The first lists wait too (up to firstListGrace after Start).
		{"tools/list", map[string]any{}, "web__echo"},
		{"prompts/list", map[string]any{}, "web__greet"},
		{"resources/list", map[string]any{}, "mem://web/doc"},
	}
	for _, tt := range tests {
		name := tt.method
		for _, k := range []string{"name", "uri"} {
			if v, ok := tt.params[k]; ok {
				name += " " + fmt.Sprint(v)
			}
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			gate := make(chan struct{})
			web := newRestartable(t, gate)
			// good lists resources too: a URI it does not know must not go to it.
			g := comebackGateway(t, fmt.Sprintf(`{"web": {"transport": "streamable-http", "url": %q, "timeout": "20s"},
				"good": {"command": %q, "args": ["-test.run=^$"], "env": {"NEXUS_TEST_CHILD": "good"}}}`, web.url(), os.Args[0]), nil)
			if err := g.Ready(context.Background(), "good"); err != nil {
				t.Fatal(err)
			}
			cl := stdioClient(t, g, "anonymous")
			cl.initialize("slow-start")
			answer := sendAsync(cl, tt.method, tt.params)
			// The ping is read after the request started: its answer says the
			// request is under way (waiting, or answered).
			if m := cl.request("ping", nil); m.Error != nil {
				t.Fatal(m.Error)
			}
			close(gate)
			var m wireMsg
			select {
			case m = <-answer:
			case <-time.After(20 * time.Second):
				t.Fatal("no answer")
			}
			if m.Error != nil || !strings.Contains(string(m.Result), tt.want) {
				t.Errorf("%s: %s %v, want %q in it", tt.method, m.Result, m.Error, tt.want)
			}
		})
	}
}

// sendAsync sends a request and returns where its answer arrives.
func sendAsync(c *testClient, method string, params any) chan wireMsg {
	c.mu.Lock()
	c.nextID++
	id := fmt.Sprintf(`"c%d"`, c.nextID)
	ch := make(chan wireMsg, 1)
	c.waiting[id] = ch
	c.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method, "params": params})
	c.post(b)
	return ch
}

// TestCallDuringRestartWaits: a call made while its server restarts after a
// crash, once its tools have left the manifest, waits for the restart and is
// answered rather than failing at once with "not running".
func TestCallDuringRestartWaits(t *testing.T) {
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	g := comebackGateway(t, `{"e": `+eraServer("gate:"+gate, filepath.Join(dir, "era.log"), "")+`}`, nil)
	c := g.kids()["e"]
	waitState(t, c, StateReady)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	callText(t, g, "e__exit", `{}`)
	waitFor(t, "the crashed server's tools out of the manifest", func() bool { return !slices.Contains(toolNames(g), "e__echo") })
	if st := statusOf(t, g, "e").State; st == StateReady {
		t.Fatalf("the server is %s while its restart is held", st)
	}
	time.AfterFunc(300*time.Millisecond, func() { os.Remove(gate) }) // the restart finishes later
	if got := callText(t, g, "e__echo", `{"text":"hi"}`); !strings.Contains(got, "legacy:hi") {
		t.Errorf("a call during the restart answered %s", got)
	}
}

// resettingServer serves a test child over transport ("sse" or
// "streamable-http") on 127.0.0.1, with connections kept alive. The first POST
// whose body holds "reset-me" has its connection reset before any answer, as
// when a server closes a connection a request is on its way on.
func resettingServer(t *testing.T, c *testChild, transport string) (url string, srv *httptest.Server) {
	t.Helper()
	return resettingServerHolding(t, c, transport, nil)
}

// resettingServerHolding is resettingServer, whose pings after the reset wait
// until hold is closed (never, when it is nil: they are answered).
func resettingServerHolding(t *testing.T, c *testChild, transport string, hold chan struct{}) (url string, srv *httptest.Server) {
	t.Helper()
	srv = httptest.NewUnstartedServer(nil)
	var h http.Handler
	switch transport {
	case config.TransportSSE:
		h = server.NewSSEServer(c.srv, server.WithBaseURL("http://"+srv.Listener.Addr().String()))
		url = "http://" + srv.Listener.Addr().String() + "/sse"
	default:
		h = server.NewStreamableHTTPServer(c.srv, server.WithStateful(true), server.WithStreamableHTTPProtocolVersions("2025-11-25"))
		url = "http://" + srv.Listener.Addr().String() + "/mcp"
	}
	var reset atomic.Bool
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost {
			body, _ := io.ReadAll(req.Body)
			if bytes.Contains(body, []byte("reset-me")) && reset.CompareAndSwap(false, true) {
				conn, _, err := http.NewResponseController(w).Hijack()
				if err != nil {
					t.Error(err)
					return
				}
				_ = conn.(*net.TCPConn).SetLinger(0) // close sends RST
				conn.Close()
				return
			}
			if hold != nil && reset.Load() && bytes.Contains(body, []byte(`"ping"`)) {
				select {
				case <-hold:
				case <-req.Context().Done():
				}
				return
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, req)
	})
	srv.Start()
	t.Cleanup(srv.Close)
	return url, srv
}

// TestResetRequestKeepsTheChild: a request to a remote child that fails at the
// transport level makes the gateway ping the child at once. A child that answers
// keeps its connection: its tools stay in the manifest, and the next call goes on
// the same session. One that does not is reconnected then, not at the next
// regular ping.
func TestResetRequestKeepsTheChild(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{config.TransportStreamableHTTP, config.TransportSSE} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			web := newTestChild("web")
			url, srv := resettingServer(t, web, transport)
			g := comebackGateway(t, fmt.Sprintf(`{"web": {"transport": %q, "url": %q, "timeout": "20s"}}`, transport, url), nil)
			if err := g.Ready(context.Background()); err != nil {
				t.Fatal(err)
			}
			c := g.kids()["web"]
			if got := callText(t, g, "web__echo", `{"text":"reset-me"}`); strings.Contains(got, "web:reset-me") {
				t.Fatalf("the reset call was answered: %s", got)
			}
			if got := callText(t, g, "web__echo", `{"text":"after"}`); !strings.Contains(got, "web:after") {
				t.Fatalf("the call after the reset: %s", got)
			}
			if n := web.count("initialize"); n != 1 {
				t.Errorf("the child was initialized %d times, want 1: one reset request ended its connection", n)
			}
			if st := c.status(); st.State != StateReady || st.Restarts != 0 {
				t.Errorf("after one reset request: %s, %d restarts; want ready, none", st.Describe(), st.Restarts)
			}
			if names := toolNames(g); !slices.Contains(names, "web__echo") {
				t.Errorf("web__echo left the manifest: %v", names)
			}

			// Now the server is gone: the failed call has it reconnected at
			// once, well before the regular ping (pingInterval).
			srv.CloseClientConnections()
			srv.Close()
			callText(t, g, "web__echo", `{"text":"gone"}`)
			for deadline := time.Now().Add(pingInterval / 2); c.status().State == StateReady; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%s after a call failed: the gone child is still taken for ready", pingInterval/2)
				}
			}
		})
	}
}

// TestLocalConnectionsNotKeptPastServersIdle: the gateway reuses a connection to
// a server on this machine between calls close together, but not one idle for
// upstream.LocalIdleTimeout, before a Node server (5 s) would close it under a request.
func TestLocalConnectionsNotKeptPastServersIdle(t *testing.T) {
	t.Parallel()
	web := newTestChild("web")
	h := server.NewStreamableHTTPServer(web.srv, server.WithStateful(true), server.WithStreamableHTTPProtocolVersions("2025-11-25"))
	var mu sync.Mutex
	var callFrom string // the client address of the last tools/call
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost {
			body, _ := io.ReadAll(req.Body)
			if bytes.Contains(body, []byte(`"tools/call"`)) {
				mu.Lock()
				callFrom = req.RemoteAddr
				mu.Unlock()
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	g := comebackGateway(t, fmt.Sprintf(`{"web": {"transport": "streamable-http", "url": %q, "timeout": "20s"}}`, srv.URL+"/mcp"), nil)
	if err := g.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	call := func() string {
		if got := callText(t, g, "web__echo", `{"text":"x"}`); !strings.Contains(got, "web:x") {
			t.Fatalf("call: %s", got)
		}
		mu.Lock()
		defer mu.Unlock()
		return callFrom
	}
	first := call()
	if second := call(); second != first {
		t.Errorf("a call right after another came from %s, not over the first's connection (%s)", second, first)
	}
	time.Sleep(upstream.LocalIdleTimeout + 500*time.Millisecond)
	if third := call(); third == first {
		t.Errorf("a call after %s idle came over the same connection (%s), which the server may be closing", upstream.LocalIdleTimeout, third)
	}
}

// TestHeldCallSaysWhy: a call held while a broken request's check waits for the
// child's ping, and out of time first, says so: the server is being checked,
// not "not running".
func TestHeldCallSaysWhy(t *testing.T) {
	t.Parallel()
	web := newTestChild("web")
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	url, _ := resettingServerHolding(t, web, config.TransportStreamableHTTP, hold)
	g := comebackGateway(t, fmt.Sprintf(`{"web": {"transport": "streamable-http", "url": %q, "timeout": "1s"}}`, url), nil)
	if err := g.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	callText(t, g, "web__echo", `{"text":"reset-me"}`)
	if got := callText(t, g, "web__echo", `{"text":"held"}`); !strings.Contains(got, "is being checked") {
		t.Errorf("the held call: %s", got)
	}
}
