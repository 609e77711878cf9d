package memory

import (
	"context"

	"encoding/json"
	"fmt"

	"slices"
	"strings"
	"sync"
	"time"
)

// Stats is what `nexus cache stats --json` prints.
type Stats struct {
	Path       string `json:"path"`
	Disabled   string `json:"disabled,omitempty"` // why memory steps aside, if it does
	Entries    int64  `json:"entries"`
	Bytes      int64  `json:"bytes"`
	MaxEntries int64  `json:"max_entries"`
	MaxBytes   int64  `json:"max_bytes"`
	Hits       int64  `json:"hits"`
	Misses     int64  `json:"misses"`
	Bypasses   int64  `json:"bypasses"`
	Coalesced  int64  `json:"coalesced"` // hits that shared an identical call in flight
	SavedMS    int64  `json:"time_saved_ms"`
	Similarity
	Tools []ToolStats `json:"tools"` // sorted by tool
	// Measured is what verification (Settings.Verify) found: per tool,
	// false-hit and staleness rates with their intervals, from the counts
	// the store held when this process opened it (every process's) and
	// this process's own since.
	Measured []Measured `json:"measured,omitempty"`
}

// Similarity counts what similarity lookups did. SemanticHits are
// included in Hits (they are answers served without the child); gray-zone
// verdicts are GrayAccepted (served, also in SemanticHits), GrayRejected
// (the verifier said no) and GrayUnverified (no verifier, or it failed).
// GuardRejections counts neighbours above the verify threshold that the
// guard refused; EmbedFailures counts embedder errors (those calls got
// exact hits only).
type Similarity struct {
	SemanticHits    int64 `json:"semantic_hits"`
	GrayAccepted    int64 `json:"gray_accepted"`
	GrayRejected    int64 `json:"gray_rejected"`
	GrayUnverified  int64 `json:"gray_unverified"`
	GuardRejections int64 `json:"guard_rejections"`
	EmbedFailures   int64 `json:"embed_failures"`
}

func (s *Similarity) add(o Similarity) {
	s.SemanticHits += o.SemanticHits
	s.GrayAccepted += o.GrayAccepted
	s.GrayRejected += o.GrayRejected
	s.GrayUnverified += o.GrayUnverified
	s.GuardRejections += o.GuardRejections
	s.EmbedFailures += o.EmbedFailures
}

// ToolStats are the counters of one canonical tool. Hits include coalesced
// calls; SavedMS sums, over hits served from the store, the duration of the
// child call that produced the entry.
type ToolStats struct {
	Tool      string `json:"tool"`
	Server    string `json:"server"`
	Entries   int64  `json:"entries"`
	Bytes     int64  `json:"bytes"`
	Hits      int64  `json:"hits"`
	Misses    int64  `json:"misses"`
	Bypasses  int64  `json:"bypasses"`
	Coalesced int64  `json:"coalesced"`
	SavedMS   int64  `json:"time_saved_ms"`
	// TTL is the tool's effective ttl now ("none": answers are not kept) and
	// TTLFrom who gave it: FromConfig, FromCommand, FromCatalog or "".
	TTL     string `json:"ttl"`
	TTLFrom string `json:"ttlFrom"`
	Similarity
	Verified
}

// Verified counts what verification (Settings.Verify) checked, over every
// process that used the database: similarity answers checked and how many
// the child refuted, exact answers checked and how many had changed.
type Verified struct {
	SemanticChecks int64 `json:"semantic_checks"`
	FalseHits      int64 `json:"false_hits"`
	ExactChecks    int64 `json:"exact_checks"`
	Stale          int64 `json:"stale_answers"`
}

// EntryInfo describes one stored entry, for `nexus cache list`.
type EntryInfo struct {
	ID          int64           `json:"id"`
	Tool        string          `json:"tool"`
	Server      string          `json:"server"`
	Scope       string          `json:"scope,omitempty"`
	Fingerprint string          `json:"fingerprint"`
	Args        json.RawMessage `json:"args"`
	Size        int64           `json:"size"`
	DurationMS  int64           `json:"duration_ms"`
	CreatedAt   time.Time       `json:"created_at"`
	ExpiresAt   *time.Time      `json:"expires_at"` // nil: never
	LastUsedAt  time.Time       `json:"last_used_at"`
	Hits        int64           `json:"hits"`
	Text        string          `json:"text,omitempty"`     // the free text compared by similarity
	Embedder    string          `json:"embedder,omitempty"` // "name/model" of its vector
}

// Counters are per-tool deltas not yet written, which a Store adds to its
// totals in Write.
type Counters struct {
	Server                                     string
	Hits, Misses, Bypasses, Coalesced, SavedMS int64

	SemanticHits, GrayAccepted, GrayRejected, GrayUnverified, GuardRejections, EmbedFailures int64
	Verified
}

func (c *Counters) Similarity() Similarity {
	return Similarity{SemanticHits: c.SemanticHits, GrayAccepted: c.GrayAccepted, GrayRejected: c.GrayRejected,
		GrayUnverified: c.GrayUnverified, GuardRejections: c.GuardRejections, EmbedFailures: c.EmbedFailures}
}

