package policy

import (
	"maps"
	"sync"
)

// Counter counts denials per agent and tool, so that an operator can see which refusals
// happen and grant or explain them. It is the one mutable piece of the package, kept apart
// from Policy so that a policy swap does not reset the counts. The zero value is ready to
// use and safe for concurrent use.
type Counter struct {
	mu sync.Mutex
	n  map[string]map[string]int64 // agent -> tool -> denials
}

// Record counts d if it is a denial.
func (c *Counter) Record(d Decision) {
	if d.Allowed {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = make(map[string]map[string]int64)
	}
	if c.n[d.Agent] == nil {
		c.n[d.Agent] = make(map[string]int64)
	}
	c.n[d.Agent][d.Tool]++
}

// Snapshot returns a copy of the counts: agent -> tool -> denials.
func (c *Counter) Snapshot() map[string]map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]map[string]int64, len(c.n))
	for a, tools := range c.n {
		out[a] = maps.Clone(tools)
	}
	return out
}
