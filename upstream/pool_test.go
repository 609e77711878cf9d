package upstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// pooled is a connection as a pool's user keeps it: a *Conn and a name.
type pooled struct {
	*Conn
	name string
}

// opener counts the connections it opens, and fails while fail is set.
type opener struct {
	opened atomic.Int32
	fail   atomic.Bool
	hold   chan struct{} // when set, an opening waits for it
	closed chan *pooled  // told every connection Closed reports
}

func newOpener() *opener { return &opener{closed: make(chan *pooled, 16)} }

// opening is o's Opening for a session of agent, bounded by share and limit.
func (o *opener) opening(session context.Context, agent string, share, limit int) func() Opening[*pooled] {
	return func() Opening[*pooled] { return o.open(session, agent, share, limit) }
}

func (o *opener) open(session context.Context, agent string, share, limit int) Opening[*pooled] {
	return Opening[*pooled]{
		Agent: agent, Share: share, Limit: limit, Session: session,
		Open: func(ctx context.Context) (*pooled, error) {
			if o.hold != nil {
				select {
				case <-o.hold:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			n := o.opened.Add(1)
			if o.fail.Load() {
				return nil, fmt.Errorf("opening %d failed", n)
			}
			return &pooled{Conn: NewConn(), name: fmt.Sprint(agent, n)}, nil
		},
		Closed: func(cn *pooled) { o.closed <- cn },
	}
}

// tick separates two uses in time on any clock the tests run on.
const tick = 20 * time.Millisecond

func startedPool(t *testing.T, evicted func(string)) *Pool[string, *pooled] {
	t.Helper()
	p := NewPool[string, *pooled](evicted)
	run, stop := context.WithCancel(context.Background())
	p.Start(run)
	t.Cleanup(func() { stop(); p.Wait() })
	return p
}

// TestPoolOpensOnce: however many requests of a session ask at once, one
// connection is opened, and every one of them gets it.
func TestPoolOpensOnce(t *testing.T) {
	p, o := startedPool(t, nil), newOpener()
	o.hold = make(chan struct{})
	got := make([]*pooled, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			cn, err := p.Get(t.Context(), "s1", o.opening(t.Context(), "a", 4, 4))
			if err != nil {
				t.Error(err)
			}
			got[i] = cn
		})
	}
	time.Sleep(10 * time.Millisecond) // let them all wait on the opening
	close(o.hold)
	wg.Wait()
	if n := o.opened.Load(); n != 1 {
		t.Fatalf("opened %d connections for one session, want 1", n)
	}
	for i, cn := range got {
		if cn != got[0] {
			t.Errorf("request %d got %v, the first %v", i, cn, got[0])
		}
	}
	if cn, ok := p.Current("s1"); !ok || cn != got[0] {
		t.Errorf("Current = %v, %v; want the session's connection", cn, ok)
	}
	if p.Len() != 1 {
		t.Errorf("Len = %d, want 1", p.Len())
	}
}

// TestPoolFailedOpening: a failed opening fails the requests that waited for
// it, is forgotten, and the next request opens again.
func TestPoolFailedOpening(t *testing.T) {
	p, o := startedPool(t, nil), newOpener()
	o.fail.Store(true)
	if _, err := p.Get(t.Context(), "s1", o.opening(t.Context(), "a", 4, 4)); err == nil || err.Error() != "opening 1 failed" {
		t.Fatalf("Get = %v, want the opening's error", err)
	}
	if _, ok := p.Current("s1"); ok || p.Len() != 0 {
		t.Fatalf("a failed opening kept its place (Len %d)", p.Len())
	}
	select {
	case cn := <-o.closed:
		t.Fatalf("Closed told %v after a failed opening", cn)
	default:
	}
	o.fail.Store(false)
	if cn, err := p.Get(t.Context(), "s1", o.opening(t.Context(), "a", 4, 4)); err != nil || cn.name != "a2" {
		t.Fatalf("Get after a failure = %v, %v; want a second opening", cn, err)
	}
}

// TestPoolConnectionEnds: a connection that ended is told to Closed and
// forgotten, and the session's next request opens another; one whose session
// ended is closed.
func TestPoolConnectionEnds(t *testing.T) {
	p, o := startedPool(t, nil), newOpener()
	session, endSession := context.WithCancel(t.Context())
	first, err := p.Get(t.Context(), "s1", o.opening(session, "a", 4, 4))
	if err != nil {
		t.Fatal(err)
	}
	first.Lose(errors.New("the server exited"))
	if cn := <-o.closed; cn != first {
		t.Fatalf("Closed told %v, want %v", cn, first)
	}
	second, err := p.Get(t.Context(), "s1", o.opening(session, "a", 4, 4))
	if err != nil || second == first {
		t.Fatalf("Get after the end = %v, %v; want a new connection", second, err)
	}
	endSession()
	if cn := <-o.closed; cn != second {
		t.Fatalf("Closed told %v at the session's end, want %v", cn, second)
	}
	if !second.Lost() || p.Len() != 0 {
		t.Fatalf("the session ended and its connection lives on (lost %v, Len %d)", second.Lost(), p.Len())
	}
	if _, err := p.Get(t.Context(), "s1", o.opening(session, "a", 4, 4)); !errors.Is(err, ErrSessionEnded) {
		t.Fatalf("Get for an ended session = %v, want ErrSessionEnded", err)
	}
}

