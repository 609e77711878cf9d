package aggregation

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/upstream"
)

// The tests in this file run on synctest's fake clock, with the real durations:
// the clock moves only when every goroutine of the bubble is durably blocked, so
// what a child or session does over an hour takes no time at all. Nothing in a
// bubble may wait on real I/O (a pipe to a process, a socket), which is not
// durably blocking: a stdio child here fails to start (exec finds no program, so
// no process and no pipe outlives the attempt), and HTTP, to the gateway's front
// and to a child (memHTTP), goes through handler calls and io.Pipes.

// missingCommand is a program that does not exist: starting it fails at once, with
// no process, as a child whose npx package is gone does.
const missingCommand = "/nonexistent/nexus-test-child"

// attemptClock records, on the bubble's clock, when a child makes each attempt.
type attemptClock struct {
	start time.Time
	mu    sync.Mutex
	at    []time.Duration // since start
}

func (a *attemptClock) beforeStart(*config.Server) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.at = append(a.at, time.Since(a.start))
}

func (a *attemptClock) attempts() []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Duration(nil), a.at...)
}

// TestChildBackoffSeries: a child that cannot start is tried upstream.MaxFailures times,
// the waits between tries doubling from upstream.FirstBackoff, its state saying when the
// next try is; then it gives up and waits, however long, until a call asks for one
// fresh attempt. The real constants, on the fake clock.
func TestChildBackoffSeries(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		clock := &attemptClock{start: time.Now()}
		g := comebackGateway(t, `{"gone": {"command": "`+missingCommand+`"}}`,
			func(kids map[string]*child) { kids["gone"].beforeStart = clock.beforeStart })
		c := g.kids()["gone"]

		// When the attempts are made: the policy's promise, spelled out so that
		// a change of upstream.FirstBackoff, of the doubling or of upstream.MaxFailures shows here.
		ms := time.Millisecond
		want := []time.Duration{0, 250 * ms, 750 * ms, 1750 * ms, 3750 * ms, 7750 * ms, 15750 * ms, 31750 * ms}
		if len(want) != upstream.MaxFailures {
			t.Fatalf("upstream.MaxFailures is %d; this test spells out the times of 8 attempts", upstream.MaxFailures)
		}
		for i := range upstream.MaxFailures - 1 {
			synctest.Wait() // attempt i+1 failed; the child sleeps
			if got := len(clock.attempts()); got != i+1 {
				t.Fatalf("at %s: %d attempts, want %d", time.Since(clock.start), got, i+1)
			}
			st := c.status()
			next := want[i+1] - want[i]
			if st.State != StateRetrying || !st.NextRetry.Equal(clock.start.Add(want[i+1])) {
				t.Fatalf("after attempt %d: %s (next try at %s), want retrying, next try in %s",
					i+1, st.State, st.NextRetry.Sub(clock.start), next)
			}
			if d := st.Describe(); !strings.Contains(d, "next try in "+next.String()) {
				t.Errorf("after attempt %d: %q, want the wait (%s) said", i+1, d, next)
			}
			// Nothing happens a moment before the wait ends.
			time.Sleep(next - time.Millisecond)
			synctest.Wait()
			if got := len(clock.attempts()); got != i+1 {
				t.Fatalf("%s before the wait of %s ended: %d attempts, want %d", time.Millisecond, next, got, i+1)
			}
			time.Sleep(time.Millisecond)
		}
		synctest.Wait()
		if got := clock.attempts(); !slices.Equal(got, want) {
			t.Fatalf("attempts at %v, want %v", got, want)
		}
		st := c.status()
		if st.State != StateFailed || !strings.Contains(st.Error, "gave up after 8 attempts") || !st.NextRetry.IsZero() {
			t.Fatalf("after %d attempts: %s %q (next try %v), want failed, given up", upstream.MaxFailures, st.State, st.Error, st.NextRetry)
		}

		// A failed child stays failed: no timer brings it back.
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		if got := len(clock.attempts()); got != upstream.MaxFailures {
			t.Fatalf("a day after giving up: %d attempts, want %d", got, upstream.MaxFailures)
		}
		// A call makes one fresh attempt, waits for it, and says why it failed.
		if got := callText(t, g, "gone__anything", `{}`); !strings.Contains(got, "is not running (failed") {
			t.Errorf("a call to the failed child: %s", got)
		}
		if got := len(clock.attempts()); got != upstream.MaxFailures+1 {
			t.Errorf("after a call: %d attempts, want %d (one fresh)", got, upstream.MaxFailures+1)
		}
		if st := c.status(); st.State != StateFailed || !strings.Contains(st.Error, "a fresh attempt failed too") {
			t.Errorf("after the fresh attempt: %s %q", st.State, st.Error)
		}
	})
}

