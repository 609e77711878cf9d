package upstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Pool holds the connections of a server whose every client session has one
// of its own ("sessions": "client"), so that what one client does to a
// stateful server (a browser page, a shell, a resource it made, its log
// level, its roots) is never seen by another. A session's connection is
// opened on its first request, once however many of its requests ask at the
// same time; it then serves them all, and it is forgotten when it ends or its
// session does. The connections are bounded per server and per agent, and an
// idle one (the least recently used) is ended to make room for another.
//
// K names a client session; C is the connection as its user keeps it.
type Pool[K comparable, C PoolConn] struct {
	evicted func(agent string) // told under mu: it must not call the pool

	mu    sync.Mutex
	slots map[K]*slot[C]
	run   context.Context // the server's run: nil before Start, done once it ends
	wg    sync.WaitGroup  // the goroutines of connections opening or open
}

// PoolConn is what a Pool needs of a connection; a type that embeds *Conn has
// it all.
type PoolConn interface {
	comparable
	Lost() bool
	Done() <-chan struct{}
	Idle() bool
	LastUsed() time.Time
	Touch()
	Lose(error)
	Close()
}

// slot is one session's connection; ready is closed once the attempt to open
// it is over, and cn or err then says how it went.
type slot[C PoolConn] struct {
	ready chan struct{}
	cn    C
	err   error
	agent string
}

// An Opening is what Get needs to open a session's connection when it has
// none.
type Opening[C PoolConn] struct {
	// Agent is the session's agent (never ""); Share bounds that agent's
	// connections, Limit the server's.
	Agent        string
	Share, Limit int
	// Session ends with the client session; its connection is closed then.
	Session context.Context
	// Ended reports whether the session has ended, even before Session is
	// done: no connection is opened for it then.
	Ended func() bool
	// Open connects, under a context that ends with the server's run or the
	// session. Its error is what every request waiting for it fails with; it
	// returns a connection (not C's zero value) when it returns no error.
	Open func(ctx context.Context) (C, error)
	// Opened, when set, is run once the connection serves requests, under
	// Open's context.
	Opened func(ctx context.Context, cn C)
	// Closed, when set, is told once the open connection has ended and been
	// forgotten.
	Closed func(cn C)
}

// Get's refusals. A RoomError refuses a connection past a bound.
var (
	// ErrNotRunning: the server is not running (not started, or stopped).
	ErrNotRunning = errors.New("the server is not running")
	// ErrSessionEnded: the client session ended.
	ErrSessionEnded = errors.New("the client session has ended")
	// ErrNotOpenYet: the request's context ended while its session's
	// connection was still opening.
	ErrNotOpenYet = errors.New("the session's connection was still opening")
)

// A RoomError refuses a new connection of Agent when every connection that
// could be ended to make room for it is busy: the agent's own when it has its
// Share, anyone's when the server has its Limit (Full).
type RoomError struct {
	Agent        string
	Share, Limit int
	Full         bool
}

func (e *RoomError) Error() string {
	if e.Full {
		return fmt.Sprintf("the server already has its maximum of %d connections, all of them busy", e.Limit)
	}
	return fmt.Sprintf("agent %s already has its share of %d connections, all of them busy", e.Agent, e.Share)
}

// NewPool is an empty pool. evicted, when set, is told the agent of every
// idle connection ended to make room for another, with the pool locked.
func NewPool[K comparable, C PoolConn](evicted func(agent string)) *Pool[K, C] {
	return &Pool[K, C]{evicted: evicted, slots: map[K]*slot[C]{}}
}

// Start lets the pool open connections, under run: they end with it.
func (p *Pool[K, C]) Start(run context.Context) {
	p.mu.Lock()
	p.run = run
	p.mu.Unlock()
}

// Wait waits, once the run Start was given has ended, for every connection's
// goroutine to finish.
func (p *Pool[K, C]) Wait() {
	// A Get under way when the run ended has counted its connection in wg by
	// the time the lock is free; every later one sees the run over.
	p.mu.Lock()
	//lint:ignore SA2001 an empty critical section: a barrier
	p.mu.Unlock()
	p.wg.Wait()
}

// Len is the number of connections open or opening.
func (p *Pool[K, C]) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.slots)
}

// Get is session k's connection, opened as opening says when it has none
// (opening is called only then); it waits for an opening under way, up to ctx
// (ErrNotOpenYet, with ctx's cause). A connection found ended is forgotten,
// and another opened.
func (p *Pool[K, C]) Get(ctx context.Context, k K, opening func() Opening[C]) (C, error) {
	var zero C
	for {
		s, err := p.claim(k, opening)
		if err != nil {
			return zero, err
		}
		select {
		case <-s.ready:
		case <-ctx.Done():
			return zero, fmt.Errorf("%w: %w", ErrNotOpenYet, context.Cause(ctx))
		}
		if s.err != nil {
			return zero, s.err
		}
		if !s.cn.Lost() {
			return s.cn, nil
		}
		p.drop(k, s)
	}
}

