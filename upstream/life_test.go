package upstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nexus-mcp/nexus/oauth"
)

// testConn is a real connection with no transport (Conn), numbered in the
// order the server made it: a test ends it (Lose), keeps a request in flight
// (Begin) or holds calls back (Doubts) as the gateway would.
type testConn struct {
	*Conn
	id int
}

// StderrTail answers on no connection too, as Supervised asks.
func (c *testConn) StderrTail() string {
	if c == nil {
		return ""
	}
	return c.Conn.StderrTail()
}

// testServer is a Supervisee whose connections fail as told, and which keeps
// a record of what it was told.
type testServer struct {
	life    *Life[*testConn, string]
	restore bool
	ends    chan End // what Serve returns before the connection ends
	// exitsAtShutdown makes Serve see the connection's end, not the
	// shutdown, when Run's context ends (a process killed with it).
	exitsAtShutdown bool
	// deaf makes Serve miss a connection's end: it stays current, ended,
	// until ends says otherwise.
	deaf bool

	mu     sync.Mutex
	fail   []error // what the next connections fail with, in order; then they succeed
	conns  []*testConn
	events []string
}

func newTestServer(opts LifeOptions[string], fail ...error) *testServer {
	s := &testServer{fail: fail, ends: make(chan End, 1)}
	s.life = NewLife[*testConn, string](opts)
	return s
}

func (s *testServer) note(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, fmt.Sprintf(format, args...))
}

func (s *testServer) record() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

// conn is the nth connection made (from 1).
func (s *testServer) conn(t *testing.T, n int) *testConn {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.conns) < n {
		t.Fatalf("%d connections made, not %d", len(s.conns), n)
	}
	return s.conns[n-1]
}

func (s *testServer) Restore() bool {
	if s.restore {
		s.life.Set(nil, "kept", StateIdle, nil, time.Time{})
		s.note("restore")
	}
	return s.restore
}

func (s *testServer) Connect(ctx context.Context) (*testConn, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.fail) > 0 {
		err := s.fail[0]
		s.fail = s.fail[1:]
		s.events = append(s.events, "connect failed")
		return nil, "", err
	}
	cn := &testConn{Conn: NewConn(), id: len(s.conns) + 1}
	s.conns = append(s.conns, cn)
	s.events = append(s.events, fmt.Sprintf("connect %d", cn.id))
	return cn, fmt.Sprintf("lists of %d", cn.id), nil
}

func (s *testServer) Up(_ context.Context, cn *testConn, lists string, _ time.Duration) {
	s.note("up %d with %s", cn.id, lists)
}

func (s *testServer) Serve(ctx context.Context, cn *testConn, _ time.Time) End {
	done := cn.Done()
	if s.deaf {
		done = nil
	}
	select {
	case <-ctx.Done():
		if s.exitsAtShutdown {
			cn.Lose(errors.New("killed"))
			return EndExited
		}
		return EndShutdown
	case <-done:
		return EndExited
	case e := <-s.ends:
		return e
	}
}

func (s *testServer) Keep(cn *testConn, lists string) { s.note("keep %d with %s", cn.id, lists) }
func (s *testServer) Reconnected()                    { s.note("reconnected") }
func (s *testServer) Drain() time.Duration            { return time.Second }

// run runs the server's Life until the test ends.
func (s *testServer) run(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.life.Run(ctx, s)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// connected is a server (set up as tune says) run until the test ends, and
// its first connection: call it in a synctest bubble.
func connected(t *testing.T, tune ...func(*testServer)) (*testServer, *testConn) {
	t.Helper()
	s := newTestServer(LifeOptions[string]{})
	for _, f := range tune {
		f(s)
	}
	s.run(t)
	synctest.Wait()
	return s, s.conn(t, 1)
}

// checkLife fails unless the Life is in state, with the error (a part of it)
// and the connection and lists it has.
func checkLife(t *testing.T, s *testServer, state State, err string, conn int, lists string) {
	t.Helper()
	snap := s.life.Snapshot()
	gotErr := ""
	if snap.Err != nil {
		gotErr = snap.Err.Error()
	}
	if snap.State != state || !strings.Contains(gotErr, err) || (err == "") != (gotErr == "") {
		t.Errorf("state %s (err %q), want %s (err %q)", snap.State, gotErr, state, err)
	}
	cn, l := s.life.Current()
	got := 0
	if cn != nil {
		got = cn.id
	}
	if got != conn || l != lists {
		t.Errorf("connection %d with %q, want %d with %q", got, l, conn, lists)
	}
}

func TestLifeConnects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		changes := 0
		s := newTestServer(LifeOptions[string]{Changed: func() { changes++ }})
		checkLife(t, s, StateConnecting, "", 0, "")
		s.run(t)
		<-s.life.Settled()
		synctest.Wait()
		checkLife(t, s, StateReady, "", 1, "lists of 1")
		if changes != 1 {
			t.Errorf("told of %d changes, want 1", changes)
		}
		if want := []string{"connect 1", "up 1 with lists of 1"}; !slices.Equal(s.record(), want) {
			t.Errorf("events %q, want %q", s.record(), want)
		}
	})
}

