package audit

import (
	"strings"
	"sync"
)

// Recent keeps the last entries in memory, for the console's view of the trail:
// every decision, the reads the store does not keep included. Bounded: the
// oldest entry goes when a new one comes past the bound.
type Recent struct {
	mu   sync.Mutex
	ring []Entry
	next int
	full bool
}

// NewRecent keeps up to n entries.
func NewRecent(n int) *Recent { return &Recent{ring: make([]Entry, n)} }

// Add keeps e.
func (r *Recent) Add(e Entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ring) == 0 {
		return
	}
	r.ring[r.next] = e
	r.next = (r.next + 1) % len(r.ring)
	r.full = r.full || r.next == 0
}

// Match selects entries for List; zero fields select everything.
type Match struct {
	Agent    string
	Tool     string // a substring of the tool's name
	Decision string // Allowed or Denied
	Outcome  string
}

func (m Match) matches(e *Entry) bool {
	return (m.Agent == "" || e.Agent == m.Agent) && (m.Tool == "" || strings.Contains(e.Tool, m.Tool)) &&
		(m.Decision == "" || e.Decision == m.Decision) && (m.Outcome == "" || e.Outcome == m.Outcome)
}

// List returns up to limit entries m selects, newest first.
func (r *Recent) List(m Match, limit int) []Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.next
	if r.full {
		n = len(r.ring)
	}
	var out []Entry
	for i := 1; i <= n && len(out) < limit; i++ {
		e := &r.ring[(r.next-i+len(r.ring))%len(r.ring)]
		if m.matches(e) {
			out = append(out, *e)
		}
	}
	return out
}
