package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/internal/sqlitedb"
	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/memory/memorytest"
)

// TestMigrateFromVersion3: a memory.db written before verification was
// stored (schema version 3) is upgraded in place: its entries are served,
// its counters kept, and what verification measures is stored beside them.
func TestMigrateFromVersion3(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	ctx := context.Background()
	m := openTest(t, memory.Options{Backend: File(path)})
	c := &memorytest.Child{}
	memorytest.Do(t, m, "", memorytest.ReadTool(), `{"a":1}`, c)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	// Make the file what version 3 left: an entry and its counters, no
	// verification columns or table.
	raw, err := sqlitedb.Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`DROP TABLE refuted`, `ALTER TABLE tool_stats DROP COLUMN semantic_checks`,
		`ALTER TABLE tool_stats DROP COLUMN false_hits`, `ALTER TABLE tool_stats DROP COLUMN exact_checks`,
		`ALTER TABLE tool_stats DROP COLUMN stale_answers`, `PRAGMA user_version = 3`} {
		if _, err := raw.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	raw.Close()

	m2 := openTest(t, memory.Options{Backend: File(path)})
	if s := memorytest.Status(t, memorytest.Do(t, m2, "", memorytest.ReadTool(), `{"a":1}`, c)); s != memory.StatusHit {
		t.Fatalf("the entry stored at version 3: %s, want hit", s)
	}
	var v int
	if err := sqlDB(t, m2).QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != schemaVersion {
		t.Fatalf("user_version %d, %v; want %d", v, err, schemaVersion)
	}
	st, err := m2.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Misses != 1 || st.Hits != 1 {
		t.Fatalf("counters kept across the migration: %+v", st)
	}
	if _, err := sqlDB(t, m2).Exec(`INSERT INTO refuted (tool, asked, stored, rewrites, refuted_at) VALUES ('a.b', 'x', 'y', 'article', 1)`); err != nil {
		t.Fatalf("refuted pairs are not stored after the migration: %v", err)
	}
}
