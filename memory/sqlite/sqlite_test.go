package sqlite

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

	"github.com/nexus-mcp/nexus/internal/sqlitedb"
	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/memory/memorytest"
)

func TestEvictionByCount(t *testing.T) {
	clk := memorytest.NewClock()
	m := openTest(t, memory.Options{Now: clk.Now, MaxEntries: 100})
	c := &memorytest.Child{}
	ctx := context.Background()
	for i := range 100 {
		memorytest.Do(t, m, "", memorytest.ReadTool(), fmt.Sprintf(`{"i":%d}`, i), c)
		clk.Advance(time.Millisecond)
	}
	// Entry 0 is the oldest; using it makes entry 1 the least recently used.
	if st := memorytest.Status(t, memorytest.Do(t, m, "", memorytest.ReadTool(), `{"i":0}`, c)); st != memory.StatusHit {
		t.Fatal(st)
	}
	clk.Advance(time.Millisecond)
	memorytest.Do(t, m, "", memorytest.ReadTool(), `{"i":100}`, c) // over the bound: evict down to 90
	st, err := m.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Entries != 90 {
		t.Fatalf("entries after eviction = %d, want 90", st.Entries)
	}
	if s := memorytest.Status(t, memorytest.Do(t, m, "", memorytest.ReadTool(), `{"i":0}`, c)); s != memory.StatusHit {
		t.Fatalf("recently used entry evicted: %q", s)
	}
	if s := memorytest.Status(t, memorytest.Do(t, m, "", memorytest.ReadTool(), `{"i":100}`, c)); s != memory.StatusHit {
		t.Fatalf("new entry evicted: %q", s)
	}
	if s := memorytest.Status(t, memorytest.Do(t, m, "", memorytest.ReadTool(), `{"i":1}`, c)); s != memory.StatusMiss {
		t.Fatalf("least recently used entry kept: %q", s)
	}
	// Entries 1..11 were the 11 least recently used.
	if s := memorytest.Status(t, memorytest.Do(t, m, "", memorytest.ReadTool(), `{"i":12}`, c)); s != memory.StatusHit {
		t.Fatalf("entry 12 evicted: %q", s)
	}
}

func TestEvictionByBytes(t *testing.T) {
	clk := memorytest.NewClock()
	m := openTest(t, memory.Options{Now: clk.Now, MaxBytes: 50_000, MaxResultBytes: 10_000})
	c := &memorytest.Child{Text: func(args json.RawMessage) string { return string(args) + strings.Repeat("x", 900) }}
	for i := range 200 {
		memorytest.Do(t, m, "", memorytest.ReadTool(), fmt.Sprintf(`{"i":%d}`, i), c)
		clk.Advance(time.Millisecond)
	}
	st, err := m.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Bytes > 50_000 || st.Bytes < 30_000 {
		t.Fatalf("bytes = %d, want within (30000, 50000]", st.Bytes)
	}
	if s := memorytest.Status(t, memorytest.Do(t, m, "", memorytest.ReadTool(), `{"i":199}`, c)); s != memory.StatusHit {
		t.Fatalf("newest evicted: %q", s)
	}
	if s := memorytest.Status(t, memorytest.Do(t, m, "", memorytest.ReadTool(), `{"i":0}`, c)); s != memory.StatusMiss {
		t.Fatalf("oldest kept: %q", s)
	}
	// Totals maintained by triggers agree with the table.
	var n, b int64
	if err := sqlDB(t, m).QueryRow(`SELECT count(*), coalesce(sum(size),0) FROM entries`).Scan(&n, &b); err != nil {
		t.Fatal(err)
	}
	var tn, tb int64
	if err := sqlDB(t, m).QueryRow(`SELECT entries, bytes FROM totals`).Scan(&tn, &tb); err != nil {
		t.Fatal(err)
	}
	if n != tn || b != tb {
		t.Fatalf("totals %d/%d, table %d/%d", tn, tb, n, b)
	}
}

