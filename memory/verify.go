package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nexus-mcp/nexus/memory/canon"
)

// Verify is how memory measures itself: a share of the answers it serves
// (similarity hits and exact hits, read-only tools only, since only those
// are remembered) is also asked of the child after the answer left, and the
// child's answer compared with the one served. A similarity answer that
// differs is a false hit; an exact answer that differs was stale.
type Verify struct {
	// Rate is the share of hits sampled, 0 (off) to 1.
	Rate float64
	// PerMinute bounds the child calls verification makes, per process
	// and minute; 0 makes none.
	PerMinute int
}

// verifyTimeout bounds one verification's child call.
const verifyTimeout = 30 * time.Second

// z95 is the normal quantile of a 95% confidence interval.
const z95 = 1.959964

// Measured is what verification found for one tool, as this process knows
// it (the store's counts when it opened, and its own since):
// similarity answers checked and how many the child refuted (false hits),
// exact answers checked and how many had changed (stale), each rate with
// its 95% Wilson score interval.
type Measured struct {
	Tool           string   `json:"tool"`
	SemanticChecks int64    `json:"semantic_checks"`
	FalseHits      int64    `json:"false_hits"`
	FalseHitRate   Interval `json:"false_hit_rate"`
	ExactChecks    int64    `json:"exact_checks"`
	Stale          int64    `json:"stale"`
	StaleRate      Interval `json:"stale_rate"`
	// Blocked says the tool gets no similarity hits: the false-hit rate's
	// lower bound is above Settings.MaxFalseHitRate.
	Blocked bool `json:"blocked,omitempty"`
	// Distrusted are the rewrites of refuted similarity hits: a hit that
	// needs one of them is not served for this tool.
	Distrusted []string `json:"distrusted,omitempty"`
}

// Interval is a rate and its 95% Wilson score interval.
type Interval struct {
	Rate float64 `json:"rate"`
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// wilson returns the rate k/n with its Wilson score interval: unlike the
// normal approximation it stays within [0, 1] and is honest about small
// counts (1 refuted of 1 is 0.21-1, not 1).
func wilson(k, n int64) Interval {
	if n == 0 {
		return Interval{}
	}
	p := float64(k) / float64(n)
	nf := float64(n)
	z2 := z95 * z95
	den := 1 + z2/nf
	center := (p + z2/(2*nf)) / den
	half := z95 * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf)) / den
	return Interval{Rate: p, Low: max(center-half, 0), High: min(center+half, 1)}
}

// measurements are verification's counts and what it learned, per tool:
// what the store held when memory opened (every process's, flushed) and
// what this process measured since, which it also writes to the store.
type measurements struct {
	mu         sync.Mutex
	tools      map[string]*toolMeasure
	minute     int64 // the budget's minute (unix minutes)
	used       int   // child calls made in it
	wg         sync.WaitGroup
	refutedKey map[string]bool // pairKey of refuted similarity hits
}

type toolMeasure struct {
	semChecks, falseHits, exactChecks, stale int64
	distrusted                               map[string]bool
}

func (ms *measurements) tool(name string) *toolMeasure {
	if ms.tools == nil {
		ms.tools = make(map[string]*toolMeasure)
	}
	t := ms.tools[name]
	if t == nil {
		t = &toolMeasure{distrusted: map[string]bool{}}
		ms.tools[name] = t
	}
	return t
}

// pairKey names a similarity pair by its texts' canonical forms, so a
// refuted pair stays refuted however either side is reworded.
func pairKey(tool string, asked, stored canon.Form) string {
	return Refutation{Tool: tool, Asked: asked.String(), Stored: stored.String()}.key()
}

// key is the pairKey of the refuted pair.
func (r Refutation) key() string { return r.Tool + "\x00" + r.Asked + "\x00" + r.Stored }

// pairOf is the pair a pairKey names, as a Refutation to keep.
func pairOf(key string) (Refutation, bool) {
	parts := strings.SplitN(key, "\x00", 3)
	if len(parts) != 3 {
		return Refutation{}, false
	}
	return Refutation{Tool: parts[0], Asked: parts[1], Stored: parts[2]}, true
}

// refute marks the pair key refuted.
func (ms *measurements) refute(key string) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.refutedKey == nil {
		ms.refutedKey = map[string]bool{}
	}
	ms.refutedKey[key] = true
}

