package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nexus-mcp/nexus/memory"
)

// writePending writes touches and counters in tx.
func writePending(ctx context.Context, tx *sql.Tx, touches map[int64]memory.Touch, tools map[string]*memory.Counters) error {
	if len(touches) > 0 {
		st, err := tx.PrepareContext(ctx, `UPDATE entries SET last_used_at = max(last_used_at, ?), hits = hits + ? WHERE id = ?`)
		if err != nil {
			return fmt.Errorf("prepare touch: %w", err)
		}
		defer st.Close()
		for _, id := range slices.Sorted(maps.Keys(touches)) {
			t := touches[id]
			if _, err := st.ExecContext(ctx, t.LastUsed, t.Hits, id); err != nil {
				return fmt.Errorf("touch entry: %w", err)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(tools)) {
		c := tools[name]
		_, err := tx.ExecContext(ctx, `
			INSERT INTO tool_stats (tool, server, hits, misses, bypasses, coalesced, saved_ms,
				semantic_hits, gray_accepted, gray_rejected, gray_unverified, guard_rejections, embed_failures,
				semantic_checks, false_hits, exact_checks, stale_answers)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (tool) DO UPDATE SET server = excluded.server,
				hits = hits + excluded.hits, misses = misses + excluded.misses,
				bypasses = bypasses + excluded.bypasses, coalesced = coalesced + excluded.coalesced,
				saved_ms = saved_ms + excluded.saved_ms,
				semantic_hits = semantic_hits + excluded.semantic_hits,
				gray_accepted = gray_accepted + excluded.gray_accepted,
				gray_rejected = gray_rejected + excluded.gray_rejected,
				gray_unverified = gray_unverified + excluded.gray_unverified,
				guard_rejections = guard_rejections + excluded.guard_rejections,
				embed_failures = embed_failures + excluded.embed_failures,
				semantic_checks = semantic_checks + excluded.semantic_checks,
				false_hits = false_hits + excluded.false_hits,
				exact_checks = exact_checks + excluded.exact_checks,
				stale_answers = stale_answers + excluded.stale_answers`,
			name, c.Server, c.Hits, c.Misses, c.Bypasses, c.Coalesced, c.SavedMS,
			c.SemanticHits, c.GrayAccepted, c.GrayRejected, c.GrayUnverified, c.GuardRejections, c.EmbedFailures,
			c.SemanticChecks, c.FalseHits, c.ExactChecks, c.Stale)
		if err != nil {
			return fmt.Errorf("write counters of %q: %w", name, err)
		}
	}
	return nil
}

// writeRefuted keeps the pairs a child refuted; one already kept stays as
// it was.
func writeRefuted(ctx context.Context, tx *sql.Tx, refuted []memory.Refutation) error {
	for _, r := range refuted {
		if _, err := tx.ExecContext(ctx, `INSERT INTO refuted (tool, asked, stored, rewrites, refuted_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, r.Tool, r.Asked, r.Stored, strings.Join(r.Rewrites, " "), r.At); err != nil {
			return fmt.Errorf("keep refuted pair of %q: %w", r.Tool, err)
		}
	}
	return nil
}

// Refuted reports whether the pair was refuted.
func (s *Store) Refuted(ctx context.Context, tool, asked, stored string) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM refuted WHERE tool = ? AND asked = ? AND stored = ?`, tool, asked, stored).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("read refuted pair: %w", err)
	}
	return n > 0, nil
}

// Refutations returns every pair a child refuted, oldest first.
func (s *Store) Refutations(ctx context.Context) ([]memory.Refutation, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT tool, asked, stored, rewrites, refuted_at FROM refuted ORDER BY refuted_at, tool, asked, stored`)
	if err != nil {
		return nil, fmt.Errorf("read refuted pairs: %w", err)
	}
	defer rows.Close()
	var out []memory.Refutation
	for rows.Next() {
		var r memory.Refutation
		var rewrites string
		if err := rows.Scan(&r.Tool, &r.Asked, &r.Stored, &rewrites, &r.At); err != nil {
			return nil, fmt.Errorf("read refuted pairs: %w", err)
		}
		r.Rewrites = strings.Fields(rewrites)
		out = append(out, r)
	}
	return out, rows.Err()
}

// stats reads the entries and counters of every tool in one snapshot.
func (s *Store) Stats(ctx context.Context) ([]memory.ToolStats, error) {
	byTool := map[string]*memory.ToolStats{}
	get := func(tool, server string) *memory.ToolStats {
		ts := byTool[tool]
		if ts == nil {
			ts = &memory.ToolStats{Tool: tool, Server: server}
			byTool[tool] = ts
		}
		return ts
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT tool, server, count(*), sum(size) FROM entries GROUP BY tool, server`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var tool, server string
		var n, b int64
		if err := rows.Scan(&tool, &server, &n, &b); err != nil {
			rows.Close()
			return nil, err
		}
		ts := get(tool, server)
		ts.Entries += n
		ts.Bytes += b
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	rows, err = tx.QueryContext(ctx, `SELECT tool, server, hits, misses, bypasses, coalesced, saved_ms,
		semantic_hits, gray_accepted, gray_rejected, gray_unverified, guard_rejections, embed_failures,
		semantic_checks, false_hits, exact_checks, stale_answers FROM tool_stats`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var tool, server string
		var c memory.Counters
		if err := rows.Scan(&tool, &server, &c.Hits, &c.Misses, &c.Bypasses, &c.Coalesced, &c.SavedMS,
			&c.SemanticHits, &c.GrayAccepted, &c.GrayRejected, &c.GrayUnverified, &c.GuardRejections, &c.EmbedFailures,
			&c.SemanticChecks, &c.FalseHits, &c.ExactChecks, &c.Stale); err != nil {
			return nil, err
		}
		ts := get(tool, server)
		ts.Hits, ts.Misses, ts.Bypasses, ts.Coalesced, ts.SavedMS = c.Hits, c.Misses, c.Bypasses, c.Coalesced, c.SavedMS
		ts.Similarity = c.Similarity()
		ts.Verified = c.Verified
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]memory.ToolStats, 0, len(byTool))
	for _, ts := range byTool {
		out = append(out, *ts)
	}
	return out, nil
}

// list returns up to limit entries (all if limit <= 0), most recently
// used first.
func (s *Store) List(ctx context.Context, limit int) ([]memory.EntryInfo, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.db.QueryContext(ctx, `
		SELECT id, tool, server, scope, fingerprint, args, size, duration_ms,
			created_at, expires_at, last_used_at, hits, coalesce(free_text, ''), coalesce(embedder, '')
		FROM entries ORDER BY last_used_at DESC, id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []memory.EntryInfo
	for rows.Next() {
		var (
			e                 memory.EntryInfo
			args              string
			created, lastUsed int64
			expires           sql.NullInt64
		)
		if err := rows.Scan(&e.ID, &e.Tool, &e.Server, &e.Scope, &e.Fingerprint, &args, &e.Size,
			&e.DurationMS, &created, &expires, &lastUsed, &e.Hits, &e.Text, &e.Embedder); err != nil {
			return nil, err
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
		return nil, err
	}
	return out, nil
}
