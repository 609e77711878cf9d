package memory

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nexus-mcp/nexus/memory/canon"
	"github.com/nexus-mcp/nexus/memory/guard"

	"github.com/nexus-mcp/nexus/memory/embedder"
)

// StatusSemanticHit is the cache status of an answer served for a
// paraphrase: _meta["nexus/cache"] = {"status": "semantic_hit",
// "similarity": 0.93, "matched": "<the stored free text>", "age_ms": N},
// plus "verified": true when a Verifier accepted a gray-zone match.
const StatusSemanticHit = "semantic_hit"

// DefaultTextFields are the argument names taken as free text when config
// does not name a tool's fields: string properties of the input schema
// with one of these names (any case) and no enum, const, format or pattern.
var DefaultTextFields = []string{"query", "q", "question", "search", "text", "prompt"}

// MaxSemanticText is the longest free text (in bytes, all fields
// together) compared by similarity; longer arguments are documents, not
// questions, and get exact hits only.
const MaxSemanticText = 2000

// semanticCandidates is how many nearest neighbours are examined: the
// nearest may fail the guard ("deploy to staging" next to "deploy to
// production") while the next one is the right answer.
const semanticCandidates = 8

// embedBackoff is how long similarity is skipped after an embedder or
// verifier failure, so an outage costs one timeout, not one per call.
const embedBackoff = 30 * time.Second

// schemaFields caches the default free-text fields of one tool's schema.
type schemaFields struct {
	mu     sync.RWMutex
	byTool map[string]toolFields
}

type toolFields struct {
	schema string
	fields []string
}

// get returns the default free-text fields of t, computing them once per
// schema.
func (s *schemaFields) get(t Tool) []string {
	s.mu.RLock()
	tf, ok := s.byTool[t.Name]
	s.mu.RUnlock()
	if ok && tf.schema == string(t.InputSchema) {
		return tf.fields
	}
	fields := DefaultFreeTextFields(t.InputSchema)
	s.mu.Lock()
	if s.byTool == nil {
		s.byTool = make(map[string]toolFields)
	}
	s.byTool[t.Name] = toolFields{schema: string(t.InputSchema), fields: fields}
	s.mu.Unlock()
	return fields
}

// DefaultFreeTextFields returns, sorted, the top-level properties of a
// JSON Schema that memory compares by similarity unless config says
// otherwise: named like DefaultTextFields, typed string, with no enum,
// const, format or pattern (those are values, not prose).
func DefaultFreeTextFields(schema json.RawMessage) []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil {
		return nil
	}
	var out []string
	for name, raw := range s.Properties {
		if !slices.Contains(DefaultTextFields, strings.ToLower(name)) {
			continue
		}
		var p map[string]json.RawMessage
		if json.Unmarshal(raw, &p) != nil {
			continue
		}
		if _, ok := p["enum"]; ok {
			continue
		}
		if _, ok := p["const"]; ok {
			continue
		}
		if _, ok := p["format"]; ok {
			continue
		}
		if _, ok := p["pattern"]; ok {
			continue
		}
		if !typeIsString(p["type"]) {
			continue
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

func typeIsString(raw json.RawMessage) bool {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one == "string"
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		return slices.Contains(many, "string")
	}
	return false
}

// textFields returns the free-text fields of t under r, or nil.
func (m *Memory) textFields(r *rules, t Tool) []string {
	if r.s.SemanticOff {
		return nil
	}
	if fields, ok := lookup(r.s.Semantic, t); ok {
		return fields
	}
	return m.fields.get(t)
}

// FreeText is the similarity side of one call: what a Store keeps with an
// entry for similarity hits, and what ScanNeighbours searches with.
type FreeText struct {
	Text     string // the free text as embedded and stored ("field: text" lines when several)
	Bucket   []byte // sha256 of tool, scope, the other arguments and the text fields present
	Embedder embedder.Identity
	Part     int64     // vec0 partition: hash of embedder identity and bucket
	Vec      []float32 // unit length; nil when embedding failed
}

// prepareSemantic splits c's arguments into free text and the rest. It
// returns nil when the tool has no free text in this call.
func (m *Memory) prepareSemantic(c *call) *FreeText {
	fields := m.textFields(c.r, c.t)
	if len(fields) == 0 {
		return nil
	}
	if !utf8.Valid(c.args) || bytes.Contains(c.args, []byte(`\ud`)) {
		// A lone surrogate or a byte that is not UTF-8 (see CanonicalJSON)
		// would decode to U+FFFD and compare equal to a real U+FFFD:
		// exact hits only.
		return nil
	}
	var args map[string]json.RawMessage
	if json.Unmarshal(c.args, &args) != nil {
		return nil // not an object: exact only
	}
	var present, texts []string
	for _, f := range fields {
		raw, ok := args[f]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) != nil || strings.TrimSpace(s) == "" {
			continue // not a string: compared exactly with the rest
		}
		present = append(present, f)
		texts = append(texts, s)
		delete(args, f)
	}
	if len(present) == 0 {
		return nil
	}
	rest, err := json.Marshal(args) // keys sorted, values already canonical
	if err != nil {
		return nil
	}
	text := texts[0]
	if len(present) > 1 {
		var b strings.Builder
		for i, f := range present {
			if i > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(f + ": " + texts[i])
		}
		text = b.String()
	}
	if len(text) > MaxSemanticText {
		return nil
	}
	text = m.redactText(text)
	h := sha256.New()
	h.Write([]byte("nexus-bucket-v1\x00" + c.t.Name + "\x00" + c.scope + "\x00"))
	h.Write(rest)
	h.Write([]byte("\x00" + strings.Join(present, "\x00")))
	return &FreeText{Text: text, Bucket: h.Sum(nil)}
}

