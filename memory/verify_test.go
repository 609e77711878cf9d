package memory_test

import (
	"math"
	"testing"
	"time"

	. "github.com/nexus-mcp/nexus/memory"
	. "github.com/nexus-mcp/nexus/memory/memorytest"
)

// TestRefutedSimilarityHit: a similarity hit the child refutes when it is
// verified raises the tool's measured false-hit rate, stops similarity hits
// for the tool past memory.maxFalseHitRate, and its pair is never served
// again, however either side is reworded, even with no limit. Other tools
// are not affected.
func TestRefutedSimilarityHit(t *testing.T) {
	m := openTest(t, Options{})
	rules := Settings{
		TTL:             map[string]TTL{"*": {Never: true}},
		Verify:          Verify{Rate: 1, PerMinute: 100},
		MaxFalseHitRate: 0.1,
	}
	m.SetSettings(rules)
	c := &Child{} // answers each query with an answer of its own: a paraphrase's answer differs
	tool := SearchTool().Name
	status := func(q string) string {
		t.Helper()
		return Status(t, DoVerified(t, m, "", SearchTool(), SearchArgs(q, 10), c))
	}
	measured := func() Measured {
		for _, x := range m.Measured() {
			if x.Tool == tool {
				return x
			}
		}
		return Measured{}
	}

	if s := status("postgres connection pool settings"); s != StatusMiss {
		t.Fatalf("first call: %s", s)
	}
	if s := status("show me the postgres connection pool settings"); s != StatusSemanticHit {
		t.Fatalf("paraphrase: %s, want a similarity hit (then verified)", s)
	}
	WaitFor(t, "the verification", func() bool { return measured().SemanticChecks == 1 })
	got := measured()
	if got.FalseHits != 1 || got.FalseHitRate.Rate != 1 || got.FalseHitRate.Low <= 0.1 || !got.Blocked {
		t.Fatalf("after a refuted hit: %+v", got)
	}
	if len(got.Distrusted) == 0 {
		t.Fatalf("the refuted hit's rewrites are not distrusted: %+v", got)
	}

	// The refuted pair again, and another paraphrase of it: forwarded.
	for _, q := range []string{"show me the postgres connection pool settings", "get the postgres connection pool settings"} {
		if s := status(q); s != StatusMiss {
			t.Fatalf("%q after the refutation: %s, want miss", q, s)
		}
	}

	// No limit, no verification: the refuted pair is still never served.
	m.SetSettings(Settings{TTL: map[string]TTL{"*": {Never: true}}})
	if s := status("list the postgres connection pool settings"); s != StatusMiss {
		t.Fatalf("refuted pair with no limit: %s, want miss", s)
	}
	// Another tool keeps its similarity hits.
	other := SearchTool()
	other.Name = "wiki.search"
	other.Server = "wiki"
	Do(t, m, "", other, SearchArgs("how do I rotate the api keys", 10), c)
	if s := Status(t, Do(t, m, "", other, SearchArgs("how to rotate api keys", 10), c)); s != StatusSemanticHit {
		t.Fatalf("another tool: %s, want a similarity hit", s)
	}
}

// TestVerifyExactHits: a sampled exact hit the child answers differently
// counts as stale; the budget bounds the child calls per minute; only the
// forward given to VerifyLater verifies.
func TestVerifyExactHits(t *testing.T) {
	m := openTest(t, Options{})
	m.SetSettings(Settings{TTL: map[string]TTL{"*": {Never: true}}, Verify: Verify{Rate: 1, PerMinute: 2}})
	c := &Child{}
	args := `{"a":1}`
	Do(t, m, "", ReadTool(), args, c) // the child's first answer is stored
	for range 4 {
		if s := Status(t, DoVerified(t, m, "", ReadTool(), args, c)); s != StatusHit {
			t.Fatalf("repeat: %s", s)
		}
	}
	WaitFor(t, "two verifications", func() bool {
		ms := m.Measured()
		return len(ms) == 1 && ms[0].ExactChecks == 2
	})
	time.Sleep(50 * time.Millisecond)
	ms := m.Measured()
	if ms[0].ExactChecks != 2 || c.Calls.Load() != 3 {
		t.Fatalf("budget of 2 a minute: %d checks, %d child calls", ms[0].ExactChecks, c.Calls.Load())
	}
	if ms[0].Stale != 2 || ms[0].StaleRate.Rate != 1 {
		t.Fatalf("the child's answers differ from the stored one: %+v", ms[0])
	}
	// The call's own forward is never called again after the answer: only
	// a forward given to VerifyLater is.
	m.SetSettings(Settings{TTL: map[string]TTL{"*": {Never: true}}, Verify: Verify{Rate: 1, PerMinute: 100}})
	for range 3 {
		Do(t, m, "", ReadTool(), args, c)
	}
	time.Sleep(50 * time.Millisecond)
	if n := c.Calls.Load(); n != 3 {
		t.Fatalf("Call's forward called after the answer: %d child calls, want 3", n)
	}
}

func TestWilson(t *testing.T) {
	for _, tc := range []struct {
		k, n      int64
		low, high float64
	}{
		{0, 0, 0, 0},
		{1, 1, 0.2065, 1},
		{0, 10, 0, 0.2775},
		{5, 10, 0.2366, 0.7634},
		{1, 100, 0.0018, 0.0545},
	} {
		got := WilsonForTest(tc.k, tc.n)
		if math.Abs(got.Low-tc.low) > 1e-3 || math.Abs(got.High-tc.high) > 1e-3 {
			t.Errorf("wilson(%d, %d) = %+v, want [%v, %v]", tc.k, tc.n, got, tc.low, tc.high)
		}
	}
}
