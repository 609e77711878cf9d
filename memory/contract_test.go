package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/internal/pgtest"
)

// The contract suite: what every store must do, run against SQLite and
// PostgreSQL alike (the way Litestream runs one suite per replica
// backend). Each test opens two Memories on one shared store, as two
// processes (SQLite) or two gateway replicas (PostgreSQL) would.

// backend opens Memories that share one store.
type backend struct {
	name string
	// shared returns an opener of Memories sharing a store of t's own.
	shared func(t *testing.T) func(opts Options) *Memory
	// crossProcessFlights: identical calls in two processes make one
	// child call (PostgreSQL); SQLite coalesces within a process only.
	crossProcessFlights bool
}

var backends = []backend{
	{
		name: "sqlite",
		shared: func(t *testing.T) func(Options) *Memory {
			path := filepath.Join(t.TempDir(), "memory.db")
			return func(opts Options) *Memory {
				opts.Path = path
				return openTest(t, opts)
			}
		},
	},
	{
		name: "postgres",
		shared: func(t *testing.T) func(Options) *Memory {
			dsn := pgtest.Schema(t)
			return func(opts Options) *Memory {
				opts.DSN = dsn
				return openTest(t, opts)
			}
		},
		crossProcessFlights: true,
	},
}

// forEachBackend runs test against every backend.
func forEachBackend(t *testing.T, test func(t *testing.T, b backend, open func(Options) *Memory)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			test(t, b, b.shared(t))
		})
	}
}

func wantStatus(t *testing.T, what string, res json.RawMessage, want string) {
	t.Helper()
	if got := status(t, res); got != want {
		t.Fatalf("%s: status %q, want %q", what, got, want)
	}
}

// TestContractExactHits: a result stored by one process is a hit in the
// other; different arguments are not.
func TestContractExactHits(t *testing.T) {
	forEachBackend(t, func(t *testing.T, _ backend, open func(Options) *Memory) {
		a, b := open(Options{}), open(Options{})
		c := &child{}
		wantStatus(t, "first call on a", do(t, a, "", readTool, `{"graph":"main"}`, c), StatusMiss)
		res := do(t, b, "", readTool, `{ "graph" : "main" }`, c)
		wantStatus(t, "same call on b", res, StatusHit)
		if text(res) != "answer 1 to {\"graph\":\"main\"}" {
			t.Fatalf("b served %q", text(res))
		}
		wantStatus(t, "again on a", do(t, a, "", readTool, `{"graph":"main"}`, c), StatusHit)
		wantStatus(t, "other args on b", do(t, b, "", readTool, `{"graph":"dev"}`, c), StatusMiss)
		if n := c.calls.Load(); n != 2 {
			t.Fatalf("child called %d times, want 2", n)
		}
	})
}

// TestContractTTL: an entry expires for every process, driven by
// Options.Now, hot layer or not.
func TestContractTTL(t *testing.T) {
	forEachBackend(t, func(t *testing.T, _ backend, open func(Options) *Memory) {
		clk := newClock()
		a, b := open(Options{Now: clk.Now}), open(Options{Now: clk.Now})
		rules := Settings{TTL: map[string]TTL{readTool.Name: {D: time.Minute}}}
		a.SetSettings(rules)
		b.SetSettings(rules)
		c := &child{}
		do(t, a, "", readTool, `{}`, c)
		wantStatus(t, "within the ttl on b", do(t, b, "", readTool, `{}`, c), StatusHit)
		clk.Advance(time.Minute)
		wantStatus(t, "after the ttl on a", do(t, a, "", readTool, `{}`, c), StatusMiss)
		wantStatus(t, "refetched answer on b", do(t, b, "", readTool, `{}`, c), StatusHit)
		if n := c.calls.Load(); n != 2 {
			t.Fatalf("child called %d times, want 2", n)
		}
	})
}

