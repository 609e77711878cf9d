package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// flightGroup coalesces identical calls in flight at the same moment into
// one child call, keyed by the cache key. It differs from
// golang.org/x/sync/singleflight in one way that matters here: when the
// leader's call fails because the leader's own context ended, followers
// are not handed that failure; they retry, and one of them leads.
type flightGroup struct {
	mu    sync.Mutex
	calls map[string]*flight
}

type flight struct {
	done chan struct{}
	// Set before done is closed.
	res     json.RawMessage // the child's (or the stored) result; each follower marks its own copy
	err     error
	status  string    // what the leader reports: StatusHit, StatusSemanticHit or StatusMiss
	created time.Time // when res was produced (for hits shared by a leader: the entry's creation)
	retry   bool      // the leader's own context ended; followers must retry
	sem     *semHit   // set when the leader served a similarity hit

	followers int // guarded by the group's mu; lets tests know everyone has joined
}

// join returns the flight for key and whether the caller leads it. The
// leader must close done and then call retire, exactly once each.
func (g *flightGroup) join(key string) (*flight, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if f, ok := g.calls[key]; ok {
		f.followers++
		return f, false
	}
	if g.calls == nil {
		g.calls = make(map[string]*flight)
	}
	f := &flight{done: make(chan struct{})}
	g.calls[key] = f
	return f, true
}

// followers counts the callers waiting on flights in progress.
func (g *flightGroup) followers() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, f := range g.calls {
		n += f.followers
	}
	return n
}

// retire removes the flight so later calls start afresh (from the store).
// The leader publishes its outcome (closes done) first: callers that join
// in between share the published outcome.
func (g *flightGroup) retire(key string, f *flight) {
	g.mu.Lock()
	if g.calls[key] == f {
		delete(g.calls, key)
	}
	g.mu.Unlock()
}

// wait blocks until the flight lands or ctx ends.
func (f *flight) wait(ctx context.Context) error {
	select {
	case <-f.done:
		return nil
	default:
	}
	beforeBlocking(ctx)
	select {
	case <-f.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("memory: waiting for an identical call in flight: %w", context.Cause(ctx))
	}
}