func TestTwoProcesses(t *testing.T) {
	// Two Opens of one file stand in for two processes (same SQLite engine).
	path := filepath.Join(t.TempDir(), "memory.db")
	m1 := openTest(t, memory.Options{Backend: File(path)})
	m2 := openTest(t, memory.Options{Backend: File(path)})
	c := &memorytest.Child{}
	memorytest.Do(t, m1, "", memorytest.ReadTool(), `{"q":1}`, c)
	if s := memorytest.Status(t, memorytest.Do(t, m2, "", memorytest.ReadTool(), `{"q":1}`, c)); s != memory.StatusHit {
		t.Fatalf("second process: %q", s)
	}
	memorytest.Do(t, m2, "", memorytest.WriteTool(), `{}`, c)
	if s := memorytest.Status(t, memorytest.Do(t, m1, "", memorytest.ReadTool(), `{"q":1}`, c)); s != memory.StatusMiss {
		t.Fatalf("invalidation by other process not seen: %q", s)
	}
	// Concurrent writers from both.
	errs := make(chan error, 2)
	for _, m := range []*memory.Memory{m1, m2} {
		go func() {
			for i := range 50 {
				args := json.RawMessage(fmt.Sprintf(`{"w":%d}`, i))
				if _, err := m.Call(context.Background(), "", memorytest.OtherTool(), args, c.Forward(args)); err != nil {
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
	clk := memorytest.NewClock()
	m := openTest(t, memory.Options{Backend: File(path), Now: clk.Now})
	slow := memorytest.Plain(func(context.Context) (json.RawMessage, error) {
		clk.Advance(30 * time.Millisecond) // the memorytest.Child takes 30 ms
		return memorytest.TextResult("slow answer"), nil
	})
	ctx := context.Background()
	for range 3 {
		if _, err := m.Call(ctx, "", memorytest.ReadTool(), nil, slow); err != nil {
			t.Fatal(err)
		}
	}
	memorytest.Do(t, m, "", memory.Tool{Name: "x.y", Server: "x"}, `{}`, &memorytest.Child{})
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// Another process (a CLI) reads them.
	m2 := openTest(t, memory.Options{Backend: File(path), Now: clk.Now})
	st, err := m2.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Hits != 2 || st.Misses != 1 || st.Bypasses != 1 || st.Entries != 1 || st.SavedMS < 60 {
		t.Fatalf("stats %+v", st)
	}
	if len(st.Tools) != 2 || st.Tools[0].Tool != memorytest.ReadTool().Name || st.Tools[0].Hits != 2 || st.Tools[0].Entries != 1 {
		t.Fatalf("tool stats %+v", st.Tools)
	}
	if _, err := json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	// Counters flush in the background too, without Close or Stats.
	m3 := openTest(t, memory.Options{Backend: File(path), FlushInterval: 10 * time.Millisecond, Now: clk.Now})
	if _, err := m3.Call(ctx, "", memorytest.ReadTool(), nil, slow); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var hits int64
		sqlDB(t, m2).QueryRow(`SELECT hits FROM tool_stats WHERE tool = ?`, memorytest.ReadTool().Name).Scan(&hits)
		if hits == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hits = %d, background flush did not happen", hits)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func forwarded(t *testing.T, m *memory.Memory, tool memory.Tool) (string, time.Duration) {
	t.Helper()
	var calls atomic.Int64
	start := time.Now()
	res, err := m.Call(context.Background(), "", tool, json.RawMessage(`{"z":1}`), memorytest.Plain(func(context.Context) (json.RawMessage, error) {
		calls.Add(1)
		return memorytest.TextResult("fresh"), nil
	}))
	took := time.Since(start)
	if err != nil || memorytest.Text(res) != "fresh" || calls.Load() != 1 {
		t.Fatalf("call not forwarded: %v %q %d", err, memorytest.Text(res), calls.Load())
	}
	return memorytest.Status(t, res), took
}

func TestCorruptFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	garbage := make([]byte, 64<<10)
	r := rand.NewChaCha8([32]byte{1})
	r.Read(garbage)
	if err := os.WriteFile(path, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := memory.Open(context.Background(), memory.Options{Backend: File(path), Logger: memorytest.Logger(t)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer m.Close()
	if m.Err() == nil {
		t.Fatal("garbage file accepted as a database")
	}
	for range 2 {
		if s, _ := forwarded(t, m, memorytest.ReadTool()); s != memory.StatusBypass {
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
	m := openTest(t, memory.Options{Backend: File(path), BusyTimeout: busy})
	c := &memorytest.Child{}
	memorytest.Do(t, m, "", memorytest.ReadTool(), `{"stored":true}`, c)

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
	if s := memorytest.Status(t, memorytest.Do(t, m, "", memorytest.ReadTool(), `{"stored":true}`, c)); s != memory.StatusHit {
		t.Fatalf("hit under lock: %q", s)
	}
	// A miss is answered; storing gives up after the busy timeout.
	s, took := forwarded(t, m, memorytest.ReadTool())
	if took > 10*busy {
		t.Fatalf("miss under lock took %v", took)
	}
	t.Logf("miss under lock: %s in %v", s, took)
	// Later misses do not wait again (write back-off).
	_, took = forwarded(t, m, memorytest.OtherTool())
	if took > busy/2 {
		t.Fatalf("second miss under lock took %v", took)
	}
	// A mutating call is answered, and its invalidation is not lost: until
	// it is written, the server's tools bypass memory in this process.
	s, took = forwarded(t, m, memorytest.WriteTool())
	if s != memory.StatusBypass || took > 10*busy {
		t.Fatalf("mutating call under lock: %q in %v", s, took)
	}
	if s := memorytest.Status(t, memorytest.Do(t, m, "", memorytest.ReadTool(), `{"stored":true}`, c)); s != memory.StatusBypass {
		t.Fatalf("stale entry served after unwritten invalidation: %q", s)
	}
	if _, err := conn.ExecContext(context.Background(), `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	if err := m.Flush(context.Background()); err != nil {
		t.Fatalf("flush after unlock: %v", err)
	}
	if s := memorytest.Status(t, memorytest.Do(t, m, "", memorytest.ReadTool(), `{"stored":true}`, c)); s != memory.StatusMiss {
		t.Fatalf("after unlock: %q", s)
	}
}

func TestNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	m := openTest(t, memory.Options{Backend: File(path)})
	var v int
	if err := sqlDB(t, m).QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != schemaVersion {
		t.Fatalf("user_version %d, %v", v, err)
	}
	var mode string
	if err := sqlDB(t, m).QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode %q, %v", mode, err)
	}
	if _, err := sqlDB(t, m).Exec(fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	m.Close()
	m2, err := memory.Open(context.Background(), memory.Options{Backend: File(path), Logger: memorytest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if m2.Err() == nil || !strings.Contains(m2.Err().Error(), "newer") {
		t.Fatalf("Err = %v", m2.Err())
	}
	if s, _ := forwarded(t, m2, memorytest.ReadTool()); s != memory.StatusBypass {
		t.Fatalf("status %q", s)
	}
	if _, err := memory.Open(context.Background(), memory.Options{}); err == nil {
		t.Fatal("empty path accepted")
	}
}

// populate stores n entries for tool with args {"i":0..n-1}.
func populate(tb testing.TB, m *memory.Memory, tool memory.Tool, n int) {
	tb.Helper()
	c := &memorytest.Child{Text: func(json.RawMessage) string { return strings.Repeat("r", 200) }}
	for i := range n {
		memorytest.Do(tb, m, "", tool, fmt.Sprintf(`{"i":%d}`, i), c)
	}
}

func BenchmarkLookupHit(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			m := openTest(b, memory.Options{MaxEntries: 2 * n, FlushInterval: time.Hour})
			m.SetSettings(memorytest.Kept(memory.Settings{TTL: map[string]memory.TTL{"*": {Never: true}}}))
			populate(b, m, memorytest.ReadTool(), n)
			args := make([]json.RawMessage, 1024)
			for i := range args {
				args[i] = json.RawMessage(fmt.Sprintf(`{"i":%d}`, (i*7919)%n))
			}
			forward := memorytest.Plain(func(context.Context) (json.RawMessage, error) {
				b.Fatal("forwarded: not a hit")
				return nil, nil
			})
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				res, err := m.Call(ctx, "", memorytest.ReadTool(), args[i%len(args)], forward)
				if err != nil || res == nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkMiss is a call memory has not seen: looked up, forwarded to a
// child that answers at once, and stored, in a store of 10,000 entries. The
// search tool's calls carry free text: each is embedded, looked for among
// similar calls, and stored with its vector.
func BenchmarkMiss(b *testing.B) {
	tests := []struct {
		name string
		tool memory.Tool
		args func(i int) string
	}{
		{"exact", memorytest.ReadTool(), func(i int) string { return fmt.Sprintf(`{"i":%d}`, i) }},
		{"free-text", memorytest.SearchTool(), func(i int) string {
			return memorytest.SearchArgs(fmt.Sprintf("invoice %d of the billing cluster %d", i, i*7919), 10)
		}},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			m := openTest(b, memory.Options{MaxEntries: 1_000_000, FlushInterval: time.Hour})
			m.SetSettings(memorytest.Kept(memory.Settings{TTL: map[string]memory.TTL{"*": {Never: true}}}))
			populate(b, m, memorytest.ReadTool(), 10_000)
			answer := json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("r", 200) + `"}]}`)
			forward := memorytest.Plain(func(context.Context) (json.RawMessage, error) { return answer, nil })
			ctx := context.Background()
			b.ReportAllocs()
			i := 10_000
			for b.Loop() {
				if _, err := m.Call(ctx, "", tt.tool, json.RawMessage(tt.args(i)), forward); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// damageFixture is a closed memory.db holding 300 entries of 3 KB, to damage.
func damageFixture(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "memory.db")
	m := openTest(t, memory.Options{Backend: File(path), MaxEntries: 100000})
	big := &memorytest.Child{Text: func(args json.RawMessage) string { return string(args) + strings.Repeat("y", 3000) }}
	for i := range 300 {
		memorytest.Do(t, m, "", memorytest.ReadTool(), fmt.Sprintf(`{"i":%d}`, i), big)
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
	m, err := memory.Open(context.Background(), memory.Options{Backend: File(path), Logger: memorytest.Logger(t)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer m.Close()
	m.SetSettings(memorytest.Kept(memory.Settings{}))
	t.Logf("Err after %s: %v", damage, m.Err())
	seen := map[string]int{}
	for i := range 300 {
		args := json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
		want := string(args) + strings.Repeat("y", 3000)
		res, err := m.Call(context.Background(), "", memorytest.ReadTool(), args, memorytest.Plain(func(context.Context) (json.RawMessage, error) {
			return memorytest.TextResult(want), nil
		}))
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if memorytest.Text(res) != want {
			t.Fatalf("call %d: wrong memorytest.Answers %.40q", i, memorytest.Text(res))
		}
		seen[memorytest.Status(t, res)]++
	}
	t.Logf("statuses after %s: %v", damage, seen)
	if seen[memory.StatusBypass] == 0 {
		t.Fatalf("%s never noticed: %v", damage, seen)
	}
}

// openTest opens a Memory on opts.Backend, by default a SQLite file of
// t's own.
func openTest(t testing.TB, opts memory.Options) *memory.Memory {
	t.Helper()
	if opts.Backend == nil {
		opts.Backend = File(filepath.Join(t.TempDir(), "memory.db"))
	}
	return memorytest.OpenMemory(t, opts)
}

// sqlDB is a connection of its own to m's database file, as another
// process would have, closed with t.
func sqlDB(t testing.TB, m *memory.Memory) *sql.DB {
	t.Helper()
	st, err := m.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqlitedb.Open(st.Path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestContract runs the store contract suite against SQLite files.
func TestContract(t *testing.T) {
	memorytest.RunStoreContract(t, func(t *testing.T) memory.Backend {
		return File(filepath.Join(t.TempDir(), "memory.db"))
	}, memorytest.Features{})
}
