package memorytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/memory"
)

// Features are what a store does beyond the contract every store keeps.
type Features struct {
	// CrossProcessFlights: identical calls in two processes make one
	// child call (PostgreSQL); SQLite coalesces within a process only.
	CrossProcessFlights bool
}

// RunStoreContract runs the contract suite: what every memory.Store must
// do, the way Litestream runs one suite per replica backend. newStore
// returns the Backend of a new, empty database of t's own; each test
// opens two or three Memories on it, as processes (SQLite) or gateway
// replicas (PostgreSQL) sharing it would. A store's package runs it from
// a test of its own:
//
//	func TestContract(t *testing.T) {
//		memorytest.RunStoreContract(t, func(t *testing.T) memory.Backend {
//			return sqlite.File(filepath.Join(t.TempDir(), "memory.db"))
//		}, memorytest.Features{})
//	}
func RunStoreContract(t *testing.T, newStore func(t *testing.T) memory.Backend, f Features) {
	for _, tt := range []struct {
		name string
		test func(t *testing.T, f Features, open func(memory.Options) *memory.Memory)
	}{
		{"ExactHits", contractExactHits},
		{"TTL", contractTTL},
		{"StaleIfError", contractStaleIfError},
		{"Bounds", contractBounds},
		{"MutationInvalidatesEverywhere", contractMutationInvalidatesEverywhere},
		{"InvalidateServer", contractInvalidateServer},
		{"FetchedBeforeInvalidation", contractFetchedBeforeInvalidation},
		{"SingleFlight", contractSingleFlight},
		{"Similarity", contractSimilarity},
		{"Stats", contractStats},
		{"Refuted", contractRefuted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newStore(t)
			tt.test(t, f, func(opts memory.Options) *memory.Memory {
				opts.Backend = b
				return OpenMemory(t, opts)
			})
		})
	}
}

// remoteWaiting is how many calls of m wait for another process's
// identical call.
func remoteWaiting(m *memory.Memory) int {
	_, remote := m.Waiting()
	return remote
}

// contractExactHits: a result stored by one process is a hit in the
// other; different arguments are not.
func contractExactHits(t *testing.T, _ Features, open func(memory.Options) *memory.Memory) {
	a, b := open(memory.Options{}), open(memory.Options{})
	c := &Child{}
	WantStatus(t, "first call on a", Do(t, a, "", ReadTool(), `{"graph":"main"}`, c), memory.StatusMiss)
	res := Do(t, b, "", ReadTool(), `{ "graph" : "main" }`, c)
	WantStatus(t, "same call on b", res, memory.StatusHit)
	if Text(res) != "answer 1 to {\"graph\":\"main\"}" {
		t.Fatalf("b served %q", Text(res))
	}
	WantStatus(t, "again on a", Do(t, a, "", ReadTool(), `{"graph":"main"}`, c), memory.StatusHit)
	WantStatus(t, "other args on b", Do(t, b, "", ReadTool(), `{"graph":"dev"}`, c), memory.StatusMiss)
	if n := c.Calls.Load(); n != 2 {
		t.Fatalf("child called %d times, want 2", n)
	}
}

// contractTTL: an entry expires for every process, driven by
// Options.Now, hot layer or not.
func contractTTL(t *testing.T, _ Features, open func(memory.Options) *memory.Memory) {
	clk := NewClock()
	a, b := open(memory.Options{Now: clk.Now}), open(memory.Options{Now: clk.Now})
	rules := memory.Settings{TTL: map[string]memory.TTL{ReadTool().Name: {D: time.Minute}}}
	a.SetSettings(rules)
	b.SetSettings(rules)
	c := &Child{}
	Do(t, a, "", ReadTool(), `{}`, c)
	WantStatus(t, "within the ttl on b", Do(t, b, "", ReadTool(), `{}`, c), memory.StatusHit)
	clk.Advance(time.Minute)
	WantStatus(t, "after the ttl on a", Do(t, a, "", ReadTool(), `{}`, c), memory.StatusMiss)
	WantStatus(t, "refetched answer on b", Do(t, b, "", ReadTool(), `{}`, c), memory.StatusHit)
	if n := c.Calls.Load(); n != 2 {
		t.Fatalf("child called %d times, want 2", n)
	}
}