// claim is session k's slot: its own, or a new one whose opening it starts.
func (p *Pool[K, C]) claim(k K, opening func() Opening[C]) (*slot[C], error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.slots[k]; s != nil {
		s.touch()
		return s, nil
	}
	if p.run == nil || p.run.Err() != nil {
		return nil, ErrNotRunning
	}
	o := opening()
	if o.Session.Err() != nil || (o.Ended != nil && o.Ended()) {
		return nil, ErrSessionEnded
	}
	if err := p.makeRoomLocked(o.Agent, o.Share, o.Limit); err != nil {
		return nil, err
	}
	s := &slot[C]{ready: make(chan struct{}), agent: o.Agent}
	p.slots[k] = s
	p.wg.Add(1) // under mu: see Wait
	go p.open(k, s, o, p.run)
	return s, nil
}

// open connects s and keeps it until it ends, the run ends or the session
// does; claim counted it in wg.
func (p *Pool[K, C]) open(k K, s *slot[C], o Opening[C], run context.Context) {
	defer p.wg.Done()
	ctx, cancel := context.WithCancel(run)
	defer cancel()
	defer context.AfterFunc(o.Session, cancel)()
	cn, err := o.Open(ctx)
	var zero C
	if err == nil && cn == zero {
		err = errors.New("the opening made no connection")
	}
	if err != nil {
		s.err = err
		p.drop(k, s)
		close(s.ready)
		return
	}
	s.cn = cn
	close(s.ready)
	if o.Opened != nil {
		o.Opened(ctx, cn)
	}
	select {
	case <-ctx.Done():
	case <-cn.Done():
	}
	cn.Close()
	p.drop(k, s)
	if o.Closed != nil {
		o.Closed(cn)
	}
}

// drop forgets s if it is still session k's.
func (p *Pool[K, C]) drop(k K, s *slot[C]) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.slots[k] == s {
		delete(p.slots, k)
	}
}

// Current is session k's connection if one is open now; it never opens one
// (an unsubscribe at a session's end must not start a process).
func (p *Pool[K, C]) Current(k K) (C, bool) {
	var zero C
	p.mu.Lock()
	s := p.slots[k]
	p.mu.Unlock()
	if s == nil {
		return zero, false
	}
	select {
	case <-s.ready:
		if s.err == nil && !s.cn.Lost() {
			return s.cn, true
		}
	default:
	}
	return zero, false
}

// Forget frees session k's place at once, when its session ends; its
// connection ends in open's goroutine, which the session's end wakes, so that
// a server slow to exit holds up no client.
func (p *Pool[K, C]) Forget(k K) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.slots, k)
}

// touch marks s's connection used now, once it is open.
func (s *slot[C]) touch() {
	select {
	case <-s.ready:
		if s.err == nil {
			s.cn.Touch()
		}
	default:
	}
}

// makeRoomLocked makes room for a new connection of agent within its share
// and the server's limit, by ending the least recently used idle one: the
// agent's own when it is at its share, anyone's when the server is full.
// p.mu is held.
func (p *Pool[K, C]) makeRoomLocked(agent string, share, limit int) error {
	own := 0
	for _, s := range p.slots {
		if s.agent == agent {
			own++
		}
	}
	switch {
	case own >= share:
		if !p.endIdleLocked(agent, true) {
			return &RoomError{Agent: agent, Share: share, Limit: limit}
		}
	case len(p.slots) >= limit:
		if !p.endIdleLocked(agent, false) {
			return &RoomError{Agent: agent, Share: share, Limit: limit, Full: true}
		}
	}
	return nil
}

// errMadeRoom is why an idle connection was ended.
var errMadeRoom = errors.New("ended while idle, to make room for another client session")

// endIdleLocked ends the least recently used idle connection (of agent alone
// when own is set, else anyone's), and reports whether there was one. One
// still opening is busy.
func (p *Pool[K, C]) endIdleLocked(agent string, own bool) bool {
	var victim K
	var oldest time.Time
	found := false
	for k, s := range p.slots {
		if own && s.agent != agent {
			continue
		}
		select {
		case <-s.ready:
		default:
			continue
		}
		if s.err != nil || !s.cn.Idle() {
			continue
		}
		if last := s.cn.LastUsed(); !found || last.Before(oldest) {
			victim, oldest, found = k, last, true
		}
	}
	if !found {
		return false
	}
	s := p.slots[victim]
	delete(p.slots, victim)
	if p.evicted != nil {
		p.evicted(s.agent)
	}
	// Closing waits for the server; open's goroutine, woken by the end, does
	// the rest.
	s.cn.Lose(errMadeRoom)
	go s.cn.Close()
	return true
}
