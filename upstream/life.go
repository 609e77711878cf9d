package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nexus-mcp/nexus/oauth"
)

// State is where a supervised server is in its life.
type State string

// The states of a server.
const (
	StateConnecting State = "connecting" // first attempt under way
	StateReady      State = "ready"
	StateRetrying   State = "retrying"   // failed to start; tries again at NextRetry
	StateRestarting State = "restarting" // exited; starts again at NextRetry
	StateFailed     State = "failed"     // gave up; the next request, a reload or doctor --retry tries once more
	// StateNeedsLogin is a remote server whose authorization needs a person:
	// `nexus auth login NAME`, after which a reload (which the login signals),
	// the next request or doctor --retry tries again.
	StateNeedsLogin State = "needs-login"
	// StateIdle is a server not running because nothing needs it: its lists
	// are shown, and the next request that needs it starts it (Wake).
	StateIdle State = "idle"
)

// Supervised is what a Life needs of a connection. Its zero value is no
// connection; StderrTail must answer on it too (a start may fail before there
// is a connection).
type Supervised interface {
	comparable
	Done() <-chan struct{}
	Close()
	// Lost reports that the connection has ended (a session the server
	// forgot among the reasons): it is not handed out again.
	Lost() bool
	// Checking is closed once calls may go again on a connection whose broken
	// request is being checked, nil when none is (Doubts.Held).
	Checking() <-chan struct{}
	// Idle reports that no request is in flight on it.
	Idle() bool
	Err() error
	ExitReason() string
	StderrTail() string
}

// Checking is the connection's Doubts.Held: what a Life waits on before it
// hands the connection out.
func (c *Conn) Checking() <-chan struct{} { return c.Doubts.Held() }

// A Supervisee is the server a Life keeps running, as the gateway sees it: how
// it connects, what it does once up, and when a connection should stop. L is
// what a connection lists, kept beside it (Life.Current).
type Supervisee[C Supervised, L any] interface {
	// Restore, for a server that starts only when needed, shows the lists it
	// gave last run through Life.Set (as StateIdle) and reports whether it
	// did; the server then starts on the first Wake.
	Restore() bool
	// Connect opens a connection and lists what it serves. On failure the
	// connection may be non-zero, for its stderr.
	Connect(ctx context.Context) (C, L, error)
	// Up is told once a connection serves and its lists (derived) are the
	// Life's: what the server says about itself is kept, and the news logged.
	Up(ctx context.Context, cn C, lists L, took time.Duration)
	// Serve waits while cn serves, and says why it stopped.
	Serve(ctx context.Context, cn C, started time.Time) End
	// Keep keeps what cn listed for the next run, before it is retired or
	// the server stops.
	Keep(cn C, lists L)
	// Reconnected is told when a connection follows one that ended on its
	// own (not an idle stop, a lazy start or a recycling).
	Reconnected()
	// Drain is how long a retired connection's last requests may run.
	Drain() time.Duration
}

// End is why a connection stopped serving (Supervisee.Serve).
type End int

// The ends of a connection.
const (
	EndShutdown End = iota // the supervisor is stopping the server
	EndExited              // the connection ended on its own
	EndIdle                // unused for its idle timeout: the server goes idle
	EndRecycle             // past its maximum lifetime: the server restarts
)

func (e End) String() string {
	switch e {
	case EndShutdown:
		return "shutdown"
	case EndExited:
		return "exited"
	case EndIdle:
		return "idle"
	case EndRecycle:
		return "recycle"
	}
	return fmt.Sprintf("End(%d)", int(e))
}

// ErrRecycled is why a recycled server restarts.
var ErrRecycled = errors.New("restarting: it ran for its maxLifetime")

// A Life is one configured server's life: its state, its current connection
// and what that connection listed (L), the restarts and fresh attempts, and
// the waits of whoever needs the connection. The connection, its lists and the
// state change together under one lock, so whoever reads a connection reads
// its own lists (Current), and what the gateway derives from a listing
// (Derive) is derived as it becomes the server's. Run drives it; the requests
// that need the server wait in Await.
type Life[C Supervised, L any] struct {
	log *slog.Logger
	// oneAttempt gives up after the first failure and never tries again for
	// a request (a one-shot command's server).
	oneAttempt bool
	// changed is told after every Set, outside the lock.
	changed func()
	// derive completes the lists each Set is given, under the lock.
	derive func(*L)

	retryc   chan struct{} // one pending request for a fresh attempt
	wakec    chan struct{} // one pending request to start an idle server
	settled  chan struct{}
	settleMu sync.Once

	mu        sync.Mutex
	conn      C
	lists     L
	state     State
	err       error
	nextRetry time.Time
	restarts  int // exits followed by a restart
	attempts  int // fresh attempts made after giving up
	idleSince time.Time
	updated   chan struct{} // closed and replaced at every change of state
}