func TestLifeRestarts(t *testing.T) {
	tests := []struct {
		name string
		// end ends the first connection.
		end func(s *testServer, cn *testConn)
		// state and err are the Life's at once after that end.
		state State
		err   string
		// wait is how long until the second connection is made.
		wait time.Duration
		// restarts counts the exits followed by a restart.
		restarts int
		events   []string
	}{
		{
			name: "an exit restarts it after the backoff",
			end:  func(_ *testServer, cn *testConn) { cn.Lose(errors.New("exit status 1")) },
			// Restarting, with the exit's reason.
			state: StateRestarting, err: "exit status 1", wait: FirstBackoff, restarts: 1,
			events: []string{"connect 1", "up 1 with lists of 1", "connect 2", "reconnected", "up 2 with lists of 2"},
		},
		{
			name: "a forgotten session reconnects at once",
			end:  func(_ *testServer, cn *testConn) { cn.Lose(fmt.Errorf("call: %w", ErrSessionLost)) },
			// Already connected again: no wait.
			state: StateReady, wait: 0, restarts: 1,
			events: []string{"connect 1", "up 1 with lists of 1", "connect 2", "reconnected", "up 2 with lists of 2"},
		},
		{
			name: "a recycled connection is kept, closed and replaced at once, not counted as an exit",
			end:  func(s *testServer, _ *testConn) { s.ends <- EndRecycle },
			// Connected again before the test looks.
			state: StateReady, wait: 0,
			events: []string{"connect 1", "up 1 with lists of 1", "keep 1 with lists of 1", "connect 2", "up 2 with lists of 2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, first := connected(t)
				start := time.Now()
				tt.end(s, first)
				synctest.Wait()
				if tt.state != StateReady {
					checkLife(t, s, tt.state, tt.err, 0, "")
					if next := s.life.Snapshot().NextRetry; !next.Equal(start.Add(tt.wait)) {
						t.Errorf("next try at %v, want %v", next.Sub(start), tt.wait)
					}
				}
				cn, ok := s.life.Await(t.Context(), nil)
				if !ok || cn.id != 2 {
					t.Fatalf("Await: connection %v, %v; want the second", cn, ok)
				}
				if waited := time.Since(start); waited != tt.wait {
					t.Errorf("connected again after %s, want %s", waited, tt.wait)
				}
				if first.Err() == nil && !isClosed(first.Done()) {
					t.Error("the first connection is still open")
				}
				checkLife(t, s, StateReady, "", 2, "lists of 2")
				if got := s.life.Snapshot().Restarts; got != tt.restarts {
					t.Errorf("%d restarts, want %d", got, tt.restarts)
				}
				if !slices.Equal(s.record(), tt.events) {
					t.Errorf("events %q, want %q", s.record(), tt.events)
				}
			})
		})
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func TestLifeGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refused := errors.New("connection refused")
		fail := make([]error, MaxFailures+1)
		for i := range fail {
			fail[i] = refused
		}
		s := newTestServer(LifeOptions[string]{}, fail...)
		s.run(t)
		<-s.life.Settled()
		if snap := s.life.Snapshot(); snap.State != StateRetrying || snap.NextRetry.IsZero() {
			t.Errorf("after the first failure: %s, next try at %v; want retrying with a next try", snap.State, snap.NextRetry)
		}
		s.life.Retry() // asked before it gave up: no fresh attempt after

		time.Sleep(MaxBackoff * MaxFailures) // every backoff spent
		synctest.Wait()
		checkLife(t, s, StateFailed, fmt.Sprintf("gave up after %d attempts: connection refused", MaxFailures), 0, "")
		if n := len(s.record()); n != MaxFailures {
			t.Errorf("%d attempts before giving up, want %d", n, MaxFailures)
		}

		// A request asks for one fresh attempt, which fails too: it is told so.
		if cn, ok := s.life.Await(t.Context(), nil); ok {
			t.Fatalf("Await gave connection %d after the fresh attempt failed", cn.id)
		}
		checkLife(t, s, StateFailed, "a fresh attempt failed too: connection refused", 0, "")
		if got := s.life.Snapshot().Attempts; got != 1 {
			t.Errorf("%d fresh attempts, want 1", got)
		}

		// The next request's fresh attempt succeeds.
		cn, ok := s.life.Await(t.Context(), nil)
		if !ok || cn.id != 1 {
			t.Fatalf("Await: %v, %v; want the first connection", cn, ok)
		}
		if got := s.life.Snapshot().Attempts; got != 2 {
			t.Errorf("%d fresh attempts, want 2", got)
		}
	})
}

