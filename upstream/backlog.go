package upstream

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// Note is a notification the server sent, on its way to be routed: its
// params an object, its members as the server wrote them (Handlers).
type Note struct {
	Method string
	Params json.RawMessage
}

// Backlog is a connection's notifications on their way to be routed: the
// transport's reader puts them (Put), one goroutine routes them in order
// (Pump), and an answer can wait for those the server sent before it
// (Settle): a call's last progress or log message must reach its client
// before the call's result does, as it would directly.
type Backlog struct {
	queue chan Note

	mu      sync.Mutex
	in, out uint64        // notifications put, and routed or dropped
	wake    chan struct{} // closed when out moves, for a Settle waiting on it
}

// NewBacklog holds up to size notifications waiting to be routed.
func NewBacklog(size int) *Backlog { return &Backlog{queue: make(chan Note, size)} }

// Put queues a notification to be routed. It never blocks (the transport's
// reader calls it): with the queue full, it drops the notification and
// reports false, since the gateway is not keeping up.
func (n *Backlog) Put(method string, params json.RawMessage) bool {
	n.arrived()
	select {
	case n.queue <- Note{method, params}:
		return true
	default:
		n.handled()
		return false
	}
}

// Pump routes the notifications put, one at a time and in order, until done
// closes or ctx ends.
func (n *Backlog) Pump(ctx context.Context, done <-chan struct{}, route func(Note)) {
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case note := <-n.queue:
			route(note)
			n.handled()
		}
	}
}

// arrived counts a notification put.
func (n *Backlog) arrived() {
	n.mu.Lock()
	n.in++
	n.mu.Unlock()
}

// handled counts a notification routed (or dropped).
func (n *Backlog) handled() {
	n.mu.Lock()
	n.out++
	if n.wake != nil {
		close(n.wake)
		n.wake = nil
	}
	n.mu.Unlock()
}

// SettleWait bounds how long an answer waits for the notifications before it: a
// pump held up (a slow client stream) must not hold the answer for long.
const SettleWait = 250 * time.Millisecond

// Settle waits until every notification that arrived before now has been
// routed, or SettleWait passed, or ctx ended.
func (n *Backlog) Settle(ctx context.Context) {
	n.mu.Lock()
	target := n.in
	n.mu.Unlock()
	var timer *time.Timer
	for {
		n.mu.Lock()
		if n.out >= target {
			n.mu.Unlock()
			return
		}
		if n.wake == nil {
			n.wake = make(chan struct{})
		}
		wake := n.wake
		n.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(SettleWait)
			defer timer.Stop()
		}
		select {
		case <-wake:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
