package tests

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/internal/pgtest"
)

// replica is one `nexus serve --http` process of a deployment whose
// replicas share memory in PostgreSQL: its own NEXUS_HOME (as its own
// machine would have), its own fixture child, one streamable HTTP session.
type replica struct {
	h      *home
	c      *client.Client
	stderr *lockedBuffer
}

// startReplicas starts n replicas sharing memory at dsn (passed as
// NEXUS_PG_DSN, which the config names).
func startReplicas(t *testing.T, n int, dsn string) []*replica {
	t.Helper()
	rs := make([]*replica, n)
	for i := range rs {
		h := memoryHome(t, map[string]any{"memory": map[string]any{"backend": "postgres", "dsn": "${env:NEXUS_PG_DSN}"}})
		url, stderr := h.serveHTTPEnv([]string{"NEXUS_PG_DSN=" + dsn})
		c, err := httpClient(t, url, "")
		if err != nil {
			t.Fatalf("replica %d: initialize: %v\n%s", i+1, err, stderr)
		}
		rs[i] = &replica{h: h, c: c, stderr: stderr}
	}
	return rs
}

// call makes one tool call and returns its cache status and text.
func (r *replica) call(t *testing.T, tool string, args map[string]any) (status, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := r.c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}})
	if err != nil {
		t.Fatalf("%s: %v\n%s", tool, err, r.stderr)
	}
	if res.IsError {
		t.Fatalf("%s failed: %+v", tool, res)
	}
	if res.Meta != nil {
		if rep, ok := res.Meta.AdditionalFields["nexus/cache"].(map[string]any); ok {
			status, _ = rep["status"].(string)
		}
	}
	if len(res.Content) > 0 {
		text = mcp.GetTextFromContent(res.Content[0])
	}
	return status, text
}

// lookups is how many lookups the children of rs received, together.
func lookups(rs []*replica) int {
	n := 0
	for _, r := range rs {
		n += r.h.calls()["lookup"]
	}
	return n
}

// TestReplicasShareMemory: three gateways on loopback, one PostgreSQL. A
// result stored by one is a hit on the others; a mutating call on one
// invalidates on all, including their hot layers, by the time it returned.
func TestReplicasShareMemory(t *testing.T) {
	t.Parallel()
	rs := startReplicas(t, 3, pgtest.Schema(t))
	staging := map[string]any{"env": "staging"}
	st, first := rs[0].call(t, "fx__lookup", staging)
	if st != "miss" {
		t.Fatalf("first call on replica 1: %q, want miss", st)
	}
	for i, r := range rs[1:] {
		st, text := r.call(t, "fx__lookup", staging)
		if st != "hit" || text != first {
			t.Fatalf("replica %d: %q %q, want a hit answering %q", i+2, st, text, first)
		}
	}
	if n := lookups(rs); n != 1 {
		t.Fatalf("the children received %d lookups, want 1", n)
	}

	// Every replica holds both entries in its hot layer.
	prod := map[string]any{"env": "production"}
	rs[2].call(t, "fx__lookup", prod)
	for _, r := range rs {
		for _, args := range []map[string]any{staging, prod} {
			r.call(t, "fx__lookup", args)
			if st, _ := r.call(t, "fx__lookup", args); st != "hit" {
				t.Fatalf("before the write: %q, want hit", st)
			}
		}
	}
	if st, _ := rs[1].call(t, "fx__destroy", map[string]any{"target": "x"}); st != "bypass" {
		t.Fatalf("destroy: %q, want bypass", st)
	}
	// Right after the write returned: replica 1 and 3 each ask for what
	// the other has not refetched yet.
	if st, _ := rs[0].call(t, "fx__lookup", staging); st != "miss" {
		t.Errorf("replica 1 after the write on replica 2: %q, want miss", st)
	}
	if st, _ := rs[2].call(t, "fx__lookup", prod); st != "miss" {
		t.Errorf("replica 3 after the write on replica 2: %q, want miss", st)
	}
	if st, _ := rs[1].call(t, "fx__lookup", prod); st != "hit" {
		t.Errorf("replica 2, refetched by replica 3: %q, want hit", st)
	}
}

// TestReplicasOutlivePostgres: with the database gone, every call is
// answered, and once the replicas' hot-layer leases lapse, forwarded
// (memory steps aside and says so on stderr); when it is back, memory
// serves again without a restart.
func TestReplicasOutlivePostgres(t *testing.T) {
	t.Parallel()
	proxy, dsn := pgtest.NewProxy(t, pgtest.Schema(t))
	rs := startReplicas(t, 2, dsn)
	args := map[string]any{"env": "staging"}
	rs[0].call(t, "fx__lookup", args)
	if st, _ := rs[1].call(t, "fx__lookup", args); st != "hit" {
		t.Fatalf("before the outage: %q, want hit", st)
	}
	proxy.Stop()
	// A replica may serve its hot layer until its lease lapses (no other
	// replica can answer an invalidation meanwhile); then it steps aside.
	for i, r := range rs {
		eventually(t, 10*time.Second, fmt.Sprintf("replica %d to step aside", i+1), func() bool {
			st, _ := r.call(t, "fx__lookup", args)
			if st != "hit" && st != "bypass" {
				t.Fatalf("replica %d during the outage: %q", i+1, st)
			}
			return st == "bypass"
		})
	}
	before := lookups(rs)
	for i, r := range rs {
		for j := range 3 {
			st, text := r.call(t, "fx__lookup", args)
			if st != "bypass" || !strings.HasPrefix(text, "lookup ") {
				t.Fatalf("replica %d call %d during the outage: %q %q, want a forwarded answer (bypass)", i+1, j, st, text)
			}
		}
	}
	if n := lookups(rs) - before; n != 6 {
		t.Fatalf("%d lookups reached the children during the outage, want 6", n)
	}
	eventually(t, 10*time.Second, "replica 1 to log that memory steps aside", func() bool {
		return strings.Contains(rs[0].stderr.String(), "stepping aside")
	})
	proxy.Start()
	fresh := map[string]any{"env": "after"}
	eventually(t, 20*time.Second, "memory to come back on replica 1", func() bool {
		st, _ := rs[0].call(t, "fx__lookup", fresh)
		return st == "hit"
	})
	eventually(t, 20*time.Second, "replica 2 to be served replica 1's answer", func() bool {
		st, _ := rs[1].call(t, "fx__lookup", fresh)
		return st == "hit"
	})
}

// TestReplicasSingleFlight: the same slow read sent to three replicas at
// once reaches one child. (Whether the others waited for it or found it
// stored depends on timing; either way the child answers once. The
// memory contract suite pins the waiting itself.)
func TestReplicasSingleFlight(t *testing.T) {
	t.Parallel()
	rs := startReplicas(t, 3, pgtest.Schema(t))
	args := map[string]any{"ms": 300}
	statuses := make([]string, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Go(func() { statuses[i], _ = r.call(t, "fx__sleep", args) })
	}
	wg.Wait()
	n := 0
	for _, r := range rs {
		n += r.h.calls()["sleep"]
	}
	if n != 1 {
		t.Fatalf("the children received %d sleeps, want 1 (statuses %v)", n, statuses)
	}
	if slices.Sort(statuses); !slices.Equal(statuses, []string{"hit", "hit", "miss"}) {
		t.Fatalf("statuses %v, want one miss and two hits", statuses)
	}
}
