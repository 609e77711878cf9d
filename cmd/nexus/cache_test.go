package main

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/memory/memorytest"
	"github.com/nexus-mcp/nexus/memory/sqlite"
)

// TestCacheStatsShowsMeasured: what a serving process's verification
// measured is in memory.db, so `nexus cache stats`, another process, shows
// it per tool (and --json), with the rate's interval.
func TestCacheStatsShowsMeasured(t *testing.T) {
	home := t.TempDir()
	t.Setenv("NEXUS_HOME", home)
	t.Setenv("NEXUS_CONFIG", "")
	// A gateway's memory: a similarity hit the child refuted.
	m := memorytest.OpenMemory(t, memory.Options{Backend: sqlite.File(filepath.Join(home, "memory.db"))})
	m.SetSettings(memory.Settings{TTL: map[string]memory.TTL{"*": {Never: true}}, Verify: memory.Verify{Rate: 1, PerMinute: 100}})
	c := &memorytest.Child{}
	tool := memorytest.SearchTool()
	memorytest.DoVerified(t, m, "", tool, memorytest.SearchArgs("postgres connection pool settings", 10), c)
	memorytest.DoVerified(t, m, "", tool, memorytest.SearchArgs("show me the postgres connection pool settings", 10), c)
	memorytest.WaitFor(t, "the verification", func() bool {
		ms := m.Measured()
		return len(ms) == 1 && ms[0].FalseHits == 1
	})
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	var out strings.Builder
	if err := runCLI(context.Background(), []string{"nexus", "cache", "stats"}, strings.NewReader(""), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(out.String(), "verified against the child")
	var row []string
	for line := range strings.Lines(table) {
		if f := strings.Fields(line); len(f) > 0 && f[0] == tool.Name {
			row = f
		}
	}
	// TOOL, similarity checked, false hits, rate (interval), exact checked, stale, rate, similarity hits
	if want := []string{tool.Name, "1", "1", "100.0%", "(20.7-100.0%)", "0", "0", "-", "on"}; !ok || strings.Join(row, " ") != strings.Join(want, " ") {
		t.Errorf("cache stats: measured row %q, want %q:\n%s", row, want, out.String())
	}
	out.Reset()
	if err := runCLI(context.Background(), []string{"nexus", "cache", "stats", "--json"}, strings.NewReader(""), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var st memory.Stats
	if err := json.Unmarshal([]byte(out.String()), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Measured) != 1 || st.Measured[0].FalseHits != 1 || st.Measured[0].FalseHitRate.Low < 0.2 {
		t.Errorf("cache stats --json measured: %+v", st.Measured)
	}
	var stored memory.Verified
	for _, ts := range st.Tools {
		if ts.Tool == tool.Name {
			stored = ts.Verified
		}
	}
	if stored.SemanticChecks != 1 || stored.FalseHits != 1 {
		t.Errorf("cache stats --json tool counts: %+v", stored)
	}
}
