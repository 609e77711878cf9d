package memory_test

import (
	"context"
	"testing"

	"github.com/nexus-mcp/nexus/internal/pgtest"
	. "github.com/nexus-mcp/nexus/memory"
	. "github.com/nexus-mcp/nexus/memory/memorytest"
	"github.com/nexus-mcp/nexus/memory/postgres"
)

// TestPostgresClaimAfterAnotherStored: a replica whose lookup missed
// just before another replica stored the answer (and released its claim)
// is served that answer instead of calling the child again.
func TestPostgresClaimAfterAnotherStored(t *testing.T) {
	dsn := pgtest.Schema(t)
	a, b := OpenMemory(t, Options{Backend: postgres.DSN(dsn)}), OpenMemory(t, Options{Backend: postgres.DSN(dsn)})
	c := &Child{}
	Do(t, a, "", ReadTool(), `{}`, c)
	// b's lookup happened before a stored: it saw no entry.
	res, done, release, err := b.ClaimAfterMiss(context.Background(), ReadTool(), []byte(`{}`))
	if err != nil || !done {
		t.Fatalf("claim after another replica stored: done %v, err %v; want its answer", done, err)
	}
	release()
	if Text(res) != "answer 1 to {}" {
		t.Fatalf("served %q", Text(res))
	}
	if n := c.Calls.Load(); n != 1 {
		t.Fatalf("child called %d times, want 1", n)
	}
}
