package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// flightPoll bounds how long a follower of another process's flight waits
// between looks at the store, in case a wake-up notification is lost.
const (
	flightPollMin = 5 * time.Millisecond
	flightPollMax = 100 * time.Millisecond
)

// flightGroup coalesces identical calls in flight at the same moment into
// one child call, keyed by the cache key. It differs from
// golang.org/x/sync/singleflight in one way that matters here: when the
// leader's call fails because the leader's own context ended, followers
// are not handed that failure; they retry, and one of them leads.
type flightGroup struct {
	mu    sync.Mutex
	calls map[string]*flight
	// landed counts the flights retired, in slots by key: a caller that looked
	// the key up before it led a flight knows from it whether an identical call
	// may have stored its answer in between (landedFor). Read without mu, so
	// that a lookup (a hit's too) pays no lock for it.
	landed [landedSlots]atomic.Uint64
}

// landedSlots is how many slots flightGroup.landed counts in: a key shares
// its slot with 1/64 of the others, whose landing only costs it a lookup.
const landedSlots = 64

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
	g.landed[landedSlot(key)].Add(1)
	g.mu.Unlock()
}

// landedFor is the count of retired flights in key's slot: while it stays
// the same, no identical call of this process landed.
func (g *flightGroup) landedFor(key string) uint64 {
	return g.landed[landedSlot(key)].Load()
}

func landedSlot(key string) int {
	if key == "" {
		return 0
	}
	return int(key[0]) % landedSlots
}

// wait blocks until the flight lands or ctx ends.
func (f *flight) wait(ctx context.Context) error {
	select {
	case <-f.done:
		return nil
	default:
	}
	select {
	case <-f.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("memory: waiting for an identical call in flight: %w", context.Cause(ctx))
	}
}

// claimFlight makes c's child call this process's among every process
// sharing the store (replicas on PostgreSQL; with SQLite, it always is).
// seen is the creation time of the entry the caller's lookup found (and
// could not serve), -1 if none. If another process leads the identical
// call, or stored its answer since that lookup, claimFlight waits for it
// and returns it as a coalesced hit (done true), sharing it with f's
// followers. Otherwise it returns the generation read last (stores check
// it) and release, to call once the result is stored. A store that fails
// lets the call go ahead: memory never fails a call. err is returned
// only when ctx ends.
func (m *Memory) claimFlight(ctx context.Context, c *call, f *flight, gen, seen int64) (hit json.RawMessage, done bool, _ int64, release func(), err error) {
	noop := func() {}
	poll := flightPollMin
	waiting := false
	for {
		lead, changed, release, err := m.st.Claim(ctx, c.key, m.opts.FlightLease, seen)
		if err != nil {
			if ctx.Err() != nil {
				return nil, false, gen, noop, ctx.Err()
			}
			m.stepAside("claim", err)
			return nil, false, gen, noop, nil
		}
		switch {
		case lead && !changed:
			return nil, false, gen, release, nil
		case lead:
			release() // stored since our lookup: read it rather than call
		default:
			if !waiting {
				waiting = true
				m.remoteWaiters.Add(1)
				defer m.remoteWaiters.Add(-1)
			}
			wake := m.st.FlightDone()
			t := time.NewTimer(poll)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, false, gen, noop, fmt.Errorf("memory: waiting for an identical call on another replica: %w", context.Cause(ctx))
			case <-wake:
			case <-t.C:
			}
			t.Stop()
			poll = min(2*poll, flightPollMax)
		}
		e, found, g, err := m.st.Lookup(ctx, c.t, c.key)
		if err != nil {
			if ctx.Err() != nil {
				return nil, false, gen, noop, ctx.Err()
			}
			m.stepAside("lookup", err)
			return nil, false, gen, noop, nil
		}
		gen, seen = g, -1
		if found {
			now := m.now().UnixMilli()
			if c.fresh(e, now) {
				f.res, f.status, f.created = e.Result, StatusHit, time.UnixMilli(e.CreatedAt)
				m.pend.touch(e.ID, now)
				m.pend.count(c.t, func(k *Counters) { k.Coalesced++; k.SavedMS += e.DurationMS })
				return m.mark(c.t, e.Result, StatusHit, max(now-e.CreatedAt, 0), true), true, gen, noop, nil
			}
			seen = e.CreatedAt
		}
	}
}
