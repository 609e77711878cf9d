package memory

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
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
	Similarity
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

// counters are per-tool deltas not yet written.
type counters struct {
	server                                   string
	hits, misses, bypasses, coalesced, saved int64

	semanticHits, grayAccepted, grayRejected, grayUnverified, guardRejections, embedFailures int64
}

func (c *counters) similarity() Similarity {
	return Similarity{SemanticHits: c.semanticHits, GrayAccepted: c.grayAccepted, GrayRejected: c.grayRejected,
		GrayUnverified: c.grayUnverified, GuardRejections: c.guardRejections, EmbedFailures: c.embedFailures}
}

type touch struct {
	lastUsed int64
	hits     int64
}

// pending batches the writes a hit would otherwise make (last_used_at, hit
// counts, per-tool counters), so the hit path is one read. flush writes them
// every Options.FlushInterval, before eviction, on Stats and on Close.
type pending struct {
	mu      sync.Mutex
	touches map[int64]touch
	tools   map[string]*counters
}

func (p *pending) count(t Tool, fn func(*counters)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tools == nil {
		p.tools = make(map[string]*counters)
	}
	c := p.tools[t.Name]
	if c == nil {
		c = &counters{server: t.Server}
		p.tools[t.Name] = c
	}
	fn(c)
}

func (p *pending) touch(id, now int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.touches == nil {
		p.touches = make(map[int64]touch)
	}
	t := p.touches[id]
	t.lastUsed = max(t.lastUsed, now)
	t.hits++
	p.touches[id] = t
}

// take removes and returns everything pending.
func (p *pending) take() (map[int64]touch, map[string]*counters) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, c := p.touches, p.tools
	p.touches, p.tools = nil, nil
	return t, c
}

// restore puts back what take returned when writing it failed.
func (p *pending) restore(touches map[int64]touch, tools map[string]*counters) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.touches == nil {
		p.touches = make(map[int64]touch)
	}
	for id, t := range touches {
		cur := p.touches[id]
		cur.lastUsed = max(cur.lastUsed, t.lastUsed)
		cur.hits += t.hits
		p.touches[id] = cur
	}
	if p.tools == nil {
		p.tools = make(map[string]*counters)
	}
	for name, c := range tools {
		cur := p.tools[name]
		if cur == nil {
			p.tools[name] = c
			continue
		}
		cur.hits += c.hits
		cur.misses += c.misses
		cur.bypasses += c.bypasses
		cur.coalesced += c.coalesced
		cur.saved += c.saved
		cur.semanticHits += c.semanticHits
		cur.grayAccepted += c.grayAccepted
		cur.grayRejected += c.grayRejected
		cur.grayUnverified += c.grayUnverified
		cur.guardRejections += c.guardRejections
		cur.embedFailures += c.embedFailures
	}
}