// Touch is the batched recency of one entry: when it was last used and how
// many hits it had since the last Write.
type Touch struct {
	LastUsed int64
	Hits     int64
}

// pending batches the writes a hit would otherwise make (last_used_at, hit
// counts, per-tool counters), so the hit path is one read. flush writes them
// every Options.FlushInterval, before eviction, on Stats and on Close.
type pending struct {
	mu      sync.Mutex
	touches map[int64]Touch
	tools   map[string]*Counters
}

func (p *pending) count(t Tool, fn func(*Counters)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tools == nil {
		p.tools = make(map[string]*Counters)
	}
	c := p.tools[t.Name]
	if c == nil {
		c = &Counters{Server: t.Server}
		p.tools[t.Name] = c
	}
	fn(c)
}

func (p *pending) touch(id, now int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.touches == nil {
		p.touches = make(map[int64]Touch)
	}
	t := p.touches[id]
	t.LastUsed = max(t.LastUsed, now)
	t.Hits++
	p.touches[id] = t
}

// take removes and returns everything pending.
func (p *pending) take() (map[int64]Touch, map[string]*Counters) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, c := p.touches, p.tools
	p.touches, p.tools = nil, nil
	return t, c
}

// restore puts back what take returned when writing it failed.
func (p *pending) restore(touches map[int64]Touch, tools map[string]*Counters) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.touches == nil {
		p.touches = make(map[int64]Touch)
	}
	for id, t := range touches {
		cur := p.touches[id]
		cur.LastUsed = max(cur.LastUsed, t.LastUsed)
		cur.Hits += t.Hits
		p.touches[id] = cur
	}
	if p.tools == nil {
		p.tools = make(map[string]*Counters)
	}
	for name, c := range tools {
		cur := p.tools[name]
		if cur == nil {
			p.tools[name] = c
			continue
		}
		cur.Hits += c.Hits
		cur.Misses += c.Misses
		cur.Bypasses += c.Bypasses
		cur.Coalesced += c.Coalesced
		cur.SavedMS += c.SavedMS
		cur.SemanticHits += c.SemanticHits
		cur.GrayAccepted += c.GrayAccepted
		cur.GrayRejected += c.GrayRejected
		cur.GrayUnverified += c.GrayUnverified
		cur.GuardRejections += c.GuardRejections
		cur.EmbedFailures += c.EmbedFailures
		cur.SemanticChecks += c.SemanticChecks
		cur.FalseHits += c.FalseHits
		cur.ExactChecks += c.ExactChecks
		cur.Stale += c.Stale
	}
}

// Stats returns entry totals and the hit, miss and bypass counters of every
// process that used the database, including this one's unflushed counts.
func (m *Memory) Stats(ctx context.Context) (Stats, error) {
	if m == nil {
		return Stats{}, fmt.Errorf("memory: off")
	}
	st := Stats{Path: m.where(), MaxEntries: m.bounds.MaxEntries, MaxBytes: m.bounds.MaxBytes, Measured: m.Measured()}
	if m.disabled != nil {
		st.Disabled = m.disabled.Error()
		return st, m.disabled
	}
	if err := m.flush(ctx); err != nil {
		m.stepAside("flush", err)
	}
	tools, err := m.st.Stats(ctx)
	if err != nil {
		return st, fmt.Errorf("memory: stats: %w", err)
	}
	slices.SortFunc(tools, func(a, b ToolStats) int { return strings.Compare(a.Tool, b.Tool) })
	rules := m.rules.Load()
	for i, ts := range tools {
		// A tool memory only ever forwarded is not remembered, whatever a
		// pattern would give it.
		ttl, from := TTL{}, ""
		if ts.Hits+ts.Misses+ts.Coalesced > 0 {
			ttl, from = rules.s.Freshness(Tool{Name: ts.Tool, Server: ts.Server})
		}
		tools[i].TTL, tools[i].TTLFrom = ttl.String(), from
		st.Entries += ts.Entries
		st.Bytes += ts.Bytes
		st.Hits += ts.Hits
		st.Misses += ts.Misses
		st.Bypasses += ts.Bypasses
		st.Coalesced += ts.Coalesced
		st.SavedMS += ts.SavedMS
		st.Similarity.add(ts.Similarity)
	}
	st.Tools = tools
	return st, nil
}

// List returns up to limit entries (all if limit <= 0), most recently used
// first. The results themselves are not returned.
func (m *Memory) List(ctx context.Context, limit int) ([]EntryInfo, error) {
	if m == nil {
		return nil, fmt.Errorf("memory: off")
	}
	if m.disabled != nil {
		return nil, m.disabled
	}
	if err := m.flush(ctx); err != nil {
		m.stepAside("flush", err)
	}
	out, err := m.st.List(ctx, limit)
	if err != nil {
		return nil, fmt.Errorf("memory: list: %w", err)
	}
	return out, nil
}
