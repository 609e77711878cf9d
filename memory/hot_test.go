package memory

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestHotLayerSeesOtherProcesses: an invalidation committed through
// another connection to memory.db is seen by the next call, though the
// entry was served from the hot layer just before.
func TestHotLayerSeesOtherProcesses(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		other      func(t *testing.T, m2 *Memory, c *child)
		invalidate bool
	}{
		{"mutating call", func(t *testing.T, m2 *Memory, c *child) { do(t, m2, "", writeTool, `{}`, c) }, true},
		{"MarkStale", func(t *testing.T, m2 *Memory, c *child) {
			if err := m2.MarkStale(ctx, readTool.Server); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"Clear tool", func(t *testing.T, m2 *Memory, c *child) {
			if _, err := m2.Clear(ctx, readTool.Server, readTool.Name); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"Clear all", func(t *testing.T, m2 *Memory, c *child) {
			if _, err := m2.Clear(ctx, "", ""); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"other server invalidated", func(t *testing.T, m2 *Memory, c *child) {
			if err := m2.MarkStale(ctx, otherTool.Server); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"unrelated store", func(t *testing.T, m2 *Memory, c *child) { do(t, m2, "", otherTool, `{"x":1}`, c) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "memory.db")
			m1 := openTest(t, Options{Path: path})
			m2 := openTest(t, Options{Path: path})
			c := &child{}
			do(t, m1, "", readTool, `{"q":1}`, c)
			if s := status(t, do(t, m1, "", readTool, `{"q":1}`, c)); s != StatusHit {
				t.Fatalf("repeat: %s", s)
			}
			if _, _, ok := m1.hot.get(cacheKey(readTool.Name, "", fingerprint([]byte(`{"q":1}`)))); !ok {
				t.Fatal("the hit did not reach the hot layer")
			}
			tc.other(t, m2, c)
			want := StatusHit
			if tc.invalidate {
				want = StatusMiss
			}
			if s := status(t, do(t, m1, "", readTool, `{"q":1}`, c)); s != want {
				t.Fatalf("after the other connection's %s: %s, want %s", tc.name, s, want)
			}
		})
	}
}

// TestHotLayerSeesOtherProcess does the same with a real second process:
// this test binary, re-run as helperInvalidate.
func TestHotLayerSeesOtherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	m := openTest(t, Options{Path: path})
	c := &child{}
	do(t, m, "", readTool, `{"q":1}`, c)
	if s := status(t, do(t, m, "", readTool, `{"q":1}`, c)); s != StatusHit {
		t.Fatalf("repeat: %s", s)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperInvalidate$")
	cmd.Env = append(os.Environ(), "NEXUS_MEMORY_HELPER_DB="+path, "NEXUS_MEMORY_HELPER_SERVER="+readTool.Server)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helper process: %v\n%s", err, out)
	}
	if s := status(t, do(t, m, "", readTool, `{"q":1}`, c)); s != StatusMiss {
		t.Fatalf("after another process invalidated: %s, want miss", s)
	}
}

// TestHelperInvalidate is the second process of TestHotLayerSeesOtherProcess.
func TestHelperInvalidate(t *testing.T) {
	path := os.Getenv("NEXUS_MEMORY_HELPER_DB")
	if path == "" {
		t.Skip("helper process only")
	}
	m := openTest(t, Options{Path: path})
	if err := m.MarkStale(context.Background(), os.Getenv("NEXUS_MEMORY_HELPER_SERVER")); err != nil {
		t.Fatal(err)
	}
}

func TestHotLayerBound(t *testing.T) {
	h := newHot(3 * (hotOverhead + 10))
	for i := range 5 {
		h.put([]byte{byte(i)}, entry{id: int64(i), result: make([]byte, 9)}, 0, 0)
	}
	if h.size > h.max || len(h.items) != 3 {
		t.Fatalf("size %d of %d, %d items", h.size, h.max, len(h.items))
	}
	if _, _, ok := h.get([]byte{0}); ok {
		t.Error("the least recently used entry was kept")
	}
	if _, _, ok := h.get([]byte{4}); !ok {
		t.Error("the newest entry was evicted")
	}
	h.put([]byte{9}, entry{result: make([]byte, 4*hotOverhead)}, 0, 0)
	if _, _, ok := h.get([]byte{9}); ok {
		t.Error("an entry over the bound was kept")
	}
	epoch := h.currentEpoch()
	h.reset()
	h.put([]byte{7}, entry{}, 0, epoch)
	if _, _, ok := h.get([]byte{7}); ok || h.size != 0 {
		t.Error("a read from before a reset was kept")
	}
}

// TestMetaTemplate: a hot hit's bytes are the bytes withMeta makes.
func TestMetaTemplate(t *testing.T) {
	report := cacheReport(StatusHit, 42, false)
	for _, in := range []string{
		`{}`, `{"content":[{"type":"text","text":"a <b> & c"}]}`,
		`{"_meta":{"x":1},"content":[]}`, `{"_meta":{},"z":true,"a":[1,2]}`, `{"_meta":null}`,
		` {"content" : [ ] , "structuredContent": {"k": "\u2028"} } `,
	} {
		want, err := withMeta(json.RawMessage(in), MetaKey, report)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := newMetaTemplate([]byte(in))
		if tmpl == nil {
			t.Fatalf("%s: no template", in)
		}
		if got := tmpl.fill(report); string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", in, got, want)
		}
	}
	if newMetaTemplate([]byte(`{"text":"\u0000nexus-cache-report-slot\u0000"}`)) != nil {
		t.Error("a result holding the slot got a template")
	}
}

// TestWatcherFastPath: when no connection committed, a look reads the
// WAL-index header only; a commit elsewhere sends it to SQLite again.
func TestWatcherFastPath(t *testing.T) {
	m := openTest(t, Options{})
	if sq(m).watch.shm == nil {
		t.Skip("no wal-index mapping on this platform")
	}
	c := &child{}
	do(t, m, "", readTool, `{"q":1}`, c)
	do(t, m, "", readTool, `{"q":1}`, c)
	ctx := context.Background()
	l, err := sq(m).watch.sync(ctx, m.hot)
	if err != nil || !sq(m).watch.hdrOK {
		t.Fatalf("sync: %v, header kept %v", err, sq(m).watch.hdrOK)
	}
	if l, _ = sq(m).watch.sync(ctx, m.hot); l.moved {
		t.Fatal("nothing committed, but the look says data moved")
	}
	before := sq(m).watch.lastHdr
	if _, err := m.Clear(ctx, "", ""); err != nil {
		t.Fatal(err)
	}
	if sq(m).watch.shm.header() == before {
		t.Fatal("a commit left the WAL-index header as it was")
	}
	if l, _ = sq(m).watch.sync(ctx, m.hot); !l.moved || !l.invalidated {
		t.Fatalf("after Clear: %+v", l)
	}
}