// writePending writes touches and counters in tx.
func writePending(ctx context.Context, tx *sql.Tx, touches map[int64]touch, tools map[string]*counters) error {
	if len(touches) > 0 {
		st, err := tx.PrepareContext(ctx, `UPDATE entries SET last_used_at = max(last_used_at, ?), hits = hits + ? WHERE id = ?`)
		if err != nil {
			return fmt.Errorf("prepare touch: %w", err)
		}
		defer st.Close()
		for _, id := range slices.Sorted(maps.Keys(touches)) {
			t := touches[id]
			if _, err := st.ExecContext(ctx, t.lastUsed, t.hits, id); err != nil {
				return fmt.Errorf("touch entry: %w", err)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(tools)) {
		c := tools[name]
		_, err := tx.ExecContext(ctx, `
			INSERT INTO tool_stats (tool, server, hits, misses, bypasses, coalesced, saved_ms,
				semantic_hits, gray_accepted, gray_rejected, gray_unverified, guard_rejections, embed_failures)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (tool) DO UPDATE SET server = excluded.server,
				hits = hits + excluded.hits, misses = misses + excluded.misses,
				bypasses = bypasses + excluded.bypasses, coalesced = coalesced + excluded.coalesced,
				saved_ms = saved_ms + excluded.saved_ms,
				semantic_hits = semantic_hits + excluded.semantic_hits,
				gray_accepted = gray_accepted + excluded.gray_accepted,
				gray_rejected = gray_rejected + excluded.gray_rejected,
				gray_unverified = gray_unverified + excluded.gray_unverified,
				guard_rejections = guard_rejections + excluded.guard_rejections,
				embed_failures = embed_failures + excluded.embed_failures`,
			name, c.server, c.hits, c.misses, c.bypasses, c.coalesced, c.saved,
			c.semanticHits, c.grayAccepted, c.grayRejected, c.grayUnverified, c.guardRejections, c.embedFailures)
		if err != nil {
			return fmt.Errorf("write counters of %q: %w", name, err)
		}
	}
	return nil
}

// Stats returns entry totals and the hit, miss and bypass counters of every
// process that used the database, including this one's unflushed counts.
func (m *Memory) Stats(ctx context.Context) (Stats, error) {
	if m == nil {
		return Stats{}, fmt.Errorf("memory: off")
	}
	st := Stats{Path: m.opts.Path, MaxEntries: m.bounds.maxEntries, MaxBytes: m.bounds.maxBytes}
	if m.disabled != nil {
		st.Disabled = m.disabled.Error()
		return st, m.disabled
	}
	if err := m.flush(ctx); err != nil {
		m.stepAside("flush", err)
	}
	byTool := map[string]*ToolStats{}
	get := func(tool, server string) *ToolStats {
		ts := byTool[tool]
		if ts == nil {
			ts = &ToolStats{Tool: tool, Server: server}
			byTool[tool] = ts
		}
		return ts
	}
	tx, err := m.st.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return st, fmt.Errorf("memory: stats: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT tool, server, count(*), sum(size) FROM entries GROUP BY tool, server`)
	if err != nil {
		return st, fmt.Errorf("memory: stats: %w", err)
	}
	for rows.Next() {
		var tool, server string
		var n, b int64
		if err := rows.Scan(&tool, &server, &n, &b); err != nil {
			rows.Close()
			return st, fmt.Errorf("memory: stats: %w", err)
		}
		ts := get(tool, server)
		ts.Entries += n
		ts.Bytes += b
		st.Entries += n
		st.Bytes += b
	}
	if err := rows.Close(); err != nil {
		return st, fmt.Errorf("memory: stats: %w", err)
	}
	rows, err = tx.QueryContext(ctx, `SELECT tool, server, hits, misses, bypasses, coalesced, saved_ms,
		semantic_hits, gray_accepted, gray_rejected, gray_unverified, guard_rejections, embed_failures FROM tool_stats`)
	if err != nil {
		return st, fmt.Errorf("memory: stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var tool, server string
		var c counters
		if err := rows.Scan(&tool, &server, &c.hits, &c.misses, &c.bypasses, &c.coalesced, &c.saved,
			&c.semanticHits, &c.grayAccepted, &c.grayRejected, &c.grayUnverified, &c.guardRejections, &c.embedFailures); err != nil {
			return st, fmt.Errorf("memory: stats: %w", err)
		}
		ts := get(tool, server)
		ts.Hits, ts.Misses, ts.Bypasses, ts.Coalesced, ts.SavedMS = c.hits, c.misses, c.bypasses, c.coalesced, c.saved
		st.Hits += c.hits
		st.Misses += c.misses
		st.Bypasses += c.bypasses
		st.Coalesced += c.coalesced
		st.SavedMS += c.saved
		ts.Similarity = c.similarity()
		st.Similarity.add(ts.Similarity)
	}
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("memory: stats: %w", err)
	}
	for _, name := range slices.Sorted(maps.Keys(byTool)) {
		st.Tools = append(st.Tools, *byTool[name])
	}
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
	if limit <= 0 {
		limit = -1
	}
	rows, err := m.st.db.QueryContext(ctx, `
		SELECT id, tool, server, scope, fingerprint, args, size, duration_ms,
			created_at, expires_at, last_used_at, hits, coalesce(free_text, ''), coalesce(embedder, '')
		FROM entries ORDER BY last_used_at DESC, id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("memory: list: %w", err)
	}
	defer rows.Close()
	var out []EntryInfo
	for rows.Next() {
		var (
			e                 EntryInfo
			args              string
			created, lastUsed int64
			expires           sql.NullInt64
		)
		if err := rows.Scan(&e.ID, &e.Tool, &e.Server, &e.Scope, &e.Fingerprint, &args, &e.Size,
			&e.DurationMS, &created, &expires, &lastUsed, &e.Hits, &e.Text, &e.Embedder); err != nil {
			return nil, fmt.Errorf("memory: list: %w", err)
		}
		e.Args = json.RawMessage(args)
		e.CreatedAt = time.UnixMilli(created)
		e.LastUsedAt = time.UnixMilli(lastUsed)
		if expires.Valid {
			t := time.UnixMilli(expires.Int64)
			e.ExpiresAt = &t
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("memory: list: %w", err)
	}
	return out, nil
}