// TestPoolRefusals: what Get refuses, and why.
func TestPoolRefusals(t *testing.T) {
	o := newOpener()
	unstarted := NewPool[string, *pooled](nil)
	if _, err := unstarted.Get(t.Context(), "s1", o.opening(t.Context(), "a", 4, 4)); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Get before Start = %v, want ErrNotRunning", err)
	}

	stopped := NewPool[string, *pooled](nil)
	run, stop := context.WithCancel(t.Context())
	stopped.Start(run)
	stop()
	if _, err := stopped.Get(t.Context(), "s1", o.opening(t.Context(), "a", 4, 4)); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Get once the run ended = %v, want ErrNotRunning", err)
	}

	p := startedPool(t, nil)
	ended := o.open(t.Context(), "a", 4, 4)
	ended.Ended = func() bool { return true }
	if _, err := p.Get(t.Context(), "s1", func() Opening[*pooled] { return ended }); !errors.Is(err, ErrSessionEnded) {
		t.Errorf("Get for a session that says it ended = %v, want ErrSessionEnded", err)
	}

	slow := newOpener()
	slow.hold = make(chan struct{})
	defer close(slow.hold)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := p.Get(ctx, "s2", slow.opening(t.Context(), "a", 4, 4)); !errors.Is(err, ErrNotOpenYet) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get whose context ended during the opening = %v, want ErrNotOpenYet and the context's cause", err)
	}
}

// TestPoolMakesRoom: past an agent's share or the server's limit, the least
// recently used idle connection is ended for the new one (the agent's own
// when it is at its share); with every candidate busy, Get refuses.
func TestPoolMakesRoom(t *testing.T) {
	var evicted []string
	var mu sync.Mutex
	p, o := startedPool(t, func(agent string) { mu.Lock(); evicted = append(evicted, agent); mu.Unlock() }), newOpener()
	get := func(session, agent string) (*pooled, error) {
		return p.Get(t.Context(), session, o.opening(t.Context(), agent, 2, 3))
	}
	a1, _ := get("a1", "a")
	time.Sleep(tick)
	a2, _ := get("a2", "a")
	busy := a2.Begin()

	// a is at its share of 2: its own idle a1 makes room, a2 is busy.
	a3, err := get("a3", "a")
	if err != nil {
		t.Fatalf("a third session of agent a: %v", err)
	}
	if !a1.Lost() || a2.Lost() {
		t.Fatalf("made room by ending a1 %v, a2 %v; want a1 alone", a1.Lost(), a2.Lost())
	}
	end3 := a3.Begin()
	var room *RoomError
	if _, err := get("a4", "a"); !errors.As(err, &room) || room.Agent != "a" || room.Share != 2 || room.Full {
		t.Fatalf("a fourth session of a, all its own busy = %v; want a RoomError of agent a, share 2", err)
	}

	// The server is at its limit of 3 with b1: b2 ends the least recently
	// used idle connection, whoever's.
	b1, _ := get("b1", "b")
	end3()
	time.Sleep(tick)
	b1.Touch()
	if _, err := get("b2", "b"); err != nil {
		t.Fatalf("b2 with a3 idle: %v", err)
	}
	if !a3.Lost() || b1.Lost() || a2.Lost() {
		t.Fatalf("made room by ending a3 %v, b1 %v, a2 %v; want a3, the least recently used idle one", a3.Lost(), b1.Lost(), a2.Lost())
	}
	busy()
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(evicted) != "[a a]" {
		t.Errorf("evicted told %v, want [a a]", evicted)
	}
}

// TestPoolFull: a server at its limit whose connections are all busy, or
// still opening, refuses another, whoever's.
func TestPoolFull(t *testing.T) {
	p, o := startedPool(t, nil), newOpener()
	first, err := p.Get(t.Context(), "s1", o.opening(t.Context(), "a", 2, 2))
	if err != nil {
		t.Fatal(err)
	}
	first.Begin()
	slow := newOpener()
	slow.hold = make(chan struct{})
	defer close(slow.hold)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, _ = p.Get(ctx, "s2", slow.opening(t.Context(), "b", 2, 2)) // still opening when ctx ends
	var room *RoomError
	if _, err := p.Get(t.Context(), "s3", o.opening(t.Context(), "c", 2, 2)); !errors.As(err, &room) || !room.Full || room.Limit != 2 {
		t.Fatalf("a third session, one busy and one opening = %v; want a RoomError of a full server", err)
	}
	if first.Lost() || p.Len() != 2 {
		t.Fatalf("a busy or opening connection was ended (first lost %v, Len %d)", first.Lost(), p.Len())
	}
}

// TestPoolForget: a forgotten session's place is free at once; its
// connection ends with its session, and Current never opens one.
func TestPoolForget(t *testing.T) {
	p, o := startedPool(t, nil), newOpener()
	session, endSession := context.WithCancel(t.Context())
	cn, err := p.Get(t.Context(), "s1", o.opening(session, "a", 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	cn.Begin() // busy: no room could be made by ending it
	p.Forget("s1")
	if _, err := p.Get(t.Context(), "s2", o.opening(t.Context(), "a", 1, 1)); err != nil {
		t.Fatalf("the forgotten session's place: %v", err)
	}
	endSession()
	if got := <-o.closed; got != cn {
		t.Fatalf("Closed told %v, want %v", got, cn)
	}
	if _, ok := p.Current("s3"); ok || o.opened.Load() != 2 {
		t.Fatalf("Current opened a connection (%d opened)", o.opened.Load())
	}
}
