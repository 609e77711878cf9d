package aggregation

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/memory/sqlite"
	"github.com/nexus-mcp/nexus/upstream"
)

// TestChildExitWhileClosingForgetsNothing: a child that exits once the gateway
// began to close (Ctrl-C reaches the whole process group, so children often go
// first) is not taken for a crash: what memory holds stays fresh. The same exit
// while the gateway runs marks its answers stale.
func TestChildExitWhileClosingForgetsNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		closing bool
		want    string
	}{
		{"while closing", true, memory.StatusHit},
		{"while running", false, memory.StatusMiss},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse("test.json", []byte(fmt.Sprintf(`{
				"servers": {"good": {"command": %q, "args": ["-test.run=^$"], "env": {"NEXUS_TEST_CHILD": "good"}}},
				"policy": {"default": {"allow": ["*"]}},
				"ttl": {"*": "1h"}}`, os.Args[0])))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "memory.db")
			mem, err := memory.Open(context.Background(), memory.Options{Backend: sqlite.File(path)})
			if err != nil {
				t.Fatal(err)
			}
			g, err := New(cfg, Options{Memory: mem})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := g.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if err := g.Ready(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := g.Call(ctx, "anonymous", "good.echo", json.RawMessage(`{"text":"x"}`)); err != nil {
				t.Fatal(err)
			}
			cn, _ := g.kids()["good"].current()
			g.closing.Store(tc.closing) // as Close does first
			if err := cn.Transport.(*upstream.Process).Kill(); err != nil {
				t.Fatal(err)
			}
			// The exit is seen, the manifest rebuilt (and a crash marks the
			// answers stale) before the child is back.
			deadline := time.Now().Add(10 * time.Second)
			for g.kids()["good"].status().Restarts == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the child's exit was never seen")
				}
				time.Sleep(5 * time.Millisecond)
			}
			g.lists.rebuild(ctx)
			g.closing.Store(false)
			g.Close()
			// A second gateway process would see what this one left in memory.db.
			m2, err := memory.Open(ctx, memory.Options{Backend: sqlite.File(path)})
			if err != nil {
				t.Fatal(err)
			}
			defer m2.Close()
			defer mem.Close()
			m2.SetSettings(cfg.MemoryRules())
			tool := memory.Tool{Name: "good.echo", Server: "good", Annotated: true, ReadOnly: true}
			res, err := m2.Call(ctx, "anonymous", tool, json.RawMessage(`{"text":"x"}`), func(context.Context) (memory.Answer, error) {
				return memory.Answer{Result: json.RawMessage(`{"content":[]}`)}, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if st, _, _ := memory.CacheStatus(res); st != tc.want {
				t.Fatalf("after the child's exit %s: %q, want %q", tc.name, st, tc.want)
			}
		})
	}
}