// handlerClient speaks to an HTTP front by calling its handler, with no socket:
// what a bubble can wait on.
type handlerClient struct {
	t   *testing.T
	h   http.Handler
	sid string
}

// post sends one message on the client's session and returns the status and body.
func (c *handlerClient) post(body string) (int, string) {
	c.t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	if c.sid != "" {
		r.Header.Set("Mcp-Session-Id", c.sid)
	}
	w := httptest.NewRecorder()
	c.h.ServeHTTP(w, r)
	if id := w.Header().Get("Mcp-Session-Id"); id != "" {
		c.sid = id
	}
	return w.Code, w.Body.String()
}

func (c *handlerClient) initialize() {
	c.t.Helper()
	st, body := c.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"clock","version":"1"}}}`)
	if st != http.StatusOK || c.sid == "" {
		c.t.Fatalf("initialize: status %d, session %q: %s", st, c.sid, body)
	}
	if st, body := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); st != http.StatusAccepted {
		c.t.Fatalf("initialized: status %d: %s", st, body)
	}
}

// streamStatus opens a GET stream expected to be refused, and returns its status.
func (c *handlerClient) streamStatus() int {
	r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
	r.Header.Set("Accept", "text/event-stream")
	r.Header.Set("Mcp-Session-Id", c.sid)
	w := httptest.NewRecorder()
	c.h.ServeHTTP(w, r)
	return w.Code
}

// stream opens the session's GET stream; the channel is closed when it ends.
func (c *handlerClient) stream() <-chan struct{} {
	r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
	r.Header.Set("Accept", "text/event-stream")
	r.Header.Set("Mcp-Session-Id", c.sid)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		c.h.ServeHTTP(httptest.NewRecorder(), r)
	}()
	return ended
}

// TestHTTPSessionIdleTimeout: an HTTP session that received no request for the
// default idle timeout (an hour) is ended, open stream or not, and its next
// request is answered 404; one that is used (tools/call included) lives on
// however long. The sweep looks every quarter of the timeout, so a session ends
// within 75 minutes of its last request, never before the hour.
func TestHTTPSessionIdleTimeout(t *testing.T) {
	t.Parallel()
	if config.DefaultSessionIdleTimeout != time.Hour {
		t.Fatalf("the default idle timeout is %s; this test's times assume an hour", config.DefaultSessionIdleTimeout)
	}
	tests := []struct {
		name   string
		stream bool // the session's stream is open throughout
	}{
		{name: "no stream"},
		{name: "stream open", stream: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g, _, _ := memGateway(t, false)
				c := &handlerClient{t: t, h: g.HTTPHandler(HTTPOptions{})}
				c.initialize()
				var ended <-chan struct{}
				if tt.stream {
					ended = c.stream()
					synctest.Wait()
					if st := c.streamStatus(); st != http.StatusConflict {
						t.Errorf("a second stream of one session: status %d, want 409", st)
					}
				}
				// Used every 59 minutes, for five hours: it lives.
				for i := range 5 {
					time.Sleep(59 * time.Minute)
					if st, body := c.post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"web__echo","arguments":{"text":"x"}}}`); st != http.StatusOK || !strings.Contains(body, "web:x") {
						t.Fatalf("a call %d×59m in: status %d: %s", i+1, st, body)
					}
				}
				// Idle: still there just before the hour, gone by 75 minutes.
				time.Sleep(time.Hour - time.Second)
				synctest.Wait()
				if n := g.sessions.count(frontHTTP); n != 1 {
					t.Fatalf("a second before the idle timeout: %d sessions, want 1", n)
				}
				time.Sleep(15*time.Minute + time.Second)
				synctest.Wait()
				if n := g.sessions.count(frontHTTP); n != 0 {
					t.Fatalf("75 minutes idle: %d sessions, want 0", n)
				}
				if ended != nil {
					select {
					case <-ended:
					default:
						t.Error("the expired session's stream is still open")
					}
				}
				st, body := c.post(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
				if st != http.StatusNotFound || !strings.Contains(body, "unknown or expired session") {
					t.Errorf("a request on the expired session: status %d: %s", st, body)
				}
			})
		})
	}
}

