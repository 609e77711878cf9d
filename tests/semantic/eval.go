package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/memory/canon"
	"github.com/nexus-mcp/nexus/memory/embedder"
	"github.com/nexus-mcp/nexus/memory/sqlite"
)

// Set is tests/semantic/pairs.json.
type Set struct {
	Tools []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"inputSchema"`
	} `json:"tools"`
	Paraphrases []Pair `json:"paraphrases"`
	NearMisses  []Pair `json:"near_misses"`
}

// Pair is two calls of one tool: the first is stored, the second asked.
type Pair struct {
	// Category groups pairs in the report: code, docs, search, tickets,
	// files, people, dates, directions, quantities, negations, v1-set;
	// in roles.json the kind of structure: relative, passive, when, of,
	// spatial.
	Category string          `json:"category"`
	Tool     string          `json:"tool"`
	First    json.RawMessage `json:"first"`
	Second   json.RawMessage `json:"second"`
	Why      string          `json:"why,omitempty"`
}

// LoadSet reads the evaluation set.
func LoadSet(path string) (*Set, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Set
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &s, nil
}

func (s *Set) tool(name string) memory.Tool {
	t := memory.Tool{Name: name, Server: name[:bytes.IndexByte([]byte(name), '.')], Annotated: true, ReadOnly: true}
	for _, x := range s.Tools {
		if x.Name == name {
			t.InputSchema = x.InputSchema
		}
	}
	return t
}

// scored is one pair with its similarity.
type scored struct {
	Pair
	a, b       string  // free texts
	sameBucket bool    // the non-text arguments agree
	sim        float64 // cosine of the two texts' vectors
	same       bool    // one canonical form (memory/canon): served by rewrites
	rewrites   []string
	forms      [2]string // the canonical forms, for -v
}

// split returns the free text (fields joined as memory joins them) and
// the canonical JSON of the other arguments.
func split(fields []string, args json.RawMessage) (string, string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil {
		return "", "", err
	}
	var present, texts []string
	for _, f := range fields {
		var s string
		if raw, ok := m[f]; ok && json.Unmarshal(raw, &s) == nil && s != "" {
			present = append(present, f)
			texts = append(texts, s)
			delete(m, f)
		}
	}
	rest, _ := json.Marshal(m)
	canon, err := memory.CanonicalJSON(rest)
	if err != nil {
		return "", "", err
	}
	text := ""
	if len(texts) == 1 {
		text = texts[0]
	} else {
		for i, f := range present {
			if i > 0 {
				text += "\n"
			}
			text += f + ": " + texts[i]
		}
	}
	return text, string(canon) + fmt.Sprint(present), nil
}

func (s *Set) score(ctx context.Context, e embedder.Embedder, pairs []Pair) ([]scored, error) {
	out := make([]scored, len(pairs))
	var texts []string
	for i, p := range pairs {
		fields := memory.DefaultFreeTextFields(s.tool(p.Tool).InputSchema)
		a, ra, err := split(fields, p.First)
		if err != nil {
			return nil, err
		}
		b, rb, err := split(fields, p.Second)
		if err != nil {
			return nil, err
		}
		fa, fb := canon.Normalize(a), canon.Normalize(b)
		out[i] = scored{Pair: p, a: a, b: b, sameBucket: ra == rb, same: canon.Match(fa, fb),
			rewrites: canon.Explain(fa, fb), forms: [2]string{fa.String(), fb.String()}}
		texts = append(texts, a, b)
	}
	vs, err := e.Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].sim = embedder.Cosine(vs[2*i], vs[2*i+1])
	}
	return out, nil
}

// Report is the evaluation of one embedder at one pair of thresholds.
type Report struct {
	Embedder   string
	Thresholds memory.Thresholds
	Para, Near int

	// Without a database: pairs one canonical form serves (Canon), and
	// pairs the similarity score alone would serve at Serve (Sim), as
	// similarity hits were decided before canonical forms.
	RecallCanon, RecallSim int // paraphrases served
	FalseCanon, FalseSim   int // near-misses served

	// End to end through memory.Memory.Call (no verifier).
	E2ERecall, E2EFalse int
	// ByCategory is the end-to-end outcome per category.
	ByCategory map[string]*CategoryReport

	para, near []scored
}

// CategoryReport is one category's end-to-end outcome.
type CategoryReport struct {
	Para, Served    int // paraphrase pairs, and how many were served
	Near, FalseHits int // near-miss pairs, and how many were served
}

// Evaluate scores the set with e and replays it through Memory.Call.
func Evaluate(ctx context.Context, s *Set, e embedder.Embedder, th memory.Thresholds, dir string) (*Report, error) {
	r := &Report{Embedder: e.Identity().ID(), Thresholds: th, Para: len(s.Paraphrases), Near: len(s.NearMisses)}
	var err error
	if r.para, err = s.score(ctx, e, s.Paraphrases); err != nil {
		return nil, err
	}
	if r.near, err = s.score(ctx, e, s.NearMisses); err != nil {
		return nil, err
	}
	r.RecallSim, r.RecallCanon = count(r.para, th)
	r.FalseSim, r.FalseCanon = count(r.near, th)

	m, err := memory.Open(ctx, memory.Options{Backend: sqlite.File(filepath.Join(dir, "eval.db")), Embedder: e, Thresholds: &th})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	if err := m.Err(); err != nil {
		return nil, err
	}
	m.SetSettings(memory.Settings{TTL: map[string]memory.TTL{"*": {Never: true}}})
	r.ByCategory = map[string]*CategoryReport{}
	cat := func(name string) *CategoryReport {
		if r.ByCategory[name] == nil {
			r.ByCategory[name] = &CategoryReport{}
		}
		return r.ByCategory[name]
	}
	replay := func(pairs []Pair, tally func(c *CategoryReport, served bool)) (int, error) {
		served := 0
		for _, p := range pairs {
			if _, err := m.Clear(ctx, "", ""); err != nil {
				return 0, err
			}
			t := s.tool(p.Tool)
			var calls atomic.Int64
			fwd := func(context.Context) (memory.Answer, error) {
				calls.Add(1)
				return memory.Answer{Result: json.RawMessage(`{"content":[{"type":"text","text":"answer"}]}`)}, nil
			}
			if _, err := m.Call(ctx, "", t, p.First, fwd); err != nil {
				return 0, err
			}
			res, err := m.Call(ctx, "", t, p.Second, fwd)
			if err != nil {
				return 0, err
			}
			st, _, _ := memory.CacheStatus(res)
			hit := calls.Load() == 1 && st == memory.StatusSemanticHit
			if hit {
				served++
			}
			tally(cat(p.Category), hit)
		}
		return served, nil
	}
	if r.E2ERecall, err = replay(s.Paraphrases, func(c *CategoryReport, hit bool) {
		c.Para++
		if hit {
			c.Served++
		}
	}); err != nil {
		return nil, err
	}
	if r.E2EFalse, err = replay(s.NearMisses, func(c *CategoryReport, hit bool) {
		c.Near++
		if hit {
			c.FalseHits++
		}
	}); err != nil {
		return nil, err
	}
	return r, nil
}

func count(ps []scored, th memory.Thresholds) (sim, same int) {
	for _, p := range ps {
		if !p.sameBucket {
			continue
		}
		if p.sim >= th.Serve {
			sim++
		}
		if p.same {
			same++
		}
	}
	return
}

// Print writes the report as text to paste into an issue note.
func (r *Report) Print(w *bytes.Buffer, verbose bool) {
	pct := func(n, d int) string { return fmt.Sprintf("%d/%d (%.1f%%)", n, d, 100*float64(n)/float64(max(d, 1))) }
	fmt.Fprintf(w, "embedder %s, serve >= %.2f, gray zone [%.2f, %.2f)\n", r.Embedder, r.Thresholds.Serve, r.Thresholds.Verify, r.Thresholds.Serve)
	fmt.Fprintf(w, "  paraphrase recall     one canonical form %-18s similarity alone %s\n", pct(r.RecallCanon, r.Para), pct(r.RecallSim, r.Para))
	fmt.Fprintf(w, "  near-miss false hits  one canonical form %-18s similarity alone %s\n", pct(r.FalseCanon, r.Near), pct(r.FalseSim, r.Near))
	fmt.Fprintf(w, "  end to end through Memory.Call (no verifier): recall %s, false hits %s\n", pct(r.E2ERecall, r.Para), pct(r.E2EFalse, r.Near))
	fmt.Fprintf(w, "  per category (end to end): paraphrases served, near-misses served\n")
	for _, name := range slices.Sorted(maps.Keys(r.ByCategory)) {
		c := r.ByCategory[name]
		fmt.Fprintf(w, "    %-11s recall %-16s false hits %d/%d\n", name, pct(c.Served, c.Para), c.FalseHits, c.Near)
	}
	if !verbose {
		return
	}
	list := func(title string, ps []scored) {
		fmt.Fprintf(w, "  %s:\n", title)
		ps = slices.Clone(ps)
		slices.SortFunc(ps, func(a, b scored) int {
			switch {
			case a.sim > b.sim:
				return -1
			case a.sim < b.sim:
				return 1
			}
			return 0
		})
		for _, p := range ps {
			g := fmt.Sprintf("served: %s", strings.Join(p.rewrites, ", "))
			if !p.same {
				g = fmt.Sprintf("%q / %q", p.forms[0], p.forms[1])
			}
			if !p.sameBucket {
				g = "other bucket"
			}
			fmt.Fprintf(w, "    %.3f  %q / %q  [%s] %s\n", p.sim, p.a, p.b, g, p.Why)
		}
	}
	list("paraphrases", r.para)
	list("near-misses", r.near)
}