func TestLifeNeedsLogin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(LifeOptions[string]{}, &oauth.LoginError{Server: "web"})
		s.run(t)
		<-s.life.Settled()
		time.Sleep(MaxBackoff) // no retry comes by itself
		synctest.Wait()
		checkLife(t, s, StateNeedsLogin, "run nexus auth login web", 0, "")
		if got := s.record(); len(got) != 1 {
			t.Errorf("events %q: a server that needs a login was tried again unasked", got)
		}
		// After the login, a request's attempt succeeds.
		if cn, ok := s.life.Await(t.Context(), nil); !ok || cn.id != 1 {
			t.Fatalf("Await: %v, %v; want the first connection", cn, ok)
		}
	})
}

func TestLifeOneAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(LifeOptions[string]{OneAttempt: true}, errors.New("not installed"))
		s.run(t)
		<-s.life.Settled()
		checkLife(t, s, StateFailed, "not installed", 0, "")
		if cn, ok := s.life.Await(t.Context(), nil); ok {
			t.Errorf("Await gave connection %d; a one-shot server is not tried again", cn.id)
		}
		synctest.Wait()
		if got := s.record(); len(got) != 1 {
			t.Errorf("events %q, want the one attempt", got)
		}
	})
}

func TestLifeIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(LifeOptions[string]{})
		s.restore = true
		s.run(t)
		<-s.life.Settled()
		checkLife(t, s, StateIdle, "", 0, "kept")
		if since := s.life.Snapshot().IdleSince; !since.IsZero() {
			t.Errorf("a server never started idle since %v", since)
		}

		// A request starts it.
		if cn, ok := s.life.Await(t.Context(), nil); !ok || cn.id != 1 {
			t.Fatalf("Await: %v, %v; want the first connection", cn, ok)
		}
		checkLife(t, s, StateReady, "", 1, "lists of 1")

		// Unused, it stops: its lists stay shown.
		s.ends <- EndIdle
		synctest.Wait()
		checkLife(t, s, StateIdle, "", 0, "lists of 1")
		if since := s.life.Snapshot().IdleSince; since.IsZero() {
			t.Error("a stopped server has no idle time")
		}
		if !isClosed(s.conn(t, 1).Done()) {
			t.Error("the idle connection was not closed")
		}

		// The next request starts it again; that is no reconnection.
		if cn, ok := s.life.Await(t.Context(), nil); !ok || cn.id != 2 {
			t.Fatalf("Await: %v, %v; want the second connection", cn, ok)
		}
		// Its next stop is the one it is idle since.
		first := s.life.Snapshot().IdleSince
		time.Sleep(time.Minute)
		s.ends <- EndIdle
		synctest.Wait()
		if since := s.life.Snapshot().IdleSince; since.Sub(first) != time.Minute {
			t.Errorf("idle since %v after the second stop, want a minute after the first", since.Sub(first))
		}
		want := []string{"restore", "connect 1", "up 1 with lists of 1", "keep 1 with lists of 1", "connect 2", "up 2 with lists of 2",
			"keep 2 with lists of 2"}
		if !slices.Equal(s.record(), want) {
			t.Errorf("events %q, want %q", s.record(), want)
		}
	})
}