// TestHTTPSessionInFlight: a session whose request is still in flight is not
// idle, however long the request takes: its answer is still to come. Another,
// idle meanwhile, ends. The number of sessions is bounded (limits.maxSessions).
func TestHTTPSessionInFlight(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g, web, _ := memGatewayConfig(t, false, `"timeout": "3h", `, `{"maxSessions": 2}`)
		h := g.HTTPHandler(HTTPOptions{})
		busy, idle := &handlerClient{t: t, h: h}, &handlerClient{t: t, h: h}
		busy.initialize()
		idle.initialize()
		third := &handlerClient{t: t, h: h}
		st, body := third.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"third","version":"1"}}}`)
		if st != http.StatusServiceUnavailable || !strings.Contains(body, "maximum of 2 sessions") {
			t.Errorf("a session beyond the bound: status %d: %s", st, body)
		}
		web.mu.Lock()
		web.hangCalls = true // the call takes its 3h timeout
		web.mu.Unlock()
		answered := make(chan string, 1)
		go func() {
			_, body := busy.post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"web__echo","arguments":{"text":"slow"}}}`)
			answered <- body
		}()
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		select {
		case body := <-answered:
			t.Fatalf("the call was answered within 2h of its 3h: %s", body)
		default:
		}
		if sessions := g.sessions.snapshot(); len(sessions) != 1 || sessions[0].id != busy.sid {
			t.Errorf("two hours in: %d sessions, want the busy one alone", len(sessions))
		}
		if st, body := idle.post(`{"jsonrpc":"2.0","id":3,"method":"ping"}`); st != http.StatusNotFound {
			t.Errorf("the idle session two hours in: status %d: %s", st, body)
		}
	})
}

// memHTTP is an HTTP child served in memory: its client's requests are handler
// calls, their bodies io.Pipes, so a bubble can wait on them. down makes every
// request fail as a server that is gone does; hang makes every request wait
// until its client gives up, as one that stopped answering does.
type memHTTP struct {
	h    http.Handler
	mu   sync.Mutex
	down bool
	hang bool
	// hangCalls makes only tools/call requests wait: a call that takes as long
	// as its timeout, while the child answers the rest.
	hangCalls bool
	// pingWaits are how long each ping that hung waited for its client to give up.
	pingWaits []time.Duration
}

func (m *memHTTP) set(down, hang bool) {
	m.mu.Lock()
	m.down, m.hang = down, hang
	m.mu.Unlock()
}

func (m *memHTTP) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	m.mu.Lock()
	down, hang := m.down, m.hang || m.hangCalls && bytes.Contains(body, []byte(`"method":"tools/call"`))
	m.mu.Unlock()
	switch {
	case hang:
		began := time.Now()
		<-r.Context().Done()
		if bytes.Contains(body, []byte(`"method":"ping"`)) {
			m.mu.Lock()
			m.pingWaits = append(m.pingWaits, time.Since(began))
			m.mu.Unlock()
		}
		return nil, r.Context().Err()
	case down:
		return nil, errors.New("connection refused (test)")
	}
	pr, pw := io.Pipe()
	w := &pipeResponse{header: http.Header{}, body: pw, ready: make(chan struct{})}
	go func() {
		m.h.ServeHTTP(w, r)
		w.WriteHeader(http.StatusOK) // if the handler wrote nothing
		pw.Close()
	}()
	select {
	case <-w.ready:
	case <-r.Context().Done():
		pr.Close()
		return nil, r.Context().Err()
	}
	return &http.Response{Status: http.StatusText(w.status), StatusCode: w.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: pr, Request: r, ContentLength: -1}, nil
}

