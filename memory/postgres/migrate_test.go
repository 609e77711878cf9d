package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/nexus-mcp/nexus/internal/pgtest"
	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/memory/memorytest"
)

// TestMigrateFromVersion2: a schema written before verification was
// stored (version 2) is upgraded in place: its entries are served, its
// counters kept, and what verification measures is stored beside them.
func TestMigrateFromVersion2(t *testing.T) {
	dsn := pgtest.Schema(t)
	ctx := context.Background()
	m, _ := openTest(t, dsn)
	c := &memorytest.Child{}
	memorytest.Do(t, m, "", memorytest.ReadTool(), `{"a":1}`, c)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	// Make the schema what version 2 left: an entry and its counters, no
	// verification columns or table.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, s := range []string{`DROP TABLE nexus_memory_refuted`,
		`ALTER TABLE nexus_memory_tool_stats DROP COLUMN semantic_checks, DROP COLUMN false_hits,
			DROP COLUMN exact_checks, DROP COLUMN stale_answers`,
		`UPDATE nexus_memory_schema SET version = 2`} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}

	m2, _ := openTest(t, dsn)
	memorytest.WantStatus(t, "the entry stored at version 2", memorytest.Do(t, m2, "", memorytest.ReadTool(), `{"a":1}`, c), memory.StatusHit)
	var v int
	if err := conn.QueryRow(ctx, `SELECT version FROM nexus_memory_schema`).Scan(&v); err != nil || v != pgSchemaVersion {
		t.Fatalf("schema version %d, %v; want %d", v, err, pgSchemaVersion)
	}
	st, err := m2.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Misses != 1 || st.Hits != 1 {
		t.Fatalf("counters kept across the migration: %+v", st)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO nexus_memory_refuted (tool, asked, stored, rewrites, refuted_at) VALUES ('a.b', 'x', 'y', 'article', 1)`); err != nil {
		t.Fatalf("refuted pairs are not stored after the migration: %v", err)
	}
}
