package memory

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestEvictionByCount(t *testing.T) {
	clk := newClock()
	m := openTest(t, Options{Now: clk.Now, MaxEntries: 100})
	c := &child{}
	ctx := context.Background()
	for i := range 100 {
		do(t, m, "", readTool, fmt.Sprintf(`{"i":%d}`, i), c)
		clk.Advance(time.Millisecond)
	}
	// Entry 0 is the oldest; using it makes entry 1 the least recently used.
	if st := status(t, do(t, m, "", readTool, `{"i":0}`, c)); st != StatusHit {
		t.Fatal(st)
	}
	clk.Advance(time.Millisecond)
	do(t, m, "", readTool, `{"i":100}`, c) // over the bound: evict down to 90
	st, err := m.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Entries != 90 {
		t.Fatalf("entries after eviction = %d, want 90", st.Entries)
	}
	if s := status(t, do(t, m, "", readTool, `{"i":0}`, c)); s != StatusHit {
		t.Fatalf("recently used entry evicted: %q", s)
	}
	if s := status(t, do(t, m, "", readTool, `{"i":100}`, c)); s != StatusHit {
		t.Fatalf("new entry evicted: %q", s)
	}
	if s := status(t, do(t, m, "", readTool, `{"i":1}`, c)); s != StatusMiss {
		t.Fatalf("least recently used entry kept: %q", s)
	}
	// Entries 1..11 were the 11 least recently used.
	if s := status(t, do(t, m, "", readTool, `{"i":12}`, c)); s != StatusHit {
		t.Fatalf("entry 12 evicted: %q", s)
	}
}

func TestEvictionByBytes(t *testing.T) {
	clk := newClock()
	m := openTest(t, Options{Now: clk.Now, MaxBytes: 50_000, MaxResultBytes: 10_000})
	c := &child{text: func(args json.RawMessage) string { return string(args) + strings.Repeat("x", 900) }}
	for i := range 200 {
		do(t, m, "", readTool, fmt.Sprintf(`{"i":%d}`, i), c)
		clk.Advance(time.Millisecond)
	}
	st, err := m.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Bytes > 50_000 || st.Bytes < 30_000 {
		t.Fatalf("bytes = %d, want within (30000, 50000]", st.Bytes)
	}
	if s := status(t, do(t, m, "", readTool, `{"i":199}`, c)); s != StatusHit {
		t.Fatalf("newest evicted: %q", s)
	}
	if s := status(t, do(t, m, "", readTool, `{"i":0}`, c)); s != StatusMiss {
		t.Fatalf("oldest kept: %q", s)
	}
	// Totals maintained by triggers agree with the table.
	var n, b int64
	if err := sq(m).db.QueryRow(`SELECT count(*), coalesce(sum(size),0) FROM entries`).Scan(&n, &b); err != nil {
		t.Fatal(err)
	}
	var tn, tb int64
	if err := sq(m).db.QueryRow(`SELECT entries, bytes FROM totals`).Scan(&tn, &tb); err != nil {
		t.Fatal(err)
	}
	if n != tn || b != tb {
		t.Fatalf("totals %d/%d, table %d/%d", tn, tb, n, b)
	}
}