// LifeOptions configure a Life whose connections list L.
type LifeOptions[L any] struct {
	// Log gets the server's news (connected, failed, exited).
	Log *slog.Logger
	// OneAttempt gives up after the first failure, and a request does not
	// ask for another attempt.
	OneAttempt bool
	// Changed is told after each Set, outside the lock: the connection or
	// its lists changed, and the manifest is built again. (Update and the
	// states between connections tell no one: the caller of Update knows.)
	Changed func()
	// Derive completes the lists each Set is given, under the lock that
	// makes them the server's: what is derived from a listing under the
	// gateway's settings (its tools, under the config of now) is derived in
	// step with whatever changes those settings and the lists through Update,
	// never from a listing a moment before it was current.
	Derive func(*L)
}

// NewLife is a server connecting for the first time.
func NewLife[C Supervised, L any](opts LifeOptions[L]) *Life[C, L] {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	changed := opts.Changed
	if changed == nil {
		changed = func() {}
	}
	derive := opts.Derive
	if derive == nil {
		derive = func(*L) {}
	}
	return &Life[C, L]{log: log, oneAttempt: opts.OneAttempt, changed: changed, derive: derive, state: StateConnecting,
		retryc: make(chan struct{}, 1), wakec: make(chan struct{}, 1), settled: make(chan struct{}), updated: make(chan struct{})}
}

// Snapshot is a Life's state as a status page shows it, read at one moment.
type Snapshot[C Supervised, L any] struct {
	Conn      C // the connection serving, or the zero C
	Lists     L
	State     State
	Err       error
	NextRetry time.Time // when a retrying or restarting server tries again
	Restarts  int       // exits followed by a restart
	Attempts  int       // fresh attempts made after giving up
	IdleSince time.Time // when an idle server stopped; zero: not started yet
}

// Snapshot is the state now.
func (l *Life[C, L]) Snapshot() Snapshot[C, L] {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Snapshot[C, L]{Conn: l.conn, Lists: l.lists, State: l.state, Err: l.err, NextRetry: l.nextRetry, Restarts: l.restarts, Attempts: l.attempts, IdleSince: l.idleSince}
}

// Current is the connection serving, or the zero C, and its lists.
func (l *Life[C, L]) Current() (C, L) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conn, l.lists
}

// Lists is what the current connection (or the last run, while idle) listed.
func (l *Life[C, L]) Lists() L {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lists
}

// Set makes cn and its lists (completed by Derive) the server's, in state
// (with err, and when it tries again), and tells whoever waits on a change.
func (l *Life[C, L]) Set(cn C, lists L, state State, err error, next time.Time) {
	l.mu.Lock()
	l.derive(&lists)
	l.conn, l.lists, l.state, l.err, l.nextRetry = cn, lists, state, err, next
	l.update()
	l.mu.Unlock()
	l.changed()
}

// Update changes the lists in place while cn is the connection serving, and
// reports whether it was (the lists of a connection since replaced are not
// the server's). A zero cn changes them whatever serves.
func (l *Life[C, L]) Update(cn C, change func(*L)) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	var none C
	if cn != none && l.conn != cn {
		return false
	}
	change(&l.lists)
	return true
}

// setState changes the state (and its error) and keeps the lists: an idle
// server's stay shown.
func (l *Life[C, L]) setState(state State, err error) {
	l.mu.Lock()
	l.state, l.err, l.nextRetry = state, err, time.Time{}
	l.update()
	l.mu.Unlock()
}

// update wakes whoever waits on a change; l.mu is held.
func (l *Life[C, L]) update() {
	close(l.updated)
	l.updated = make(chan struct{})
}

// Updated is closed at the next change of state (or of the connection).
func (l *Life[C, L]) Updated() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.updated
}

// Settled is closed once the first attempt is over (and when Run returns).
func (l *Life[C, L]) Settled() <-chan struct{} { return l.settled }

func (l *Life[C, L]) settle() { l.settleMu.Do(func() { close(l.settled) }) }