func TestLifeAwait(t *testing.T) {
	tests := []struct {
		name string
		// hold makes the first connection one whose calls are held back.
		hold bool
		// old is the connection Await must not return.
		old bool
		// ended ends the first connection before Await, unseen by Serve.
		ended bool
		// release lets Await go on: the held calls, or the old connection's end.
		release func(s *testServer, cn *testConn)
		want    int
	}{
		{name: "a ready connection", want: 1},
		{name: "held calls wait for the check", hold: true,
			release: func(_ *testServer, cn *testConn) { cn.Doubts.Settle(cn.Doubts.Sending()) }, want: 1},
		{name: "held calls of a connection that ends wait for the next", hold: true,
			release: func(_ *testServer, cn *testConn) { cn.Lose(errors.New("exit status 1")) }, want: 2},
		{name: "never the old connection, though it serves", old: true,
			release: func(s *testServer, _ *testConn) { s.ends <- EndRecycle }, want: 2},
		{name: "never a connection that ended, before its end is seen", ended: true,
			release: func(s *testServer, _ *testConn) { s.ends <- EndExited }, want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, first := connected(t, func(s *testServer) { s.deaf = tt.ended })
				if tt.hold {
					first.Doubts.Raise()
				}
				if tt.ended {
					first.Lose(errors.New("exit status 1"))
				}
				var old *testConn
				if tt.old {
					old = first
				}
				got := make(chan *testConn, 1)
				go func() {
					cn, _ := s.life.Await(t.Context(), old)
					got <- cn
				}()
				synctest.Wait()
				if tt.release != nil {
					if len(got) > 0 {
						t.Fatal("Await returned before it should")
					}
					tt.release(s, first)
				}
				if cn := <-got; cn == nil || cn.id != tt.want {
					t.Errorf("Await gave %v, want connection %d", cn, tt.want)
				}
			})
		})
	}

	t.Run("a request that ends first", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := newTestServer(LifeOptions[string]{}) // never run: it stays connecting
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			if cn, ok := s.life.Await(ctx, nil); ok || cn != nil {
				t.Errorf("Await: %v, %v; want nothing", cn, ok)
			}
		})
	})
}

// TestLifeDerives: what Derive makes of a listing is made as the listing
// becomes the server's, every time, and seen by Up.
func TestLifeDerives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		suffix := "under the first settings"
		s := newTestServer(LifeOptions[string]{Derive: func(l *string) {
			if *l != "" {
				*l += " " + suffix
			}
		}})
		s.run(t)
		synctest.Wait()
		checkLife(t, s, StateReady, "", 1, "lists of 1 under the first settings")
		suffix = "under the next"
		s.conn(t, 1).Lose(fmt.Errorf("call: %w", ErrSessionLost))
		synctest.Wait()
		checkLife(t, s, StateReady, "", 2, "lists of 2 under the next")
		want := []string{"connect 1", "up 1 with lists of 1 under the first settings", "connect 2", "reconnected", "up 2 with lists of 2 under the next"}
		if !slices.Equal(s.record(), want) {
			t.Errorf("events %q, want %q", s.record(), want)
		}
	})
}

func TestLifeUpdate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, first := connected(t)
		tests := []struct {
			name  string
			cn    *testConn
			ok    bool
			lists string
		}{
			{name: "the connection serving", cn: first, ok: true, lists: "relisted"},
			{name: "another connection", cn: &testConn{Conn: NewConn()}, ok: false, lists: "relisted"},
			{name: "whatever serves", cn: nil, ok: true, lists: "reconfigured"},
		}
		for _, tt := range tests {
			next := tt.lists
			if ok := s.life.Update(tt.cn, func(l *string) { *l = next }); ok != tt.ok {
				t.Errorf("%s: Update reported %v", tt.name, ok)
			}
			if got := s.life.Lists(); got != tt.lists {
				t.Errorf("%s: lists %q, want %q", tt.name, got, tt.lists)
			}
		}
	})
}