func TestTwoProcesses(t *testing.T) {
	// Two Opens of one file stand in for two processes (same SQLite engine).
	path := filepath.Join(t.TempDir(), "memory.db")
	m1 := openTest(t, Options{Path: path})
	m2 := openTest(t, Options{Path: path})
	c := &child{}
	do(t, m1, "", readTool, `{"q":1}`, c)
	if s := status(t, do(t, m2, "", readTool, `{"q":1}`, c)); s != StatusHit {
		t.Fatalf("second process: %q", s)
	}
	do(t, m2, "", writeTool, `{}`, c)
	if s := status(t, do(t, m1, "", readTool, `{"q":1}`, c)); s != StatusMiss {
		t.Fatalf("invalidation by other process not seen: %q", s)
	}
	// Concurrent writers from both.
	errs := make(chan error, 2)
	for _, m := range []*Memory{m1, m2} {
		go func() {
			for i := range 50 {
				args := json.RawMessage(fmt.Sprintf(`{"w":%d}`, i))
				if _, err := m.Call(context.Background(), "", otherTool, args, c.forward(args)); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	st, err := m1.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Entries != 51 {
		t.Fatalf("entries = %d, want 51", st.Entries)
	}
}

func TestStatsPersist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	clk := newClock()
	m := openTest(t, Options{Path: path, Now: clk.Now})
	slow := plain(func(context.Context) (json.RawMessage, error) {
		clk.Advance(30 * time.Millisecond) // the child takes 30 ms
		return textResult("slow answer"), nil
	})
	ctx := context.Background()
	for range 3 {
		if _, err := m.Call(ctx, "", readTool, nil, slow); err != nil {
			t.Fatal(err)
		}
	}
	do(t, m, "", Tool{Name: "x.y", Server: "x"}, `{}`, &child{})
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// Another process (a CLI) reads them.
	m2 := openTest(t, Options{Path: path, Now: clk.Now})
	st, err := m2.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Hits != 2 || st.Misses != 1 || st.Bypasses != 1 || st.Entries != 1 || st.SavedMS < 60 {
		t.Fatalf("stats %+v", st)
	}
	if len(st.Tools) != 2 || st.Tools[0].Tool != readTool.Name || st.Tools[0].Hits != 2 || st.Tools[0].Entries != 1 {
		t.Fatalf("tool stats %+v", st.Tools)
	}
	if _, err := json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	// Counters flush in the background too, without Close or Stats.
	m3 := openTest(t, Options{Path: path, FlushInterval: 10 * time.Millisecond, Now: clk.Now})
	if _, err := m3.Call(ctx, "", readTool, nil, slow); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var hits int64
		sq(m2).db.QueryRow(`SELECT hits FROM tool_stats WHERE tool = ?`, readTool.Name).Scan(&hits)
		if hits == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hits = %d, background flush did not happen", hits)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func forwarded(t *testing.T, m *Memory, tool Tool) (string, time.Duration) {
	t.Helper()
	var calls atomic.Int64
	start := time.Now()
	res, err := m.Call(context.Background(), "", tool, json.RawMessage(`{"z":1}`), plain(func(context.Context) (json.RawMessage, error) {
		calls.Add(1)
		return textResult("fresh"), nil
	}))
	took := time.Since(start)
	if err != nil || text(res) != "fresh" || calls.Load() != 1 {
		t.Fatalf("call not forwarded: %v %q %d", err, text(res), calls.Load())
	}
	return status(t, res), took
}

func TestCorruptFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	garbage := make([]byte, 64<<10)
	r := rand.NewChaCha8([32]byte{1})
	r.Read(garbage)
	if err := os.WriteFile(path, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := Open(context.Background(), Options{Path: path, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer m.Close()
	if m.Err() == nil {
		t.Fatal("garbage file accepted as a database")
	}
	for range 2 {
		if s, _ := forwarded(t, m, readTool); s != StatusBypass {
			t.Fatalf("status %q, want bypass", s)
		}
	}
	if err := m.MarkStale(context.Background(), "code-kg"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Stats(context.Background()); err == nil {
		t.Fatal("Stats of a disabled memory did not report why")
	}
	// The file was left alone for the operator to inspect.
	if b, _ := os.ReadFile(path); string(b[:100]) != string(garbage[:100]) {
		t.Fatal("garbage file modified")
	}
}

func TestTruncatedFile(t *testing.T) {
	for _, keep := range []int{2, 3, 4, 6, 8, 10} {
		t.Run(fmt.Sprintf("keep=%d/%d", keep-1, keep), func(t *testing.T) { testTruncated(t, keep) })
	}
}

// testTruncated cuts a database with 300 entries to (keep-1)/keep of its size.
func testTruncated(t *testing.T, keep int) {
	path := damageFixture(t)
	if _, err := os.Stat(path + "-wal"); err == nil {
		os.Remove(path + "-wal")
		os.Remove(path + "-shm")
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()*int64(keep-1)/int64(keep)); err != nil {
		t.Fatal(err)
	}
	checkServesAfterDamage(t, path, "truncation")
}

func TestCorruptPages(t *testing.T) {
	// Pages overwritten in the middle: the schema on page 1 is intact, so
	// Open succeeds and the damage shows per query.
	path := damageFixture(t)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.NewChaCha8([32]byte{2})
	r.Read(b[4096 : len(b)/2])
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	checkServesAfterDamage(t, path, "corruption")
}

func TestLockedDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	const busy = 200 * time.Millisecond
	m := openTest(t, Options{Path: path, BusyTimeout: busy})
	c := &child{}
	do(t, m, "", readTool, `{"stored":true}`, c)

	// Another handle holds the write lock.
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), `BEGIN EXCLUSIVE`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), `INSERT INTO generations (name, gen) VALUES ('lock-test', 1)`); err != nil {
		t.Fatal(err)
	}

	// Hits still read (WAL readers do not wait for writers).
	if s := status(t, do(t, m, "", readTool, `{"stored":true}`, c)); s != StatusHit {
		t.Fatalf("hit under lock: %q", s)
	}
	// A miss is answered; storing gives up after the busy timeout.
	s, took := forwarded(t, m, readTool)
	if took > 10*busy {
		t.Fatalf("miss under lock took %v", took)
	}
	t.Logf("miss under lock: %s in %v", s, took)
	// Later misses do not wait again (write back-off).
	_, took = forwarded(t, m, otherTool)
	if took > busy/2 {
		t.Fatalf("second miss under lock took %v", took)
	}
	// A mutating call is answered, and its invalidation is not lost: until
	// it is written, the server's tools bypass memory in this process.
	s, took = forwarded(t, m, writeTool)
	if s != StatusBypass || took > 10*busy {
		t.Fatalf("mutating call under lock: %q in %v", s, took)
	}
	if s := status(t, do(t, m, "", readTool, `{"stored":true}`, c)); s != StatusBypass {
		t.Fatalf("stale entry served after unwritten invalidation: %q", s)
	}
	if _, err := conn.ExecContext(context.Background(), `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	if err := m.flush(context.Background()); err != nil {
		t.Fatalf("flush after unlock: %v", err)
	}
	if s := status(t, do(t, m, "", readTool, `{"stored":true}`, c)); s != StatusMiss {
		t.Fatalf("after unlock: %q", s)
	}
}

func TestNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	m := openTest(t, Options{Path: path})
	var v int
	if err := sq(m).db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != schemaVersion {
		t.Fatalf("user_version %d, %v", v, err)
	}
	var mode string
	if err := sq(m).db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode %q, %v", mode, err)
	}
	if _, err := sq(m).db.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	m.Close()
	m2, err := Open(context.Background(), Options{Path: path, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if m2.Err() == nil || !strings.Contains(m2.Err().Error(), "newer") {
		t.Fatalf("Err = %v", m2.Err())
	}
	if s, _ := forwarded(t, m2, readTool); s != StatusBypass {
		t.Fatalf("status %q", s)
	}
	if _, err := Open(context.Background(), Options{}); err == nil {
		t.Fatal("empty path accepted")
	}
}

// populate inserts n entries for tool with args {"i":0..n-1} in one
// transaction, as Call would have stored them.
func populate(tb testing.TB, m *Memory, tool Tool, n int) {
	tb.Helper()
	ctx := context.Background()
	now := m.now().UnixMilli()
	res := textResult(strings.Repeat("r", 200))
	err := sq(m).writeTx(ctx, func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, `INSERT INTO entries (key, tool, server, scope, fingerprint, args, result, size,
			duration_ms, created_at, expires_at, last_used_at) VALUES (?, ?, ?, '', ?, ?, ?, ?, 5, ?, NULL, ?)`)
		if err != nil {
			return err
		}
		defer st.Close()
		for i := range n {
			args := []byte(fmt.Sprintf(`{"i":%d}`, i))
			fp := fingerprint(args)
			if _, err := st.ExecContext(ctx, cacheKey(tool.Name, "", fp), tool.Name, tool.Server, fp, args, res, len(res), now, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
}

func BenchmarkLookupHit(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			m := openTest(b, Options{MaxEntries: 2 * n, FlushInterval: time.Hour})
			m.SetSettings(kept(Settings{TTL: map[string]TTL{"*": {Never: true}}}))
			populate(b, m, readTool, n)
			args := make([]json.RawMessage, 1024)
			for i := range args {
				args[i] = json.RawMessage(fmt.Sprintf(`{"i":%d}`, (i*7919)%n))
			}
			forward := plain(func(context.Context) (json.RawMessage, error) {
				b.Fatal("forwarded: not a hit")
				return nil, nil
			})
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				res, err := m.Call(ctx, "", readTool, args[i%len(args)], forward)
				if err != nil || res == nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// sq is m's SQLite store, for tests that look inside it.
func sq(m *Memory) *sqliteStore { return m.st.(*sqliteStore) }

// damageFixture is a closed memory.db holding 300 entries of 3 KB, to damage.
func damageFixture(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "memory.db")
	m := openTest(t, Options{Path: path, MaxEntries: 100000})
	big := &child{text: func(args json.RawMessage) string { return string(args) + strings.Repeat("y", 3000) }}
	for i := range 300 {
		do(t, m, "", readTool, fmt.Sprintf(`{"i":%d}`, i), big)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkServesAfterDamage opens the damaged database and makes the 300 calls again:
// every one must get the child's answer, never a damaged entry, and memory must
// notice the damage (some calls bypass it).
func checkServesAfterDamage(t *testing.T, path, damage string) {
	t.Helper()
	m, err := Open(context.Background(), Options{Path: path, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer m.Close()
	m.SetSettings(kept(Settings{}))
	t.Logf("Err after %s: %v", damage, m.Err())
	seen := map[string]int{}
	for i := range 300 {
		args := json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
		want := string(args) + strings.Repeat("y", 3000)
		res, err := m.Call(context.Background(), "", readTool, args, plain(func(context.Context) (json.RawMessage, error) {
			return textResult(want), nil
		}))
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if text(res) != want {
			t.Fatalf("call %d: wrong answer %.40q", i, text(res))
		}
		seen[status(t, res)]++
	}
	t.Logf("statuses after %s: %v", damage, seen)
	if seen[StatusBypass] == 0 {
		t.Fatalf("%s never noticed: %v", damage, seen)
	}
}