// redactText removes registered secrets from free text before it is
// embedded or stored.
func (m *Memory) redactText(text string) string {
	switch {
	case m.opts.RedactText != nil:
		return m.opts.RedactText(text)
	case m.opts.Redact != nil:
		return string(m.opts.Redact([]byte(text)))
	}
	return text
}

// partition is the vec0 partition key of a bucket for one embedder.
func partition(embedderID string, dims int, bucket []byte) int64 {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00", embedderID, dims)
	h.Write(bucket)
	return int64(binary.BigEndian.Uint64(h.Sum(nil)[:8]))
}

// embed fills sc.vec, or leaves it nil when the embedder fails (logged,
// counted, and similarity is skipped for embedBackoff).
func (m *Memory) embed(ctx context.Context, c *call, sc *FreeText) {
	if time.Now().UnixNano() < m.embedBlockedUntil.Load() {
		return
	}
	id := m.emb.Identity()
	vs, err := m.emb.Embed(ctx, []string{sc.Text})
	if err == nil {
		err = embedder.CheckVectors(vs, 1, id.Dims)
	}
	if err == nil && (len(vs[0]) > MaxDims) {
		err = fmt.Errorf("%d dimensions: at most %d are supported", len(vs[0]), MaxDims)
	}
	if err != nil {
		if ctx.Err() != nil {
			return // the caller left; not the embedder's fault
		}
		m.embedBlockedUntil.Store(time.Now().Add(embedBackoff).UnixNano())
		m.pend.count(c.t, func(k *Counters) { k.EmbedFailures++ })
		m.warn("embed", "memory: embedder failed; exact hits only for a while", "embedder", id.ID(), "tool", c.t.Name, "err", err)
		return
	}
	sc.Embedder = id
	sc.Vec = vs[0]
	sc.Part = partition(id.ID(), len(sc.Vec), sc.Bucket)
}

// MaxDims bounds vector lengths (and the vec0 table names they make).
const MaxDims = 16384

// semHit is a neighbour served for a paraphrase.
type semHit struct {
	e          Entry
	similarity float64
	matched    string
	verified   bool
	// rewrites are what made it a hit: the rules of memory/canon that
	// tell the two texts apart, or "embedder" / "verifier" for a hit that
	// a configured embedder or verifier widened.
	rewrites []string
	pair     string // pairKey, for verification
}

// Candidate is a stored neighbour.
type Candidate struct {
	Entry
	Similarity float64
	Text       string
}

