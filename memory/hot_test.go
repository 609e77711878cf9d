package memory_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/nexus-mcp/nexus/memory"
	. "github.com/nexus-mcp/nexus/memory/memorytest"
	"github.com/nexus-mcp/nexus/memory/sqlite"
)

// TestHotLayerSeesOtherProcesses: an invalidation committed through
// another connection to memory.db is seen by the next call, though the
// entry was served from the hot layer just before.
func TestHotLayerSeesOtherProcesses(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		other      func(t *testing.T, m2 *Memory, c *Child)
		invalidate bool
	}{
		{"mutating call", func(t *testing.T, m2 *Memory, c *Child) { Do(t, m2, "", WriteTool(), `{}`, c) }, true},
		{"MarkStale", func(t *testing.T, m2 *Memory, c *Child) {
			if err := m2.MarkStale(ctx, ReadTool().Server); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"Clear tool", func(t *testing.T, m2 *Memory, c *Child) {
			if _, err := m2.Clear(ctx, ReadTool().Server, ReadTool().Name); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"Clear all", func(t *testing.T, m2 *Memory, c *Child) {
			if _, err := m2.Clear(ctx, "", ""); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"other server invalidated", func(t *testing.T, m2 *Memory, c *Child) {
			if err := m2.MarkStale(ctx, OtherTool().Server); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"unrelated store", func(t *testing.T, m2 *Memory, c *Child) { Do(t, m2, "", OtherTool(), `{"x":1}`, c) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "memory.db")
			m1 := openTest(t, Options{Backend: sqlite.File(path)})
			m2 := openTest(t, Options{Backend: sqlite.File(path)})
			c := &Child{}
			Do(t, m1, "", ReadTool(), `{"q":1}`, c)
			if s := Status(t, Do(t, m1, "", ReadTool(), `{"q":1}`, c)); s != StatusHit {
				t.Fatalf("repeat: %s", s)
			}
			if ok := m1.HotHas(CacheKey(ReadTool().Name, "", Fingerprint([]byte(`{"q":1}`)))); !ok {
				t.Fatal("the hit did not reach the hot layer")
			}
			tc.other(t, m2, c)
			want := StatusHit
			if tc.invalidate {
				want = StatusMiss
			}
			if s := Status(t, Do(t, m1, "", ReadTool(), `{"q":1}`, c)); s != want {
				t.Fatalf("after the other connection's %s: %s, want %s", tc.name, s, want)
			}
		})
	}
}

// TestHotLayerSeesOtherProcess does the same with a real second process:
// this test binary, re-run as helperInvalidate.
func TestHotLayerSeesOtherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	m := openTest(t, Options{Backend: sqlite.File(path)})
	c := &Child{}
	Do(t, m, "", ReadTool(), `{"q":1}`, c)
	if s := Status(t, Do(t, m, "", ReadTool(), `{"q":1}`, c)); s != StatusHit {
		t.Fatalf("repeat: %s", s)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperInvalidate$")
	cmd.Env = append(os.Environ(), "NEXUS_MEMORY_HELPER_DB="+path, "NEXUS_MEMORY_HELPER_SERVER="+ReadTool().Server)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helper process: %v\n%s", err, out)
	}
	if s := Status(t, Do(t, m, "", ReadTool(), `{"q":1}`, c)); s != StatusMiss {
		t.Fatalf("after another process invalidated: %s, want miss", s)
	}
}

// TestHelperInvalidate is the second process of TestHotLayerSeesOtherProcess.
func TestHelperInvalidate(t *testing.T) {
	path := os.Getenv("NEXUS_MEMORY_HELPER_DB")
	if path == "" {
		t.Skip("helper process only")
	}
	m := openTest(t, Options{Backend: sqlite.File(path)})
	if err := m.MarkStale(context.Background(), os.Getenv("NEXUS_MEMORY_HELPER_SERVER")); err != nil {
		t.Fatal(err)
	}
}
