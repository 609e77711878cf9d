package memory_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/nexus-mcp/nexus/memory"
	. "github.com/nexus-mcp/nexus/memory/memorytest"
	"github.com/nexus-mcp/nexus/memory/sqlite"
)

// TestRefutedAcrossRestart: what verification learned outlives the
// process. A similarity hit the child refutes raises the tool's measured
// false-hit rate in the store; after a restart of the store the tool is
// still over memory.maxFalseHitRate (another paraphrase of the tool is not
// served with the limit, and is without it), the refuted pair is never
// served however reworded, another process's Stats shows the counts, and
// other tools keep their similarity hits.
func TestRefutedAcrossRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	tool := SearchTool()
	kept := TTL{Never: true}
	limited := Settings{TTL: map[string]TTL{"*": kept}, Verify: Verify{Rate: 1, PerMinute: 100}, MaxFalseHitRate: 0.1}
	c := &Child{} // answers each query with an answer of its own: a paraphrase's answer differs
	measured := func(m *Memory) Measured {
		for _, x := range m.Measured() {
			if x.Tool == tool.Name {
				return x
			}
		}
		return Measured{}
	}

	first := openTest(t, Options{Backend: sqlite.File(path)})
	first.SetSettings(limited)
	if s := Status(t, DoVerified(t, first, "", tool, SearchArgs("postgres connection pool settings", 10), c)); s != StatusMiss {
		t.Fatalf("first call: %s", s)
	}
	if s := Status(t, DoVerified(t, first, "", tool, SearchArgs("show me the postgres connection pool settings", 10), c)); s != StatusSemanticHit {
		t.Fatalf("paraphrase: %s, want a similarity hit (then verified)", s)
	}
	WaitFor(t, "the verification", func() bool { return measured(first).FalseHits == 1 })
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name     string
		settings Settings
		asked    string
		// another paraphrase, by a rewrite never refuted: served unless
		// the tool is over the limit
		other string
	}{
		{"the refuted pair, with the limit", limited, "show me the postgres connection pool settings", StatusMiss},
		{"the refuted pair, no limit, no verification", Settings{TTL: map[string]TTL{"*": kept}}, "show me the postgres connection pool settings", StatusSemanticHit},
		{"the refuted pair reworded, no limit", Settings{TTL: map[string]TTL{"*": kept}}, "list postgres connection pool settings", StatusSemanticHit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each restart on a copy of the file: a miss stores its answer.
			m := openTest(t, Options{Backend: sqlite.File(copyFile(t, path))})
			m.SetSettings(tc.settings)
			got := measured(m)
			if got.SemanticChecks != 1 || got.FalseHits != 1 || len(got.Distrusted) == 0 {
				t.Fatalf("after a restart: %+v, want 1 check, 1 false hit and the rewrites distrusted", got)
			}
			if blocked := tc.settings.MaxFalseHitRate > 0; got.Blocked != blocked {
				t.Fatalf("after a restart: blocked %v, want %v", got.Blocked, blocked)
			}
			if s := Status(t, Do(t, m, "", tool, SearchArgs(tc.asked, 10), c)); s != StatusMiss {
				t.Fatalf("%q after a restart: %s, want miss", tc.asked, s)
			}
			Do(t, m, "", tool, SearchArgs("redis cache eviction policy", 10), c)
			if s := Status(t, Do(t, m, "", tool, SearchArgs("redis cache eviction policies", 10), c)); s != tc.other {
				t.Fatalf("another paraphrase (inflection) after a restart: %s, want %s", s, tc.other)
			}
		})
	}

	// Another process reads the counts from the store.
	m := openTest(t, Options{Backend: sqlite.File(path)})
	st, err := m.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var v Verified
	for _, ts := range st.Tools {
		if ts.Tool == tool.Name {
			v = ts.Verified
		}
	}
	if v.SemanticChecks != 1 || v.FalseHits != 1 {
		t.Fatalf("stored counts of %s: %+v", tool.Name, v)
	}
	// Another tool keeps its similarity hits.
	other := SearchTool()
	other.Name, other.Server = "wiki.search", "wiki"
	m.SetSettings(limited)
	Do(t, m, "", other, SearchArgs("how do I rotate the api keys", 10), c)
	if s := Status(t, Do(t, m, "", other, SearchArgs("how to rotate api keys", 10), c)); s != StatusSemanticHit {
		t.Fatalf("another tool: %s, want a similarity hit", s)
	}
}

// copyFile copies a closed SQLite file (and its WAL, if any) to a
// directory of t's own and returns the copy's path.
func copyFile(t *testing.T, path string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(path))
	for _, sfx := range []string{"", "-wal"} {
		b, err := os.ReadFile(path + sfx)
		if os.IsNotExist(err) && sfx != "" {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst+sfx, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}
