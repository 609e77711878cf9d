package upstream

import "time"

// The restart policy of a server. A server that keeps failing is tried again
// with exponential backoff, at most MaxFailures times in a row; a connection
// that stayed up for StablePeriod starts the count afresh, so one crash a day
// never exhausts the tries.
const (
	FirstBackoff = 250 * time.Millisecond
	MaxBackoff   = 30 * time.Second
	MaxFailures  = 8
	StablePeriod = 60 * time.Second
)

// Restarts counts one server's failures in a row and says how long to wait
// before the next attempt, or to give up. A server given up on is tried once
// more when someone asks (Fresh): one failure more gives up again, one success
// starts the count afresh. The zero value is a server that has not failed.
type Restarts struct {
	failures int
	backoff  time.Duration // the next wait; zero means FirstBackoff
	fresh    bool          // the attempt under way was asked for after giving up
}

// Failed records a failed attempt: a start that failed (up is zero), or a
// connection that ended after up. It reports false when the failures in a row
// reached MaxFailures: the server then waits until asked for a fresh attempt
// (Fresh). Otherwise the next attempt comes after Backoff.
func (r *Restarts) Failed(up time.Duration) (again bool) {
	if up >= StablePeriod {
		r.Reset()
	}
	r.failures++
	return r.failures < MaxFailures
}

// Backoff is the wait before the next attempt.
func (r *Restarts) Backoff() time.Duration {
	if r.backoff == 0 {
		return FirstBackoff
	}
	return r.backoff
}

// Waited says the wait was spent: the next one is twice as long, up to
// MaxBackoff. An attempt made at once (a server that forgot its session is
// up: a new session goes now) spends none.
func (r *Restarts) Waited() { r.backoff = min(r.Backoff()*2, MaxBackoff) }

// Failures is the count of failures in a row.
func (r *Restarts) Failures() int { return r.failures }

// WasFresh reports that the attempt that failed last was a fresh one, asked
// for after giving up.
func (r *Restarts) WasFresh() bool { return r.fresh }

// Fresh allows one attempt more after giving up.
func (r *Restarts) Fresh() { r.failures, r.fresh = MaxFailures-1, true }

// Connected records an attempt that connected: after a fresh attempt, the
// count starts afresh; otherwise it runs on until the connection proves
// stable (Failed's up).
func (r *Restarts) Connected() {
	if r.fresh {
		r.Reset()
	}
}

// Reset starts the count afresh: the server stopped for a reason of the
// gateway's own (idle, recycled), not a failure.
func (r *Restarts) Reset() { *r = Restarts{} }