// allows reports whether a similarity hit on the pair key with rewrites
// may be served for tool: the pair was never refuted, none of its
// rewrites is distrusted for the tool, and the tool's false-hit rate is
// not known to be above limit (its Wilson lower bound; 0: no limit).
func (ms *measurements) allows(tool, key string, rewrites []string, limit float64) (ok bool, why string) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.refutedKey[key] {
		return false, "the child refuted this pair"
	}
	t := ms.tools[tool]
	if t == nil {
		return true, ""
	}
	for _, r := range rewrites {
		if t.distrusted[r] {
			return false, "rewrite " + r + " was refuted for this tool"
		}
	}
	if limit > 0 && wilson(t.falseHits, t.semChecks).Low > limit {
		return false, "the tool's measured false-hit rate is over memory.maxFalseHitRate"
	}
	return true, ""
}

// allows is measurements.allows, and asks the store whether another
// process refuted the pair since this one opened it (a replica's child,
// another gateway's): one read per similarity hit. A store that cannot
// say serves no similarity hit.
func (m *Memory) allows(ctx context.Context, tool, key string, rewrites []string, limit float64) (bool, string) {
	if ok, why := m.meas.allows(tool, key, rewrites, limit); !ok {
		return false, why
	}
	p, ok := pairOf(key)
	if m.st == nil || !ok {
		return true, ""
	}
	refuted, err := m.st.Refuted(ctx, p.Tool, p.Asked, p.Stored)
	if err != nil {
		m.warn("refuted", "memory: refuted pairs not read; similarity hits forwarded", "tool", tool, "err", err)
		return false, "the store could not say whether the pair was refuted"
	}
	if refuted {
		m.meas.refute(key)
		return false, "the child refuted this pair (another process saw it)"
	}
	return true, ""
}

// take spends one child call of the budget, if any is left this minute,
// for a hit sampled at rate.
func (ms *measurements) take(v Verify, now time.Time) bool {
	if v.Rate <= 0 || v.PerMinute <= 0 || rand.Float64() >= v.Rate {
		return false
	}
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if m := now.Unix() / 60; m != ms.minute {
		ms.minute, ms.used = m, 0
	}
	if ms.used >= v.PerMinute {
		return false
	}
	ms.used++
	return true
}

// seed starts the measurements from what the store holds: the counts of
// every process (flushed) and the pairs refuted, with their rewrites.
func (ms *measurements) seed(tools []ToolStats, refuted []Refutation) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	for _, ts := range tools {
		v := ts.Verified
		if v == (Verified{}) {
			continue
		}
		t := ms.tool(ts.Tool)
		t.semChecks += v.SemanticChecks
		t.falseHits += v.FalseHits
		t.exactChecks += v.ExactChecks
		t.stale += v.Stale
	}
	if len(refuted) > 0 && ms.refutedKey == nil {
		ms.refutedKey = map[string]bool{}
	}
	for _, r := range refuted {
		ms.refutedKey[r.key()] = true
		t := ms.tool(r.Tool)
		for _, rw := range r.Rewrites {
			if rw != "spelling" {
				t.distrusted[rw] = true
			}
		}
	}
}

// loadMeasured seeds the measurements from the store, so that a refuted
// pair is never served again and a tool over its false-hit limit stays
// over it after a restart, and `nexus cache stats` shows what serving
// processes measured. A store that cannot be read leaves them empty.
func (m *Memory) loadMeasured(ctx context.Context) {
	tools, err := m.st.Stats(ctx)
	if err != nil {
		m.warn("measured", "memory: verification's counts not read; starting from none", "store", m.st.Where(), "err", err)
		return
	}
	refuted, err := m.st.Refutations(ctx)
	if err != nil {
		m.warn("measured", "memory: refuted pairs not read; starting from none", "store", m.st.Where(), "err", err)
		return
	}
	m.meas.seed(tools, refuted)
}