// TestContractStaleIfError: an entry marked stale by one process (its child
// restarted) is not fresh for any, and stands in for a failed child on
// every process; an expired one too, within the window.
func TestContractStaleIfError(t *testing.T) {
	forEachBackend(t, func(t *testing.T, _ backend, open func(Options) *Memory) {
		clk := newClock()
		a, b := open(Options{Now: clk.Now}), open(Options{Now: clk.Now})
		rules := Settings{TTL: map[string]TTL{readTool.Name: {D: time.Minute}}, StaleIfError: map[string]time.Duration{"code-kg.*": time.Hour}}
		a.SetSettings(rules)
		b.SetSettings(rules)
		c := &child{}
		do(t, a, "", readTool, `{}`, c)
		down := func(context.Context) (Answer, error) {
			return Answer{Result: errorResult("down"), Outcome: NotSent, Failure: "server code-kg is not running"}, nil
		}
		call := func(m *Memory) json.RawMessage {
			res, err := m.Call(context.Background(), "", readTool, json.RawMessage(`{}`), down)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		wantStatus(t, "fresh on b", call(b), StatusHit)
		if err := a.MarkStale(context.Background(), readTool.Server); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, "marked stale by a, child down, on b", call(b), StatusStale)
		wantStatus(t, "child up on b", do(t, b, "", readTool, `{}`, c), StatusMiss)
		wantStatus(t, "the refetched answer on a", call(a), StatusHit)
		clk.Advance(2 * time.Minute)
		wantStatus(t, "expired, child down, on a", call(a), StatusStale)
		clk.Advance(2 * time.Hour)
		wantStatus(t, "beyond the window", call(b), StatusMiss)
	})
}

// TestContractBounds: stores keep the entry count within MaxEntries,
// evicting the least recently used.
func TestContractBounds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, _ backend, open func(Options) *Memory) {
		clk := newClock()
		a := open(Options{Now: clk.Now, MaxEntries: 20})
		b := open(Options{Now: clk.Now, MaxEntries: 20})
		c := &child{}
		do(t, a, "", readTool, `{"n":0}`, c)
		for i := 1; i < 60; i++ {
			clk.Advance(time.Millisecond)
			do(t, a, "", readTool, fmt.Sprintf(`{"n":%d}`, i), c)
			// Keep n=0 recently used: a's hits are written before it evicts.
			do(t, a, "", readTool, `{"n":0}`, c)
		}
		ctx := context.Background()
		st, err := a.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Entries > 20 || st.Entries < 10 {
			t.Fatalf("%d entries stored, want at most 20 (and not emptied)", st.Entries)
		}
		if st.Entries != st.Tools[0].Entries {
			t.Fatalf("totals %d disagree with tools %+v", st.Entries, st.Tools)
		}
		wantStatus(t, "the recently used entry", do(t, b, "", readTool, `{"n":0}`, c), StatusHit)
		wantStatus(t, "an early entry", do(t, b, "", readTool, `{"n":1}`, c), StatusMiss)
	})
}

// TestContractMutationInvalidatesEverywhere: once a mutating call
// returned on one process, no process serves what it invalidated, not
// even from its hot layer, with no waiting in between.
func TestContractMutationInvalidatesEverywhere(t *testing.T) {
	forEachBackend(t, func(t *testing.T, _ backend, open func(Options) *Memory) {
		a, b, third := open(Options{}), open(Options{}), open(Options{})
		c := &child{}
		do(t, a, "", readTool, `{}`, c)
		do(t, a, "", otherTool, `{}`, c)
		for _, m := range []*Memory{a, b, third} {
			// Twice: the second is served from the hot layer.
			do(t, m, "", readTool, `{}`, c)
			wantStatus(t, "before the write", do(t, m, "", readTool, `{}`, c), StatusHit)
		}
		do(t, b, "", writeTool, `{}`, c)
		// The child now fails, so no process stores a fresh answer: each
		// one must forward.
		failing := &child{text: func(json.RawMessage) string { return "" }}
		for i, m := range []*Memory{a, b, third} {
			res, err := m.Call(context.Background(), "", readTool, json.RawMessage(`{}`), answer(string(errorResult("down"))))
			if err != nil {
				t.Fatal(err)
			}
			wantStatus(t, fmt.Sprintf("process %d after the write on b", i), res, StatusMiss)
			wantStatus(t, fmt.Sprintf("process %d, another server", i), do(t, m, "", otherTool, `{}`, failing), StatusHit)
		}
	})
}

// TestContractInvalidateServer: a child's restart on one process drops
// its entries for all.
func TestContractInvalidateServer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, _ backend, open func(Options) *Memory) {
		a, b := open(Options{}), open(Options{})
		c := &child{}
		do(t, a, "", readTool, `{}`, c)
		do(t, b, "", readTool, `{}`, c)
		wantStatus(t, "hot on b", do(t, b, "", readTool, `{}`, c), StatusHit)
		if err := a.MarkStale(context.Background(), readTool.Server); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, "on b after the restart", do(t, b, "", readTool, `{}`, c), StatusMiss)
		n, err := b.Clear(context.Background(), "", "")
		if err != nil || n != 1 {
			t.Fatalf("Clear: %d, %v; want 1 entry", n, err)
		}
		wantStatus(t, "on a after Clear", do(t, a, "", readTool, `{}`, c), StatusMiss)
	})
}

