package memory

import (
	"sync"
	"time"
)

// Rewording says who may not be served a similarity hit on an entry they
// stored themselves, and for how long: a caller that rewords its own
// question does so because the first answer was not the one it wanted
// (agents' traces show it: within a session an agent almost never repeats a
// read, and rewords a search when its answer fell short), so serving that
// answer again is exactly wrong. Exact hits are not affected.
type Rewording struct {
	// Scope is "session" (the default: the MCP session that stored the
	// entry; calls without a session are not kept from anything), "agent"
	// (any call of the same agent) or "off".
	Scope string
	// Window is how long after storing an entry its maker is passed over
	// (DefaultRewordingWindow when zero).
	Window time.Duration
}

// DefaultRewordingWindow is how long a caller is not served a similarity
// hit on its own entry: an agent's task (one session) rarely runs longer
// than an hour, and another run of the task is a new session anyway.
const DefaultRewordingWindow = time.Hour

// Rewording scopes.
const (
	RewordingSession = "session"
	RewordingAgent   = "agent"
	RewordingOff     = "off"
)

// maxMakers bounds the makers remembered; the oldest go first.
const maxMakers = 1 << 16

// makers remembers who stored the entries with free text this process
// stored recently. Sessions live in one process, so what another process
// stored is never a session's own; an entry whose maker is forgotten is
// served to anyone.
type makers struct {
	mu    sync.Mutex
	by    map[int64]maker
	order []int64 // entry ids, oldest first
}

type maker struct {
	session, agent string
	at             int64 // unix milliseconds
}

// put records that c stored entry id at now.
func (ms *makers) put(id int64, c *call, now int64) {
	if c.session == "" && c.agent == "" {
		return
	}
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.by == nil {
		ms.by = make(map[int64]maker)
	}
	if len(ms.order) >= maxMakers {
		n := len(ms.order) / 4
		for _, old := range ms.order[:n] {
			delete(ms.by, old)
		}
		ms.order = append(ms.order[:0], ms.order[n:]...)
	}
	ms.by[id] = maker{session: c.session, agent: c.agent, at: now}
	ms.order = append(ms.order, id)
}

// own reports that entry id was stored by c's caller (under c's rewording
// scope) less than the window ago.
func (ms *makers) own(id int64, c *call, now int64) bool {
	rw := c.r.s.Rewording
	if rw.Scope == RewordingOff {
		return false
	}
	window := rw.Window
	if window <= 0 {
		window = DefaultRewordingWindow
	}
	ms.mu.Lock()
	mk, ok := ms.by[id]
	ms.mu.Unlock()
	if !ok || now-mk.at >= window.Milliseconds() {
		return false
	}
	if rw.Scope == RewordingAgent {
		return mk.agent != "" && mk.agent == c.agent
	}
	// A call without a session (nexus call, nexus demo) has no rewording
	// of its own to be kept from.
	return c.session != "" && mk.session == c.session
}
