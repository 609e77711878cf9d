package sqlite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/internal/sqlitedb"
	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/memory/memorytest"
	"github.com/nexus-mcp/nexus/tests/benchplot"
)

// BenchmarkHitByEntries measures an exact hit against the number of entries
// memory.db holds (1k, 10k, 100k; 1M with NEXUS_BENCH_1M=1): the p50 of a hit
// read from the database (the hot layer off: each key read once, spread over
// all entries), the p50 of a hit of the hot layer (the same keys read again),
// and the database's size on disk (its file and WAL, 200-byte answers). With
// NEXUS_PLOTS=DIR it draws them in DIR/memory-hit.svg and DIR/memory-size.svg.
//
//	NEXUS_PLOTS=$PWD/docs/img go test ./memory/sqlite -run '^$' -bench HitByEntries -benchtime 2000x
func BenchmarkHitByEntries(b *testing.B) {
	sizes := []int{1_000, 10_000, 100_000}
	if os.Getenv("NEXUS_BENCH_1M") != "" {
		sizes = append(sizes, 1_000_000)
	}
	var xs, dbP50, hotP50, sizeMiB []float64
	for _, n := range sizes {
		dir := b.TempDir()
		path := filepath.Join(dir, "memory.db")
		open := func(hotBytes int64) *memory.Memory {
			m := openTest(b, memory.Options{Backend: File(path), MaxEntries: 2 * n, MaxBytes: 1 << 40, FlushInterval: time.Hour, HotBytes: hotBytes})
			m.SetSettings(memorytest.Kept(memory.Settings{TTL: map[string]memory.TTL{"*": {Never: true}}}))
			return m
		}
		start := time.Now()
		m := open(-1)
		fill(b, m, memorytest.ReadTool(), n)
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
		filled := time.Since(start)
		size := 0.0
		for _, f := range []string{path, path + "-wal"} {
			if st, err := os.Stat(f); err == nil {
				size += float64(st.Size()) / (1 << 20)
			}
		}
		var db, hot float64
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			forward := memorytest.Plain(func(context.Context) (json.RawMessage, error) {
				b.Fatal("forwarded: not a hit")
				return nil, nil
			})
			runs := min(max(b.N, 200), n)
			measure := func(m *memory.Memory) float64 {
				lat := make([]time.Duration, runs)
				for i := range runs {
					args := json.RawMessage(fmt.Sprintf(`{"i":%d}`, (i*7919)%n))
					t0 := time.Now()
					res, err := m.Call(context.Background(), "", memorytest.ReadTool(), args, forward)
					lat[i] = time.Since(t0)
					if err != nil || memorytest.Status(b, res) != memory.StatusHit {
						b.Fatalf("not a hit: %v %s", err, res)
					}
				}
				slices.Sort(lat)
				return float64(lat[len(lat)/2].Nanoseconds()) / 1000
			}
			cold := open(-1)
			db = measure(cold)
			cold.Close()
			warm := open(0)
			measure(warm)
			hot = measure(warm)
			warm.Close()
			b.ReportMetric(db, "db-hit-p50-µs")
			b.ReportMetric(hot, "hot-hit-p50-µs")
			b.ReportMetric(size, "db-MiB")
			b.ReportMetric(filled.Seconds(), "fill-s")
			b.ReportMetric(0, "ns/op")
		})
		xs, dbP50, hotP50, sizeMiB = append(xs, float64(n)), append(dbP50, db), append(hotP50, hot), append(sizeMiB, size)
	}
	if dir := os.Getenv("NEXUS_PLOTS"); dir != "" {
		hit := benchplot.Plot{Title: "Exact memory hit p50 against entries", XLabel: "entries in memory.db", YLabel: "µs", LogX: true,
			Series: []benchplot.Series{{Name: "from the database", X: xs, Y: dbP50}, {Name: "from the hot layer", X: xs, Y: hotP50}}}
		size := benchplot.Plot{Title: "memory.db on disk against entries (200-byte answers)", XLabel: "entries in memory.db", YLabel: "MiB", LogX: true, LogY: true,
			Series: []benchplot.Series{{Name: "file and WAL", X: xs, Y: sizeMiB}}}
		for name, p := range map[string]benchplot.Plot{"memory-hit.svg": hit, "memory-size.svg": size} {
			if err := p.WriteFile(filepath.Join(dir, name)); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// fill stores n entries for tool with args {"i":0..n-1} and a 200-byte
// answer, as populate does, but in one transaction of its own: 1M calls
// would take an hour here. The benchmark's hits check the keys are memory's.
func fill(b *testing.B, m *memory.Memory, tool memory.Tool, n int) {
	b.Helper()
	populate(b, m, tool, 1) // the schema, and the answer as memory stores it
	st, err := m.Stats(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	db, err := sqlitedb.Open(st.Path, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	var result []byte
	if err := db.QueryRowContext(ctx, `SELECT result FROM entries`).Scan(&result); err != nil {
		b.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback()
	ins, err := tx.PrepareContext(ctx, `INSERT INTO entries (key, tool, server, scope, fingerprint, args, result, size,
		duration_ms, created_at, expires_at, last_used_at) VALUES (?, ?, ?, '', ?, ?, ?, ?, 5, ?, NULL, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UnixMilli()
	for i := 1; i < n; i++ {
		args := fmt.Sprintf(`{"i":%d}`, i)
		sum := sha256.Sum256([]byte(args))
		fp := hex.EncodeToString(sum[:])
		h := sha256.New()
		h.Write([]byte("nexus-memory-v1\x00" + tool.Name + "\x00\x00" + fp)) // memory's cacheKey, scope ""
		if _, err := ins.ExecContext(ctx, h.Sum(nil), tool.Name, tool.Server, fp, args, result, len(result), now, now); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}