// Retry asks a server that gave up for one fresh attempt; one that has not
// given up ignores it. Requests made while an attempt is pending or under way
// share it.
func (l *Life[C, L]) Retry() {
	select {
	case l.retryc <- struct{}{}:
	default:
	}
}

// Wake asks an idle server to start.
func (l *Life[C, L]) Wake() {
	select {
	case l.wakec <- struct{}{}:
	default:
	}
}

// Await returns the connection serving, waiting while the server connects,
// retries or restarts (a request made during a restart waits for it rather
// than failing) and while calls are held back on it; an idle server is woken,
// and one that gave up makes one fresh attempt, which the request waits for.
// It never returns old: a request the server refused for want of a session
// waits for the connection that replaces it. ok is false when that attempt
// failed too or ctx ended first.
func (l *Life[C, L]) Await(ctx context.Context, old C) (cn C, ok bool) {
	var none C
	asked := -1 // the fresh attempts made before this request asked for one
	for {
		l.mu.Lock()
		cn, state, updated, attempts := l.conn, l.state, l.updated, l.attempts
		l.mu.Unlock()
		if cn != none && cn != old && !cn.Lost() {
			held := cn.Checking()
			if held == nil {
				return cn, true
			}
			select {
			case <-held:
			case <-cn.Done():
			case <-ctx.Done():
				return none, false
			}
			continue
		}
		if state == StateIdle {
			l.Wake()
		}
		if state == StateFailed && l.oneAttempt {
			return none, false // a one-shot command's one attempt was made moments ago
		}
		if state == StateFailed || state == StateNeedsLogin {
			if asked >= 0 && attempts > asked {
				return none, false // the attempt made for this request failed too
			}
			if asked < 0 {
				asked = attempts
				l.Retry()
			}
		}
		select {
		case <-updated:
		case <-ctx.Done():
			return none, false
		}
	}
}

// Run keeps the server connected until ctx ends, trying again as Restarts
// says: after MaxFailures failures in a row it gives up (StateFailed) until
// asked for a fresh attempt (Retry); one that succeeds starts the count
// afresh, one that fails leaves it failed again. A server that needs a login
// waits for a Retry at once: trying again cannot help until a person logs in.
func (l *Life[C, L]) Run(ctx context.Context, s Supervisee[C, L]) {
	defer l.settle()
	// woke says the next connection follows an idle stop, a lazy start or a
	// recycling: not a crash.
	woke := false
	if s.Restore() {
		if !l.idle(ctx, time.Time{}) {
			return
		}
		woke = true
	}
	var restarts Restarts
	connections := 0
	for ctx.Err() == nil {
		started := time.Now()
		cn, lists, err := s.Connect(ctx)
		if err != nil {
			if ctx.Err() != nil || !l.startFailed(ctx, &restarts, cn, err) {
				return
			}
			continue
		}
		if connections++; connections > 1 && !woke {
			s.Reconnected()
		}
		woke = false
		restarts.Connected()
		l.Set(cn, lists, StateReady, nil, time.Time{})
		s.Up(ctx, cn, l.Lists(), time.Since(started))
		l.settle()
		switch s.Serve(ctx, cn, started) {
		case EndShutdown:
			s.Keep(cn, l.Lists())
			cn.Close()
			return
		case EndIdle:
			l.retire(ctx, s, cn, StateIdle, nil)
			if !l.idle(ctx, time.Now()) {
				return
			}
			woke = true
			restarts.Reset()
		case EndRecycle:
			l.retire(ctx, s, cn, StateRestarting, ErrRecycled)
			woke = true
			restarts.Reset()
		default:
			if !l.exited(ctx, &restarts, cn, started) {
				return
			}
		}
	}
}

// startFailed records a connection that failed to start with err, then waits
// as restarts says: the backoff, or, once it gave up (or needs a login), a
// request for a fresh attempt. It reports false when ctx ended first.
func (l *Life[C, L]) startFailed(ctx context.Context, restarts *Restarts, cn C, err error) bool {
	if le := (*oauth.LoginError)(nil); errors.As(err, &le) {
		// Wait for a reload (the login signals one), a request or doctor
		// --retry.
		l.log.Warn("the server needs a login", "fix", le.Hint())
		return l.waitRetry(ctx, StateNeedsLogin, le)
	}
	again := restarts.Failed(0)
	if l.oneAttempt {
		l.log.Error("server failed to start", "err", err, "stderr", cn.StderrTail())
		return l.waitRetry(ctx, StateFailed, err)
	}
	l.log.Error("child failed to start", "attempt", restarts.Failures(), "err", err, "stderr", cn.StderrTail())
	if !again {
		why := fmt.Errorf("gave up after %d attempts: %w", restarts.Failures(), err)
		if restarts.WasFresh() {
			why = fmt.Errorf("a fresh attempt failed too: %w", err)
		}
		if !l.waitRetry(ctx, StateFailed, why) {
			return false
		}
		restarts.Fresh()
		return true
	}
	var none C
	var noLists L
	l.Set(none, noLists, StateRetrying, err, time.Now().Add(restarts.Backoff()))
	l.settle()
	if !sleep(ctx, restarts.Backoff()) {
		return false
	}
	restarts.Waited()
	return true
}