// contractStaleIfError: an entry marked stale by one process (its child
// restarted) is not fresh for any, and stands in for a failed child on
// every process; an expired one too, within the window.
func contractStaleIfError(t *testing.T, _ Features, open func(memory.Options) *memory.Memory) {
	clk := NewClock()
	a, b := open(memory.Options{Now: clk.Now}), open(memory.Options{Now: clk.Now})
	rules := memory.Settings{TTL: map[string]memory.TTL{ReadTool().Name: {D: time.Minute}}, StaleIfError: map[string]time.Duration{"code-kg.*": time.Hour}}
	a.SetSettings(rules)
	b.SetSettings(rules)
	c := &Child{}
	Do(t, a, "", ReadTool(), `{}`, c)
	down := func(context.Context) (memory.Answer, error) {
		return memory.Answer{Result: ErrorResult("down"), Outcome: memory.NotSent, Failure: "server code-kg is not running"}, nil
	}
	call := func(m *memory.Memory) json.RawMessage {
		res, err := m.Call(context.Background(), "", ReadTool(), json.RawMessage(`{}`), down)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	WantStatus(t, "fresh on b", call(b), memory.StatusHit)
	if err := a.MarkStale(context.Background(), ReadTool().Server); err != nil {
		t.Fatal(err)
	}
	WantStatus(t, "marked stale by a, child down, on b", call(b), memory.StatusStale)
	WantStatus(t, "child up on b", Do(t, b, "", ReadTool(), `{}`, c), memory.StatusMiss)
	WantStatus(t, "the refetched answer on a", call(a), memory.StatusHit)
	clk.Advance(2 * time.Minute)
	WantStatus(t, "expired, child down, on a", call(a), memory.StatusStale)
	clk.Advance(2 * time.Hour)
	WantStatus(t, "beyond the window", call(b), memory.StatusMiss)
}

// contractBounds: stores keep the entry count within MaxEntries,
// evicting the least recently used.
func contractBounds(t *testing.T, _ Features, open func(memory.Options) *memory.Memory) {
	clk := NewClock()
	a := open(memory.Options{Now: clk.Now, MaxEntries: 20})
	b := open(memory.Options{Now: clk.Now, MaxEntries: 20})
	c := &Child{}
	Do(t, a, "", ReadTool(), `{"n":0}`, c)
	for i := 1; i < 60; i++ {
		clk.Advance(time.Millisecond)
		Do(t, a, "", ReadTool(), fmt.Sprintf(`{"n":%d}`, i), c)
		// Keep n=0 recently used: a's hits are written before it evicts.
		Do(t, a, "", ReadTool(), `{"n":0}`, c)
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
	WantStatus(t, "the recently used entry", Do(t, b, "", ReadTool(), `{"n":0}`, c), memory.StatusHit)
	WantStatus(t, "an early entry", Do(t, b, "", ReadTool(), `{"n":1}`, c), memory.StatusMiss)
}

// contractMutationInvalidatesEverywhere: once a mutating call
// returned on one process, no process serves what it invalidated, not
// even from its hot layer, with no waiting in between.
func contractMutationInvalidatesEverywhere(t *testing.T, _ Features, open func(memory.Options) *memory.Memory) {
	a, b, third := open(memory.Options{}), open(memory.Options{}), open(memory.Options{})
	c := &Child{}
	Do(t, a, "", ReadTool(), `{}`, c)
	Do(t, a, "", OtherTool(), `{}`, c)
	for _, m := range []*memory.Memory{a, b, third} {
		// Twice: the second is served from the hot layer.
		Do(t, m, "", ReadTool(), `{}`, c)
		WantStatus(t, "before the write", Do(t, m, "", ReadTool(), `{}`, c), memory.StatusHit)
	}
	Do(t, b, "", WriteTool(), `{}`, c)
	// The child now fails, so no process stores a fresh answer: each
	// one must forward.
	failing := &Child{Text: func(json.RawMessage) string { return "" }}
	for i, m := range []*memory.Memory{a, b, third} {
		res, err := m.Call(context.Background(), "", ReadTool(), json.RawMessage(`{}`), Answers(string(ErrorResult("down"))))
		if err != nil {
			t.Fatal(err)
		}
		WantStatus(t, fmt.Sprintf("process %d after the write on b", i), res, memory.StatusMiss)
		WantStatus(t, fmt.Sprintf("process %d, another server", i), Do(t, m, "", OtherTool(), `{}`, failing), memory.StatusHit)
	}
}

// contractInvalidateServer: a child's restart on one process drops
// its entries for all.
func contractInvalidateServer(t *testing.T, _ Features, open func(memory.Options) *memory.Memory) {
	a, b := open(memory.Options{}), open(memory.Options{})
	c := &Child{}
	Do(t, a, "", ReadTool(), `{}`, c)
	Do(t, b, "", ReadTool(), `{}`, c)
	WantStatus(t, "hot on b", Do(t, b, "", ReadTool(), `{}`, c), memory.StatusHit)
	if err := a.MarkStale(context.Background(), ReadTool().Server); err != nil {
		t.Fatal(err)
	}
	WantStatus(t, "on b after the restart", Do(t, b, "", ReadTool(), `{}`, c), memory.StatusMiss)
	n, err := b.Clear(context.Background(), "", "")
	if err != nil || n != 1 {
		t.Fatalf("Clear: %d, %v; want 1 entry", n, err)
	}
	WantStatus(t, "on a after Clear", Do(t, a, "", ReadTool(), `{}`, c), memory.StatusMiss)
}

// contractFetchedBeforeInvalidation: a result whose child call
// started before another process invalidated is not stored.
func contractFetchedBeforeInvalidation(t *testing.T, _ Features, open func(memory.Options) *memory.Memory) {
	a, b := open(memory.Options{}), open(memory.Options{})
	c := &Child{}
	ctx := context.Background()
	_, err := a.Call(ctx, "", ReadTool(), json.RawMessage(`{}`), Plain(func(context.Context) (json.RawMessage, error) {
		Do(t, b, "", WriteTool(), `{}`, c) // invalidates code-kg while a's call is out
		return TextResult("old"), nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	res := Do(t, b, "", ReadTool(), `{}`, c)
	WantStatus(t, "after the racing write", res, memory.StatusMiss)
}

// contractSingleFlight: identical calls arriving together on two
// processes make one child call where the store coordinates processes.
func contractSingleFlight(t *testing.T, f Features, open func(memory.Options) *memory.Memory) {
	if !f.CrossProcessFlights {
		t.Skip("SQLite coalesces identical calls within a process (TestSingleFlight)")
	}
	a, b := open(memory.Options{}), open(memory.Options{})
	var calls int
	var mu sync.Mutex
	entered, release := make(chan struct{}), make(chan struct{})
	forward := Plain(func(context.Context) (json.RawMessage, error) {
		mu.Lock()
		calls++
		mu.Unlock()
		close(entered)
		<-release
		return TextResult("one answer"), nil
	})
	ctx := context.Background()
	results := make([]json.RawMessage, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		results[0], errs[0] = a.Call(ctx, "", ReadTool(), json.RawMessage(`{"x":1}`), forward)
	}()
	<-entered
	go func() {
		defer wg.Done()
		results[1], errs[1] = b.Call(ctx, "", ReadTool(), json.RawMessage(`{"x":1}`), forward)
	}()
	WaitFor(t, "b to wait for a's call", func() bool { return remoteWaiting(b) == 1 })
	close(release)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Fatalf("%d child calls, want 1", calls)
	}
	WantStatus(t, "leader", results[0], memory.StatusMiss)
	WantStatus(t, "follower", results[1], memory.StatusHit)
	if Text(results[1]) != "one answer" {
		t.Fatalf("follower got %q", Text(results[1]))
	}
}

// contractSimilarity: a paraphrase on one process is served the
// answer another process stored, and not after an invalidation.
func contractSimilarity(t *testing.T, _ Features, open func(memory.Options) *memory.Memory) {
	a, b := open(memory.Options{}), open(memory.Options{})
	if err := b.WaitIndex(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := &Child{}
	Do(t, a, "", SearchTool(), SearchArgs("postgres connection pool settings", 10), c)
	res := Do(t, b, "", SearchTool(), SearchArgs("connection pool settings for postgres", 10), c)
	if st, _, _ := SemanticReport(t, res); st != memory.StatusSemanticHit {
		t.Fatalf("paraphrase on b: %s", st)
	}
	WantStatus(t, "other limit (another bucket)", Do(t, b, "", SearchTool(), SearchArgs("connection pool settings for postgres", 20), c), memory.StatusMiss)
	if err := a.MarkStale(context.Background(), SearchTool().Server); err != nil {
		t.Fatal(err)
	}
	WantStatus(t, "after invalidation", Do(t, b, "", SearchTool(), SearchArgs("settings of the postgres connection pool", 10), c), memory.StatusMiss)
}

// contractStats: counters of every process add up in one place.
func contractStats(t *testing.T, _ Features, open func(memory.Options) *memory.Memory) {
	a, b := open(memory.Options{}), open(memory.Options{})
	c := &Child{}
	Do(t, a, "", ReadTool(), `{}`, c)
	Do(t, b, "", ReadTool(), `{}`, c)
	Do(t, b, "", WriteTool(), `{}`, c)
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
}

// contractRefuted: a similarity hit one process's verification refuted is
// counted in the store and never served by another process, whether it
// was running then or opened after it (and starts from the store's
// counts).
func contractRefuted(t *testing.T, _ Features, open func(memory.Options) *memory.Memory) {
	a, running := open(memory.Options{}), open(memory.Options{})
	kept := map[string]memory.TTL{"*": {Never: true}}
	running.SetSettings(memory.Settings{TTL: kept})
	a.SetSettings(memory.Settings{TTL: kept, Verify: memory.Verify{Rate: 1, PerMinute: 100}})
	c := &Child{} // a paraphrase's answer differs
	tool := SearchTool()
	DoVerified(t, a, "", tool, SearchArgs("postgres connection pool settings", 10), c)
	if s := Status(t, DoVerified(t, a, "", tool, SearchArgs("show me the postgres connection pool settings", 10), c)); s != memory.StatusSemanticHit {
		t.Fatalf("paraphrase: %s, want a similarity hit", s)
	}
	WaitFor(t, "the verification", func() bool {
		ms := a.Measured()
		return len(ms) == 1 && ms[0].FalseHits == 1
	})
	if _, err := a.Stats(context.Background()); err != nil { // flushes a's counters
		t.Fatal(err)
	}
	b := open(memory.Options{})
	b.SetSettings(memory.Settings{TTL: kept})
	if ms := b.Measured(); len(ms) != 1 || ms[0].SemanticChecks != 1 || ms[0].FalseHits != 1 {
		t.Fatalf("measured by another process: %+v, want 1 check and 1 false hit", ms)
	}
	if s := Status(t, Do(t, b, "", tool, SearchArgs("list the postgres connection pool settings", 10), c)); s != memory.StatusMiss {
		t.Fatalf("the refuted pair in another process: %s, want miss", s)
	}
	if s := Status(t, Do(t, running, "", tool, SearchArgs("please show the postgres connection pool settings", 10), c)); s != memory.StatusMiss {
		t.Fatalf("the refuted pair in a process running when it was refuted: %s, want miss", s)
	}
}
