package upstream

import "sync"

// Doubts holds calls back from a remote connection while the failure of a
// request at the transport level is checked: a call sent meanwhile on a
// connection about to be found dead would fail too, where it could wait for the
// connection that replaces it. The ping loop gives the verdict; only a ping sent
// after the last doubt was raised can clear it.
type Doubts struct {
	wake chan struct{} // tells the ping loop to ping now (Wake); buffered 1

	mu      sync.Mutex
	raised  uint64        // doubts raised so far
	pending chan struct{} // closed once the check is over; nil when none is due
}

// NewDoubts is a connection with no doubt raised.
func NewDoubts() *Doubts { return &Doubts{wake: make(chan struct{}, 1)} }

// Raise asks for a check.
func (d *Doubts) Raise() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.raised++
	if d.pending == nil {
		d.pending = make(chan struct{})
	}
	select {
	case d.wake <- struct{}{}:
	default: // a ping is asked for already
	}
}

// Held is closed when the check due is over; nil when none is.
func (d *Doubts) Held() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pending
}

// Sending is said as a ping is sent; the count it returns is what the ping's
// answer can clear (Settle).
func (d *Doubts) Sending() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.raised
}

// Settle ends the check when the connection answered a ping sent after every
// doubt raised; one raised since waits for the next ping, which Wake asks for.
func (d *Doubts) Settle(sent uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pending != nil && d.raised == sent {
		close(d.pending)
		d.pending = nil
	}
}

// Wake receives when a doubt was raised: the ping loop pings at once.
func (d *Doubts) Wake() <-chan struct{} { return d.wake }