// TestContractFetchedBeforeInvalidation: a result whose child call
// started before another process invalidated is not stored.
func TestContractFetchedBeforeInvalidation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, _ backend, open func(Options) *Memory) {
		a, b := open(Options{}), open(Options{})
		c := &child{}
		ctx := context.Background()
		_, err := a.Call(ctx, "", readTool, json.RawMessage(`{}`), plain(func(context.Context) (json.RawMessage, error) {
			do(t, b, "", writeTool, `{}`, c) // invalidates code-kg while a's call is out
			return textResult("old"), nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		res := do(t, b, "", readTool, `{}`, c)
		wantStatus(t, "after the racing write", res, StatusMiss)
	})
}

// TestContractSingleFlight: identical calls arriving together on two
// processes make one child call where the store coordinates processes.
func TestContractSingleFlight(t *testing.T) {
	forEachBackend(t, func(t *testing.T, bk backend, open func(Options) *Memory) {
		if !bk.crossProcessFlights {
			t.Skip("SQLite coalesces identical calls within a process (TestSingleFlight)")
		}
		a, b := open(Options{}), open(Options{})
		var calls int
		var mu sync.Mutex
		entered, release := make(chan struct{}), make(chan struct{})
		forward := plain(func(context.Context) (json.RawMessage, error) {
			mu.Lock()
			calls++
			mu.Unlock()
			close(entered)
			<-release
			return textResult("one answer"), nil
		})
		ctx := context.Background()
		results := make([]json.RawMessage, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			results[0], errs[0] = a.Call(ctx, "", readTool, json.RawMessage(`{"x":1}`), forward)
		}()
		<-entered
		go func() {
			defer wg.Done()
			results[1], errs[1] = b.Call(ctx, "", readTool, json.RawMessage(`{"x":1}`), forward)
		}()
		waitFor(t, "b to wait for a's call", func() bool { return b.remoteWaiters.Load() == 1 })
		close(release)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if calls != 1 {
			t.Fatalf("%d child calls, want 1", calls)
		}
		wantStatus(t, "leader", results[0], StatusMiss)
		wantStatus(t, "follower", results[1], StatusHit)
		if text(results[1]) != "one answer" {
			t.Fatalf("follower got %q", text(results[1]))
		}
	})
}

// TestContractSimilarity: a paraphrase on one process is served the
// answer another process stored, and not after an invalidation.
func TestContractSimilarity(t *testing.T) {
	forEachBackend(t, func(t *testing.T, _ backend, open func(Options) *Memory) {
		a, b := open(Options{}), open(Options{})
		<-b.indexDone
		c := &child{}
		do(t, a, "", searchTool, q("postgres connection pool settings", 10), c)
		res := do(t, b, "", searchTool, q("connection pool settings for postgres", 10), c)
		if st, _, _ := semReport(t, res); st != StatusSemanticHit {
			t.Fatalf("paraphrase on b: %s", st)
		}
		wantStatus(t, "other limit (another bucket)", do(t, b, "", searchTool, q("connection pool settings for postgres", 20), c), StatusMiss)
		if err := a.MarkStale(context.Background(), searchTool.Server); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, "after invalidation", do(t, b, "", searchTool, q("settings of the postgres connection pool", 10), c), StatusMiss)
	})
}

// TestContractStats: counters of every process add up in one place.
func TestContractStats(t *testing.T) {
	forEachBackend(t, func(t *testing.T, _ backend, open func(Options) *Memory) {
		a, b := open(Options{}), open(Options{})
		c := &child{}
		do(t, a, "", readTool, `{}`, c)
		do(t, b, "", readTool, `{}`, c)
		do(t, b, "", writeTool, `{}`, c)
		ctx := context.Background()
		if _, err := a.Stats(ctx); err != nil { // flushes a's counters
			t.Fatal(err)
		}
		st, err := b.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Hits != 1 || st.Misses != 1 || st.Bypasses != 1 || st.Entries != 0 {
			t.Fatalf("stats %+v: want 1 hit, 1 miss, 1 bypass, 0 entries", st)
		}
		list, err := a.List(ctx, 0)
		if err != nil || len(list) != 0 {
			t.Fatalf("List: %v, %v", list, err)
		}
	})
}

// waitFor polls cond until it holds, failing t after 10 seconds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