// pipeResponse is a ResponseWriter whose body streams into a pipe.
type pipeResponse struct {
	header http.Header
	sent   http.Header // the header as of WriteHeader
	body   *io.PipeWriter
	status int
	once   sync.Once
	ready  chan struct{} // closed at WriteHeader
}

func (w *pipeResponse) Header() http.Header { return w.header }

func (w *pipeResponse) WriteHeader(status int) {
	w.once.Do(func() {
		w.status, w.sent = status, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeResponse) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

func (w *pipeResponse) Flush() {}

// memGateway starts a gateway whose one server, "web", is a test child served
// in memory, down from the start if down says so.
func memGateway(t *testing.T, down bool) (*Gateway, *memHTTP, *testChild) {
	t.Helper()
	return memGatewayConfig(t, down, "", "{}")
}

// memGatewayConfig is memGateway with more of web's entry (JSON fields, each
// followed by a comma) and the config's limits.
func memGatewayConfig(t *testing.T, down bool, web, limits string) (*Gateway, *memHTTP, *testChild) {
	t.Helper()
	tc := newTestChild("web")
	mem := &memHTTP{h: server.NewStreamableHTTPServer(tc.srv, server.WithStateful(true), server.WithStreamableHTTPProtocolVersions("2025-11-25")), down: down}
	cfg, err := config.Parse("test.json", []byte(`{"servers": {"web": {`+web+`"transport": "streamable-http", "url": "http://web.test/mcp"}},
		"limits": `+limits+`, "policy": {"agents": {"anonymous": {"allow": ["*"]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{HTTPClient: func(*config.Server) *http.Client { return &http.Client{Transport: mem} }})
	if err != nil {
		t.Fatal(err)
	}
	startGateway(t, g)
	return g, mem, tc
}

// TestPingOnFakeClock: a remote child is pinged every 20s (pingInterval), and
// one that stops answering is taken down when its ping has waited 10s
// (pingTimeout); it is reconnected 250ms (firstBackoff) later, once it answers
// again.
func TestPingOnFakeClock(t *testing.T) {
	t.Parallel()
	const pingInterval, pingTimeout, firstBackoff = 20 * time.Second, 10 * time.Second, 250 * time.Millisecond
	synctest.Test(t, func(t *testing.T) {
		g, mem, tc := memGateway(t, false)
		c := g.kids()["web"]
		synctest.Wait()
		if st := c.status(); st.State != StateReady {
			t.Fatalf("web: %s", st.Describe())
		}
		for i := range 3 {
			time.Sleep(pingInterval - time.Millisecond)
			synctest.Wait()
			if n := tc.count("ping"); n != i {
				t.Fatalf("%s before ping %d: %d pings", time.Millisecond, i+1, n)
			}
			time.Sleep(time.Millisecond)
			synctest.Wait()
			if n := tc.count("ping"); n != i+1 {
				t.Fatalf("at ping %d: %d pings", i+1, n)
			}
		}
		mem.set(false, true) // it stops answering
		time.Sleep(pingInterval + pingTimeout)
		synctest.Wait()
		mem.mu.Lock()
		waits := mem.pingWaits
		mem.mu.Unlock()
		if len(waits) != 1 || waits[0] != pingTimeout {
			t.Fatalf("the unanswered pings waited %v, want one of %s", waits, pingTimeout)
		}
		// The gateway tells the child it gave up on the ping (a notification
		// bounded by a second, which hangs too), then reconnects: the child
		// answers again from here on.
		mem.set(false, false)
		time.Sleep(time.Second)
		synctest.Wait()
		st := c.status()
		if st.State != StateRestarting || !strings.Contains(st.Error, "did not answer a ping") || st.Restarts != 1 {
			t.Fatalf("after the ping gave up: %s (restarts %d), want restarting, the ping named", st.Describe(), st.Restarts)
		}
		if got := time.Until(st.NextRetry); got != firstBackoff {
			t.Errorf("next try in %s, want %s", got, firstBackoff)
		}
		time.Sleep(firstBackoff)
		synctest.Wait()
		if st := c.status(); st.State != StateReady {
			t.Errorf("%s after: %s, want ready again", firstBackoff, st.Describe())
		}
	})
}