// TestLifeDrains: a connection retired (idle, recycled) lets the request that
// took it just before finish, up to Drain, before it is closed.
func TestLifeDrains(t *testing.T) {
	tests := []struct {
		name string
		// done is when the request in flight ends; 0: never.
		done time.Duration
		// closed is when the connection is closed.
		closed time.Duration
	}{
		{name: "a request that ends", done: 300 * time.Millisecond, closed: 300 * time.Millisecond},
		{name: "a request that never ends", closed: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, cn := connected(t)
				finish := cn.Begin() // a request in flight
				if tt.done > 0 {
					time.AfterFunc(tt.done, finish)
				}
				start := time.Now()
				s.ends <- EndIdle
				synctest.Wait()
				if got, _ := s.life.Current(); got != nil {
					t.Errorf("connection %d still serves once retired", got.id)
				}
				<-cn.Done()
				// Closed at the first check after the request ended.
				if took := time.Since(start); took < tt.closed || took > tt.closed+10*time.Millisecond {
					t.Errorf("closed after %s, want %s", took, tt.closed)
				}
			})
		})
	}
}

// TestLifeForgivesAfterStop: failures in a row before an idle stop or a
// recycling are not counted after it: one exit more restarts the server
// rather than giving up.
func TestLifeForgivesAfterStop(t *testing.T) {
	for _, stop := range []End{EndIdle, EndRecycle} {
		t.Run(fmt.Sprint(stop), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newTestServer(LifeOptions[string]{})
				s.run(t)
				for i := 1; i < MaxFailures; i++ {
					cn, ok := s.life.Await(t.Context(), nil)
					if !ok {
						t.Fatalf("no connection after %d exits", i-1)
					}
					cn.Lose(errors.New("exit status 1"))
					synctest.Wait() // the exit seen: restarting
				}
				cn, ok := s.life.Await(t.Context(), nil)
				if !ok {
					t.Fatal("no connection after the exits")
				}
				s.ends <- stop
				synctest.Wait()
				next, ok := s.life.Await(t.Context(), nil)
				if !ok || next == cn {
					t.Fatalf("Await: %v, %v; want a connection after the stop", next, ok)
				}
				next.Lose(errors.New("exit status 1"))
				synctest.Wait()
				if st := s.life.Snapshot().State; st != StateRestarting {
					t.Errorf("after one exit more: %s, want restarting", st)
				}
				if _, ok := s.life.Await(t.Context(), nil); !ok {
					t.Fatal("no connection after that exit")
				}
				connects, reconnects := 0, 0
				for _, e := range s.record() {
					switch {
					case strings.HasPrefix(e, "connect "):
						connects++
					case e == "reconnected":
						reconnects++
					}
				}
				// The connection after the stop is no reconnection; the one
				// after its exit is.
				if connects != MaxFailures+2 || reconnects != MaxFailures {
					t.Errorf("%d connections, %d of them reconnections; want %d, %d", connects, reconnects, MaxFailures+2, MaxFailures)
				}
			})
		})
	}
}

// TestLifeShutdown: Run returns once its context ends, the connection closed
// and its lists kept; a connection that ends with it (its process killed) is
// no exit: no restart is counted or made.
func TestLifeShutdown(t *testing.T) {
	tests := []struct {
		name   string
		kills  bool // the shutdown ends the connection before Serve sees it
		events []string
	}{
		{name: "the lists kept", events: []string{"connect 1", "up 1 with lists of 1", "keep 1 with lists of 1"}},
		{name: "a process killed with it", kills: true, events: []string{"connect 1", "up 1 with lists of 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newTestServer(LifeOptions[string]{})
				s.exitsAtShutdown = tt.kills
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() {
					defer close(done)
					s.life.Run(ctx, s)
				}()
				synctest.Wait()
				cancel()
				<-done
				if !isClosed(s.conn(t, 1).Done()) {
					t.Error("the connection is still open after Run returned")
				}
				if snap := s.life.Snapshot(); snap.Restarts != 0 || snap.State != StateReady {
					t.Errorf("%s with %d restarts after a shutdown, want ready with none", snap.State, snap.Restarts)
				}
				if !slices.Equal(s.record(), tt.events) {
					t.Errorf("events %q, want %q", s.record(), tt.events)
				}
			})
		})
	}
}
