package aggregation

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nexus-mcp/nexus/config"
)

// The tests in this file run on synctest's fake clock, with the real durations:
// the clock moves only when every goroutine of the bubble is durably blocked, so
// what a child or session does over an hour takes no time at all. Nothing in a
// bubble may wait on real I/O (a pipe to a process, a socket), which is not
// durably blocking: the children here fail to start (exec finds no program, so no
// process and no pipe outlives the attempt), and HTTP goes through handler calls.

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

// TestChildBackoffSeries: a child that cannot start is tried maxFailures times,
// the waits between tries doubling from firstBackoff, its state saying when the
// next try is; then it gives up and waits, however long, until a call asks for one
// fresh attempt. The real constants, on the fake clock.
func TestChildBackoffSeries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := &attemptClock{start: time.Now()}
		g := comebackGateway(t, `{"gone": {"command": "`+missingCommand+`"}}`,
			func(kids map[string]*child) { kids["gone"].beforeStart = clock.beforeStart })
		c := g.kids()["gone"]

		// The waits the policy promises: 250ms, 500ms, ... doubling, one fewer
		// than the attempts.
		var want []time.Duration
		var at, wait time.Duration = 0, firstBackoff
		for range maxFailures {
			want = append(want, at)
			at += wait
			wait = min(wait*2, maxBackoff)
		}
		for i := range maxFailures - 1 {
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
		if got := clock.attempts(); !equalDurations(got, want) {
			t.Fatalf("attempts at %v, want %v", got, want)
		}
		st := c.status()
		if st.State != StateFailed || !strings.Contains(st.Error, "gave up after 8 attempts") || !st.NextRetry.IsZero() {
			t.Fatalf("after %d attempts: %s %q (next try %v), want failed, given up", maxFailures, st.State, st.Error, st.NextRetry)
		}

		// A failed child stays failed: no timer brings it back.
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		if got := len(clock.attempts()); got != maxFailures {
			t.Fatalf("a day after giving up: %d attempts, want %d", got, maxFailures)
		}
		// A call makes one fresh attempt, waits for it, and says why it failed.
		if got := callText(t, g, "gone__anything", `{}`); !strings.Contains(got, "is not running (failed") {
			t.Errorf("a call to the failed child: %s", got)
		}
		if got := len(clock.attempts()); got != maxFailures+1 {
			t.Errorf("after a call: %d attempts, want %d (one fresh)", got, maxFailures+1)
		}
		if st := c.status(); st.State != StateFailed || !strings.Contains(st.Error, "a fresh attempt failed too") {
			t.Errorf("after the fresh attempt: %s %q", st.State, st.Error)
		}
	})
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
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
// request is answered 404; one that is used lives on however long. The sweep
// looks every quarter of the timeout, so a session ends within 75 minutes of
// its last request, never before the hour.
func TestHTTPSessionIdleTimeout(t *testing.T) {
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
				g := comebackGateway(t, `{}`, nil)
				c := &handlerClient{t: t, h: g.HTTPHandler(HTTPOptions{})}
				c.initialize()
				var ended <-chan struct{}
				if tt.stream {
					ended = c.stream()
				}
				// Used every 59 minutes, for five hours: it lives.
				for i := range 5 {
					time.Sleep(59 * time.Minute)
					if st, body := c.post(`{"jsonrpc":"2.0","id":2,"method":"ping"}`); st != http.StatusOK {
						t.Fatalf("a request %d×59m in: status %d: %s", i+1, st, body)
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
