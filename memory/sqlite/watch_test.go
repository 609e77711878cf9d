package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/memory/memorytest"
)

// TestWatcherFastPath: when no connection committed, a look reads the
// WAL-index header only; a commit elsewhere sends it to SQLite again.
func TestWatcherFastPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	m := openTest(t, memory.Options{Backend: File(path)})
	ctx := context.Background()
	s, err := Open(ctx, path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Watch(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if s.watch.shm == nil {
		t.Skip("no wal-index mapping on this platform")
	}
	c := &memorytest.Child{}
	memorytest.Do(t, m, "", memorytest.ReadTool(), `{"q":1}`, c)
	memorytest.Do(t, m, "", memorytest.ReadTool(), `{"q":1}`, c)
	l, err := s.Sync(ctx, nil)
	if err != nil || !s.watch.hdrOK {
		t.Fatalf("sync: %v, header kept %v", err, s.watch.hdrOK)
	}
	if l, _ = s.Sync(ctx, nil); l.Moved {
		t.Fatal("nothing committed, but the look says data moved")
	}
	before := s.watch.lastHdr
	if _, err := m.Clear(ctx, "", ""); err != nil {
		t.Fatal(err)
	}
	if s.watch.shm.header() == before {
		t.Fatal("a commit left the WAL-index header as it was")
	}
	if l, _ = s.Sync(ctx, nil); !l.Moved || !l.Invalidated {
		t.Fatalf("after Clear: %+v", l)
	}
}
