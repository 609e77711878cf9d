package memory_test

import (
	"context"
	"path/filepath"
	"testing"

	. "github.com/nexus-mcp/nexus/memory"
	. "github.com/nexus-mcp/nexus/memory/memorytest"
	"github.com/nexus-mcp/nexus/memory/sqlite"
)

// TestIndexFollowsOtherProcesses: a paraphrase stored by another
// connection is found through the index, and an invalidation there
// stops it being served.
func TestIndexFollowsOtherProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	m1 := openTest(t, Options{Backend: sqlite.File(path)})
	m1.WaitIndex(context.Background())
	m2 := openTest(t, Options{Backend: sqlite.File(path)})
	c := &Child{}
	Do(t, m2, "", SearchTool(), SearchArgs("postgres connection pool settings", 10), c)
	res := Do(t, m1, "", SearchTool(), SearchArgs("connection pool settings for postgres", 10), c)
	if st, _, _ := SemanticReport(t, res); st != StatusSemanticHit {
		t.Fatalf("paraphrase of the other connection's entry: %s", st)
	}
	if ready, n := m1.IndexSize(); !ready || n != 1 {
		t.Fatalf("index ready %v size %d", ready, n)
	}
	if err := m2.MarkStale(context.Background(), SearchTool().Server); err != nil {
		t.Fatal(err)
	}
	if st := Status(t, Do(t, m1, "", SearchTool(), SearchArgs("settings of the postgres connection pool", 10), c)); st != StatusMiss {
		t.Fatalf("after invalidation: %s", st)
	}
	// The stale entry keeps its vector (similarity never serves it); the
	// miss just stored its own.
	if n := indexSize(m1); n != 2 {
		t.Errorf("index holds %d vectors, want 2", n)
	}
}

// TestIndexBuiltAtOpen: a memory opened on a database with vectors finds
// them through the index.
func TestIndexBuiltAtOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	m1 := openTest(t, Options{Backend: sqlite.File(path)})
	c := &Child{}
	Do(t, m1, "", SearchTool(), SearchArgs("postgres connection pool settings", 10), c)
	m1.Close()
	m2 := openTest(t, Options{Backend: sqlite.File(path)})
	m2.WaitIndex(context.Background())
	if n := indexSize(m2); n != 1 {
		t.Fatalf("index holds %d vectors, want 1", n)
	}
	res := Do(t, m2, "", SearchTool(), SearchArgs("connection pool settings for postgres", 10), c)
	if st, _, _ := SemanticReport(t, res); st != StatusSemanticHit {
		t.Fatalf("paraphrase after reopening: %s", st)
	}
}

// indexSize is the number of vectors m's similarity index holds.
func indexSize(m *Memory) int {
	_, n := m.IndexSize()
	return n
}