// judged records one verification's outcome for t: in the measurements,
// in the counters flushed to the store, and, for a refuted similarity
// hit, its pair at once in the store, so it is never served again even
// after a restart.
func (m *Memory) judged(ctx context.Context, t Tool, sem *semHit, differs bool) {
	m.meas.record(t.Name, sem, differs)
	m.pend.count(t, func(k *Counters) {
		switch {
		case sem == nil:
			k.ExactChecks++
			if differs {
				k.Stale++
			}
		default:
			k.SemanticChecks++
			if differs {
				k.FalseHits++
			}
		}
	})
	if sem == nil || !differs || m.st == nil {
		return
	}
	r, ok := pairOf(sem.pair)
	if !ok {
		return
	}
	r.At = m.now().UnixMilli()
	for _, rw := range sem.rewrites {
		if rw != "spelling" {
			r.Rewrites = append(r.Rewrites, rw)
		}
	}
	if _, err := m.st.Write(ctx, &Write{Refuted: []Refutation{r}, Now: r.At}); err != nil {
		m.warn("refuted", "memory: a refuted pair was not kept; this process still never serves it", "tool", t.Name, "err", err)
	}
}

// record counts one verification's outcome; a refuted similarity hit
// (sem non-nil, differs) also refutes its pair and distrusts its
// rewrites for the tool.
func (ms *measurements) record(tool string, sem *semHit, differs bool) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	t := ms.tool(tool)
	if sem == nil {
		t.exactChecks++
		if differs {
			t.stale++
		}
		return
	}
	t.semChecks++
	if !differs {
		return
	}
	t.falseHits++
	if ms.refutedKey == nil {
		ms.refutedKey = map[string]bool{}
	}
	ms.refutedKey[sem.pair] = true
	for _, r := range sem.rewrites {
		if r != "spelling" {
			t.distrusted[r] = true
		}
	}
}

// Measured returns, sorted by tool, what verification found in this
// process (nothing before any verification).
func (m *Memory) Measured() []Measured {
	if m == nil {
		return nil
	}
	limit := m.rules.Load().s.MaxFalseHitRate
	ms := &m.meas
	ms.mu.Lock()
	defer ms.mu.Unlock()
	out := make([]Measured, 0, len(ms.tools))
	for name, t := range ms.tools {
		fr := wilson(t.falseHits, t.semChecks)
		d := make([]string, 0, len(t.distrusted))
		for r := range t.distrusted {
			d = append(d, r)
		}
		slices.Sort(d)
		out = append(out, Measured{
			Tool: name, SemanticChecks: t.semChecks, FalseHits: t.falseHits, FalseHitRate: fr,
			ExactChecks: t.exactChecks, Stale: t.stale, StaleRate: wilson(t.stale, t.exactChecks),
			Blocked: limit > 0 && fr.Low > limit, Distrusted: d,
		})
	}
	slices.SortFunc(out, func(a, b Measured) int { return strings.Compare(a.Tool, b.Tool) })
	return out
}

// verifyLater samples a hit served for c (sem nil: an exact hit of
// served): when taken, forward is called once more, after the answer, on
// a context of its own, and the child's answer is compared with served.
func (m *Memory) verifyLater(ctx context.Context, c *call, served json.RawMessage, sem *semHit, forward Forward) {
	if forward == nil || !m.meas.take(c.r.s.Verify, time.Now()) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), verifyTimeout)
	m.meas.wg.Add(1)
	go func() {
		defer m.meas.wg.Done()
		defer cancel()
		go func() {
			select {
			case <-m.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		a, err := forward(ctx)
		if err != nil || a.childFailed() || a.AskedClient {
			return // no verdict
		}
		differs := !sameAnswer(served, m.redactBytes(a.Result))
		// A verdict is kept even when memory began closing meanwhile: Close
		// waits for it, and a refuted pair not kept would be served again
		// after a restart.
		kept, done := context.WithTimeout(context.WithoutCancel(ctx), verifyTimeout)
		defer done()
		m.judged(kept, c.t, sem, differs)
		if differs {
			kind := "exact answer had changed"
			if sem != nil {
				kind = "similarity answer refuted by the child"
			}
			m.log.Info("memory: verification: "+kind, "tool", c.t.Name)
		}
	}()
}

// sameAnswer reports whether two CallToolResults say the same thing:
// equal once their _meta is set aside and their JSON made canonical.
func sameAnswer(a, b json.RawMessage) bool {
	ca, okA := answerBody(a)
	cb, okB := answerBody(b)
	return okA && okB && bytes.Equal(ca, cb)
}

func answerBody(raw json.RawMessage) ([]byte, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil, false
	}
	delete(obj, "_meta")
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, false
	}
	c, err := CanonicalJSON(b)
	return c, err == nil
}