// exited records a connection started then that ended on its own, then waits as
// restarts says: the backoff (none for a server that forgot the session), or,
// once it gave up, a request for a fresh attempt. It reports false when ctx
// ended first, or had ended already: a connection ended by the supervisor's
// stop is no crash.
func (l *Life[C, L]) exited(ctx context.Context, restarts *Restarts, cn C, started time.Time) bool {
	cn.Close()
	if ctx.Err() != nil {
		return false
	}
	up := time.Since(started)
	again := restarts.Failed(up)
	l.log.Warn("child exited", "up", up.Round(time.Millisecond), "reason", cn.ExitReason(), "stderr", cn.StderrTail())
	if !again {
		if !l.waitRetry(ctx, StateFailed, fmt.Errorf("exited %d times in a row; gave up (see the log for its stderr)", restarts.Failures())) {
			return false
		}
		restarts.Fresh()
		return true
	}
	l.mu.Lock()
	l.restarts++
	l.mu.Unlock()
	var none C
	var noLists L
	l.Set(none, noLists, StateRestarting, errors.New(cn.ExitReason()), time.Now().Add(restarts.Backoff()))
	if errors.Is(cn.Err(), ErrSessionLost) {
		// The server is up but forgot the session (it restarted): a new
		// session at once, so the calls waiting to be sent again go soon.
		return true
	}
	if !sleep(ctx, restarts.Backoff()) {
		return false
	}
	restarts.Waited()
	return true
}

// waitRetry records state (StateFailed or StateNeedsLogin) with err, then
// waits until someone asks for a fresh attempt. It reports false when ctx
// ended first.
func (l *Life[C, L]) waitRetry(ctx context.Context, state State, err error) bool {
	var none C
	var noLists L
	// A request left from before it gave up is not one for a fresh attempt.
	select {
	case <-l.retryc:
	default:
	}
	l.Set(none, noLists, state, err, time.Time{})
	l.settle()
	select {
	case <-ctx.Done():
		return false
	case <-l.retryc:
	}
	l.mu.Lock()
	l.attempts++
	l.mu.Unlock()
	l.Set(none, noLists, StateRetrying, err, time.Time{})
	return true
}

// idle keeps the server idle (its lists shown, no connection) until a
// request needs it, and reports false when ctx ended first. stopped is when
// it was stopped, zero for a server not started yet.
func (l *Life[C, L]) idle(ctx context.Context, stopped time.Time) bool {
	l.mu.Lock()
	if l.idleSince.IsZero() || stopped.IsZero() {
		l.idleSince = stopped
	}
	l.mu.Unlock()
	l.setState(StateIdle, nil)
	l.settle()
	l.log.Debug("server idle", "stopped", !stopped.IsZero())
	// A wake already waiting is a request that came as the server stopped: it
	// starts again at once.
	select {
	case <-ctx.Done():
		return false
	case <-l.wakec:
	}
	l.setState(StateConnecting, nil) // its lists stay shown while it starts
	return true
}

// retire takes cn out of service (state is what the server is meanwhile),
// lets a request that took it just before finish, up to Drain, and closes it.
func (l *Life[C, L]) retire(ctx context.Context, s Supervisee[C, L], cn C, state State, why error) {
	s.Keep(cn, l.Lists()) // with what was learnt since, as whether it asks for roots
	var none C
	l.mu.Lock()
	l.conn = none
	if state == StateIdle {
		l.idleSince = time.Now()
	}
	l.state, l.err, l.nextRetry = state, why, time.Time{}
	l.update()
	l.mu.Unlock()
	deadline := time.Now().Add(s.Drain())
	for !cn.Idle() && time.Now().Before(deadline) {
		if !sleep(ctx, 10*time.Millisecond) {
			break
		}
	}
	cn.Close()
	<-cn.Done()
}

// sleep waits d, and reports false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
