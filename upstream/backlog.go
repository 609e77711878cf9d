package upstream

import (
	"context"
	"sync"
	"time"
)

// Backlog counts a connection's notifications handed to the goroutine that
// routes them and those it has routed, so that an answer can wait for the
// notifications the server sent before it (Settle): a call's last progress or
// log message must reach its client before the call's result does, as it would
// directly. The zero value is ready to use.
type Backlog struct {
	mu      sync.Mutex
	in, out uint64
	wake    chan struct{} // closed when out moves, for a Settle waiting on it
}

// Arrived counts a notification handed on to be routed.
func (n *Backlog) Arrived() {
	n.mu.Lock()
	n.in++
	n.mu.Unlock()
}

// Handled counts a notification routed (or dropped).
func (n *Backlog) Handled() {
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
