package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/internal/pgtest"
)

// BenchmarkMemoryHitPostgres measures, in one run, the p50 of a memory
// hit through `nexus serve` (stdio, hot layer on) with the SQLite store
// and with the PostgreSQL store, and reports their ratio. With
// PostgreSQL every hot hit also reads its tool's invalidation generation,
// so another replica's invalidation is never missed (see memory's
// memory/postgres).
//
//	NEXUS_TEST_PG_DSN=... go test ./tests -run '^$' -bench MemoryHitPostgres -benchtime 3000x
func BenchmarkMemoryHitPostgres(b *testing.B) {
	if raceEnabled {
		b.Skip("benchmarks need binaries built without -race")
	}
	dsn := benchSchema(b)
	t := &testing.T{}
	args := map[string]any{"message": "the same read"}
	p50 := map[string]float64{}
	for _, backend := range []string{"sqlite", "postgres"} {
		h := newHome(t, nil)
		cfg := map[string]any{"servers": map[string]any{"fx": map[string]any{"command": built.fixture}}}
		if backend == "postgres" {
			cfg["memory"] = map[string]any{"backend": "postgres", "dsn": "${env:NEXUS_PG_DSN}"}
		}
		h.writeConfig(cfg)
		s := startSession(t, h.env("NEXUS_PG_DSN="+dsn), built.nexus, "serve")
		for range 300 {
			s.call("fx__echo", args)
		}
		if st := s.call("fx__echo", args).cacheStatus(); st != "hit" {
			b.Fatalf("%s: not a memory hit: %q", backend, st)
		}
		lat := make([]time.Duration, b.N)
		for i := range b.N {
			start := time.Now()
			s.call("fx__echo", args)
			lat[i] = time.Since(start)
		}
		s.close()
		if t.Failed() {
			b.Fatalf("%s failed", backend)
		}
		slices.Sort(lat)
		p50[backend] = float64(lat[len(lat)/2].Microseconds())
	}
	b.ReportMetric(p50["sqlite"], "sqlite-hit-p50-µs")
	b.ReportMetric(p50["postgres"], "postgres-hit-p50-µs")
	b.ReportMetric(p50["postgres"]/p50["sqlite"], "postgres/sqlite-p50-x")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkReplicaThroughput measures, in one run, the calls per second
// that benchReplicaWorkers concurrent HTTP sessions get from one gateway
// and from three replicas sharing PostgreSQL on loopback, under a
// hit-heavy load (16 distinct reads, every call after warm-up a hit).
// Each worker makes b.N calls.
//
//	NEXUS_TEST_PG_DSN=... go test ./tests -run '^$' -bench ReplicaThroughput -benchtime 2000x
func BenchmarkReplicaThroughput(b *testing.B) {
	if raceEnabled {
		b.Skip("benchmarks need binaries built without -race")
	}
	perSec := map[int]float64{}
	for _, n := range []int{1, 3} {
		perSec[n] = replicaThroughput(b, benchSchema(b), n)
	}
	b.ReportMetric(perSec[1], "1-replica-calls/s")
	b.ReportMetric(perSec[3], "3-replicas-calls/s")
	b.ReportMetric(perSec[3]/perSec[1], "3/1-x")
	b.ReportMetric(0, "ns/op")
}

const benchReplicaWorkers = 6

func replicaThroughput(b *testing.B, dsn string, replicas int) float64 {
	urls := make([]string, replicas)
	for i := range urls {
		dir := b.TempDir()
		cfg, _ := json.Marshal(map[string]any{
			"servers": map[string]any{"fx": map[string]any{"command": built.fixture}},
			"policy":  map[string]any{"default": map[string]any{"allow": []string{"*"}}},
			"memory":  map[string]any{"backend": "postgres", "dsn": "${env:NEXUS_PG_DSN}"},
		})
		if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o600); err != nil {
			b.Fatal(err)
		}
		urls[i], _ = serveHTTPProcess(b, []string{"NEXUS_HOME=" + dir, "HOME=" + dir, "PATH=" + os.Getenv("PATH"), "NEXUS_PG_DSN=" + dsn})
	}
	ctx := context.Background()
	call := func(w int) func(i int) error {
		c, err := httpClient(b, urls[w%replicas], "")
		if err != nil {
			b.Fatal(err)
		}
		return func(i int) error {
			res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{
				Name: "fx__echo", Arguments: map[string]any{"message": fmt.Sprint("read ", i%16)}}})
			if err == nil && res.IsError {
				err = fmt.Errorf("tool error: %+v", res.Content)
			}
			return err
		}
	}
	workers := make([]func(int) error, benchReplicaWorkers)
	for w := range workers {
		workers[w] = call(w)
		for i := range 64 { // warm every replica's hot layer
			if err := workers[w](i); err != nil {
				b.Fatal(err)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(workers))
	start := time.Now()
	for _, do := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range b.N {
				if err := do(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return float64(len(workers)*b.N) / elapsed.Seconds()
}

// benchSchema is pgtest.Schema for a benchmark.
func benchSchema(b *testing.B) string {
	b.Helper()
	return pgtest.Schema(b)
}
