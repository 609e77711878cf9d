package aggregation

import (
	"sync"
	"sync/atomic"
)

// asking tracks the calls in flight on one child connection for memory: an
// answer made while the child asked a client something (sampling,
// elicitation, roots) may hold that client's input, so it is never stored
// or shared. A child's request carries no reliable trace of its call, so
// every call in flight on the connection counts as having asked.
type asking struct {
	mu    sync.Mutex
	calls map[*inflight]struct{}
}

// inflight is one call's mark.
type inflight struct{ asked atomic.Bool }

// begin registers a call; end must follow.
func (a *asking) begin() *inflight {
	f := &inflight{}
	a.mu.Lock()
	if a.calls == nil {
		a.calls = map[*inflight]struct{}{}
	}
	a.calls[f] = struct{}{}
	a.mu.Unlock()
	return f
}

func (a *asking) end(f *inflight) {
	a.mu.Lock()
	delete(a.calls, f)
	a.mu.Unlock()
}

// mark records that the child sent a request while the calls now in flight
// were waiting.
func (a *asking) mark() {
	a.mu.Lock()
	for f := range a.calls {
		f.asked.Store(true)
	}
	a.mu.Unlock()
}