// semanticHit looks for a neighbour of sc that may be served for c.
//
// A neighbour is served when its text and sc's have one canonical form
// (memory/canon): every difference between them is a known
// meaning-preserving rewrite, and the hit says which. Similarity only ranks
// the neighbours. Beyond that, and only when nothing that always counts
// differs (canon.Significant) and the guard agrees, an HTTP embedder's
// score at or above Serve, or a verifier's yes in [Verify, Serve), widens
// what is served. Neighbours this caller stored itself within the
// rewording window are passed over (rewording): a caller that rewords its
// own question wants another answer.
func (m *Memory) semanticHit(ctx context.Context, c *call, sc *FreeText) (semHit, bool, error) {
	cands, err := m.neighbours(ctx, sc)
	if err != nil || len(cands) == 0 {
		return semHit{}, false, err
	}
	th := m.thresholds
	if th == nil {
		d := DefaultThresholds(sc.Embedder)
		th = &d
	}
	lexical := sc.Embedder.Name == embedder.LexicalName
	asked := canon.Normalize(sc.Text)
	now := m.now().UnixMilli()
	verified := false
	for _, cd := range cands {
		if !c.fresh(cd.Entry, now) {
			continue
		}
		if m.makers.own(cd.ID, c, now) {
			m.log.Debug("memory: similar call not served: the caller's own rewording", "tool", c.t.Name)
			continue
		}
		stored := canon.Normalize(cd.Text)
		key := pairKey(c.t.Name, asked, stored)
		if canon.Match(asked, stored) {
			h := semHit{e: cd.Entry, similarity: cd.Similarity, matched: cd.Text, rewrites: canon.Explain(stored, asked), pair: key}
			if ok, why := m.allows(ctx, c.t.Name, key, h.rewrites, c.r.s.MaxFalseHitRate); !ok {
				m.log.Debug("memory: similar call not served: "+why, "tool", c.t.Name)
				if c.shadow == nil && !strings.Contains(why, "refuted") {
					c.shadow = &h
				}
				continue
			}
			return h, true, nil
		}
		if cd.Similarity < th.Verify {
			continue
		}
		if w := canon.Significant(asked, stored); w != "" {
			m.pend.count(c.t, func(k *Counters) { k.GuardRejections++ })
			m.log.Debug("memory: similar call not served: a word that counts differs", "tool", c.t.Name,
				"similarity", cd.Similarity, "word", w)
			continue
		}
		if ok, reason := guard.Check(sc.Text, cd.Text); !ok {
			m.pend.count(c.t, func(k *Counters) { k.GuardRejections++ })
			m.log.Debug("memory: similar call not served: guard", "tool", c.t.Name,
				"similarity", cd.Similarity, "reason", reason)
			continue
		}
		if cd.Similarity >= th.Serve && !lexical {
			h := semHit{e: cd.Entry, similarity: cd.Similarity, matched: cd.Text, rewrites: []string{"embedder"}, pair: key}
			if ok, _ := m.allows(ctx, c.t.Name, key, h.rewrites, c.r.s.MaxFalseHitRate); ok {
				return h, true, nil
			}
			continue
		}
		// Gray zone: ask the verifier once per call.
		if m.ver == nil || verified || time.Now().UnixNano() < m.verifyBlockedUntil.Load() {
			m.pend.count(c.t, func(k *Counters) { k.GrayUnverified++ })
			continue
		}
		if ok, _ := m.allows(ctx, c.t.Name, key, []string{"verifier"}, c.r.s.MaxFalseHitRate); !ok {
			continue
		}
		verified = true
		same, err := m.ver.Same(ctx, c.t.Name, cd.Text, sc.Text)
		if err != nil {
			if ctx.Err() != nil {
				return semHit{}, false, nil
			}
			m.verifyBlockedUntil.Store(time.Now().Add(embedBackoff).UnixNano())
			m.pend.count(c.t, func(k *Counters) { k.GrayUnverified++ })
			m.warn("verify", "memory: verifier failed; gray-zone matches are misses for a while", "tool", c.t.Name, "err", err)
			continue
		}
		if same {
			m.pend.count(c.t, func(k *Counters) { k.GrayAccepted++ })
			return semHit{e: cd.Entry, similarity: cd.Similarity, matched: cd.Text, verified: true, rewrites: []string{"verifier"}, pair: key}, true, nil
		}
		m.pend.count(c.t, func(k *Counters) { k.GrayRejected++ })
	}
	return semHit{}, false, nil
}

// neighbours returns the semanticCandidates nearest stored entries of
// sc's bucket: from the in-memory index once it is built and up to date,
// else by the store's scan of the bucket.
func (m *Memory) neighbours(ctx context.Context, sc *FreeText) ([]Candidate, error) {
	if m.vi.idx != nil && m.vi.ready.Load() {
		err := m.vi.refresh(ctx, m.st)
		if err == nil {
			return m.vi.neighbours(ctx, m.st, sc, semanticCandidates)
		}
		if ctx.Err() != nil {
			return nil, err
		}
		m.stepAside("similarity index", err)
	}
	cands, err := m.st.ScanNeighbours(ctx, sc, semanticCandidates)
	if err != nil {
		return nil, fmt.Errorf("nearest neighbours: %w", err)
	}
	return cands, nil
}

// warn logs like stepAside: loud at most every 30 seconds per op.
func (m *Memory) warn(op, msg string, args ...any) {
	now := time.Now()
	m.logMu.Lock()
	last, seen := m.lastLog[op]
	loud := !seen || now.Sub(last) >= 30*time.Second
	if loud {
		m.lastLog[op] = now
	}
	m.logMu.Unlock()
	if loud {
		m.log.Warn(msg, args...)
	} else {
		m.log.Debug(msg, args...)
	}
}
