package memory_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/internal/sqlitedb"
	. "github.com/nexus-mcp/nexus/memory"
	. "github.com/nexus-mcp/nexus/memory/memorytest"
	"github.com/nexus-mcp/nexus/memory/sqlite"
)

// openTest opens a Memory on opts.Backend, by default a SQLite file of
// t's own.
func openTest(t testing.TB, opts Options) *Memory {
	t.Helper()
	if opts.Backend == nil {
		opts.Backend = sqlite.File(filepath.Join(t.TempDir(), "memory.db"))
	}
	return OpenMemory(t, opts)
}

func TestRepeatedCallHits(t *testing.T) {
	clk := NewClock()
	m := openTest(t, Options{Now: clk.Now})
	c := &Child{}
	first := Do(t, m, "agent-a", ReadTool(), `{"a":1,"b":2}`, c)
	if got := Status(t, first); got != StatusMiss {
		t.Fatalf("first status = %q, want miss", got)
	}
	clk.Advance(1500 * time.Millisecond)
	second := Do(t, m, "agent-b", ReadTool(), `{ "b":2, "a":1 }`, c)
	st, age, _ := CacheStatus(second)
	if st != StatusHit || age != 1500 {
		t.Fatalf("second: status %q age %d, want hit 1500", st, age)
	}
	if c.Calls.Load() != 1 {
		t.Fatalf("forward called %d times, want 1", c.Calls.Load())
	}
	if Text(second) != Text(first) {
		t.Fatalf("hit %q != miss %q", Text(second), Text(first))
	}
	// The report is plain JSON any client can read.
	var wire struct {
		Meta map[string]struct {
			Status string `json:"status"`
			AgeMS  int64  `json:"age_ms"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(second, &wire); err != nil {
		t.Fatal(err)
	}
	if r := wire.Meta[MetaKey]; r.Status != StatusHit || r.AgeMS != 1500 {
		t.Fatalf("wire: %s", second)
	}
}

func TestDifferentArgsMiss(t *testing.T) {
	m := openTest(t, Options{})
	c := &Child{}
	a := Do(t, m, "", ReadTool(), `{"env":"staging"}`, c)
	b := Do(t, m, "", ReadTool(), `{"env":"production"}`, c)
	if Status(t, a) != StatusMiss || Status(t, b) != StatusMiss || c.Calls.Load() != 2 {
		t.Fatalf("statuses %q %q, calls %d", Status(t, a), Status(t, b), c.Calls.Load())
	}
	if Text(a) == Text(b) {
		t.Fatal("staging and production share an answer")
	}
	// Same args, other tool: miss.
	if st := Status(t, Do(t, m, "", ReadTool2(), `{"env":"staging"}`, c)); st != StatusMiss {
		t.Fatalf("other tool: %q", st)
	}
}

func TestTTLExpiry(t *testing.T) {
	clk := NewClock()
	m := openTest(t, Options{Now: clk.Now})
	m.SetSettings(Kept(Settings{TTL: map[string]TTL{"code-kg.*": {D: time.Minute}}}))
	c := &Child{}
	Do(t, m, "", ReadTool(), `{}`, c)
	clk.Advance(59 * time.Second)
	if st := Status(t, Do(t, m, "", ReadTool(), `{}`, c)); st != StatusHit {
		t.Fatalf("before expiry: %q", st)
	}
	clk.Advance(time.Second)
	res := Do(t, m, "", ReadTool(), `{}`, c)
	if st := Status(t, res); st != StatusMiss || c.Calls.Load() != 2 {
		t.Fatalf("after expiry: %q, calls %d", st, c.Calls.Load())
	}
	// The refetched answer replaced the expired one.
	clk.Advance(time.Second)
	if res2 := Do(t, m, "", ReadTool(), `{}`, c); Status(t, res2) != StatusHit || Text(res2) != Text(res) {
		t.Fatalf("refetched entry not served: %q %q", Status(t, res2), Text(res2))
	}
	// A shortened TTL applies to stored entries at once.
	m.SetSettings(Kept(Settings{TTL: map[string]TTL{"code-kg.*": {D: 500 * time.Millisecond}}}))
	if st := Status(t, Do(t, m, "", ReadTool(), `{}`, c)); st != StatusMiss {
		t.Fatalf("after shortening ttl: %q", st)
	}
	// Default TTL: five minutes.
	m.SetSettings(Kept(Settings{}))
	Do(t, m, "", OtherTool(), `{}`, c)
	clk.Advance(KeepFor - time.Millisecond)
	if st := Status(t, Do(t, m, "", OtherTool(), `{}`, c)); st != StatusHit {
		t.Fatalf("within default ttl: %q", st)
	}
	clk.Advance(time.Millisecond)
	if st := Status(t, Do(t, m, "", OtherTool(), `{}`, c)); st != StatusMiss {
		t.Fatalf("after default ttl: %q", st)
	}
	// never: no expiry.
	m.SetSettings(Kept(Settings{TTL: map[string]TTL{"*": {Never: true}}}))
	Do(t, m, "", OtherTool(), `{"x":1}`, c)
	clk.Advance(1000 * 24 * time.Hour)
	if st := Status(t, Do(t, m, "", OtherTool(), `{"x":1}`, c)); st != StatusHit {
		t.Fatalf("never ttl: %q", st)
	}
}

func TestErrorsNotStored(t *testing.T) {
	m := openTest(t, Options{})
	var calls atomic.Int64
	errDown := errors.New("transport down")
	failing := Plain(func(context.Context) (json.RawMessage, error) {
		calls.Add(1)
		return nil, errDown
	})
	counted := func(raw json.RawMessage) Forward {
		return Plain(func(context.Context) (json.RawMessage, error) {
			calls.Add(1)
			return raw, nil
		})
	}
	incomplete := []string{
		`{"content":[{"type":"text","text":"need more"}],"resultType":"input_required","inputRequests":{"r1":{"method":"roots/list"}}}`,
		`{"content":[],"resultType":"input_required"}`,
		`{"content":[],"inputRequests":{"r1":{"method":"roots/list"}}}`,
		`{"content":[],"resultType":"something_new"}`,
	}
	ctx := context.Background()
	for range 2 {
		res, err := m.Call(ctx, "", ReadTool(), json.RawMessage(`{"e":1}`), counted(ErrorResult("boom")))
		if err != nil || !IsError(t, res) || Status(t, res) != StatusMiss {
			t.Fatalf("isError: %v %s", err, res)
		}
		if _, err := m.Call(ctx, "", ReadTool(), json.RawMessage(`{"e":2}`), failing); err != errDown {
			t.Fatalf("error not passed through: %v", err)
		}
		for i, raw := range incomplete {
			args := json.RawMessage(fmt.Sprintf(`{"e":3,"i":%d}`, i))
			if res, err := m.Call(ctx, "", ReadTool(), args, counted(json.RawMessage(raw))); err != nil || Status(t, res) != StatusMiss {
				t.Fatalf("incomplete %s: %v %s", raw, err, res)
			}
		}
	}
	if want := int64(2 * (2 + len(incomplete))); calls.Load() != want {
		t.Fatalf("forward called %d times, want %d (nothing stored)", calls.Load(), want)
	}
	// A complete result says so, or says nothing.
	for i, raw := range []string{`{"content":[],"resultType":"complete"}`, `{"content":[]}`} {
		args := json.RawMessage(fmt.Sprintf(`{"e":4,"i":%d}`, i))
		m.Call(ctx, "", ReadTool(), args, counted(json.RawMessage(raw)))
		if res, _ := m.Call(ctx, "", ReadTool(), args, counted(json.RawMessage(raw))); Status(t, res) != StatusHit {
			t.Fatalf("complete %s not stored: %s", raw, res)
		}
	}
}

func TestOversizeNotStored(t *testing.T) {
	m := openTest(t, Options{MaxResultBytes: 1000})
	c := &Child{Text: func(args json.RawMessage) string {
		if strings.Contains(string(args), "big") {
			return strings.Repeat("x", 2000)
		}
		return "small"
	}}
	Do(t, m, "", ReadTool(), `{"size":"big"}`, c)
	if st := Status(t, Do(t, m, "", ReadTool(), `{"size":"big"}`, c)); st != StatusMiss {
		t.Fatalf("oversize result served from memory: %q", st)
	}
	Do(t, m, "", ReadTool(), `{"size":"small"}`, c)
	if st := Status(t, Do(t, m, "", ReadTool(), `{"size":"small"}`, c)); st != StatusHit {
		t.Fatalf("small result: %q", st)
	}
}

func TestMutatingCallInvalidates(t *testing.T) {
	m := openTest(t, Options{})
	c := &Child{}
	fill := func() {
		for _, tl := range []Tool{ReadTool(), ReadTool2(), OtherTool()} {
			Do(t, m, "", tl, `{}`, c)
		}
	}
	statuses := func() string {
		var s []string
		for _, tl := range []Tool{ReadTool(), ReadTool2(), OtherTool()} {
			s = append(s, Status(t, Do(t, m, "", tl, `{}`, c)))
		}
		return strings.Join(s, ",")
	}

	// Default: the whole server.
	fill()
	if st := Status(t, Do(t, m, "", WriteTool(), `{"force":true}`, c)); st != StatusBypass {
		t.Fatalf("mutating call status %q", st)
	}
	if got := statuses(); got != "miss,miss,hit" {
		t.Fatalf("after whole-server invalidation: %s", got)
	}

	// Narrowed by config.
	m.SetSettings(Kept(Settings{Invalidate: map[string][]string{WriteTool().Name: {ReadTool().Name}}}))
	Do(t, m, "", WriteTool(), `{}`, c)
	if got := statuses(); got != "miss,hit,hit" {
		t.Fatalf("after narrowed invalidation: %s", got)
	}
	m.SetSettings(Kept(Settings{Invalidate: map[string][]string{WriteTool().Name: {"doc-kg.*"}}}))
	Do(t, m, "", WriteTool(), `{}`, c)
	if got := statuses(); got != "hit,hit,miss" {
		t.Fatalf("after cross-server invalidation: %s", got)
	}

	// A call the child reports as failed changes nothing.
	m.SetSettings(Kept(Settings{}))
	_, err := m.Call(context.Background(), "", WriteTool(), nil, Plain(func(context.Context) (json.RawMessage, error) {
		return ErrorResult("denied"), nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := statuses(); got != "hit,hit,hit" {
		t.Fatalf("after failed mutating call: %s", got)
	}

	// A read-only tool forced to never is not a mutation.
	m.SetSettings(Kept(Settings{Cache: map[string]Mode{OtherTool().Name: Never}}))
	if st := Status(t, Do(t, m, "", OtherTool(), `{}`, c)); st != StatusBypass {
		t.Fatalf("never: %q", st)
	}
	m.SetSettings(Kept(Settings{}))
	if got := statuses(); got != "hit,hit,hit" {
		t.Fatalf("after read-only bypass: %s", got)
	}
}

func TestInvalidationRace(t *testing.T) {
	// A result fetched before an invalidation must not be stored after it.
	m := openTest(t, Options{})
	release := make(chan struct{})
	entered := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Call(context.Background(), "", ReadTool(), nil, Plain(func(context.Context) (json.RawMessage, error) {
			close(entered)
			<-release
			return TextResult("before the write"), nil
		}))
	}()
	<-entered
	c := &Child{}
	Do(t, m, "", WriteTool(), `{}`, c)
	close(release)
	<-done
	if st := Status(t, Do(t, m, "", ReadTool(), `{}`, c)); st != StatusMiss {
		t.Fatalf("pre-invalidation result served: %q", st)
	}
}

func TestAgentScoped(t *testing.T) {
	m := openTest(t, Options{})
	c := &Child{}
	Do(t, m, "alice", ReadTool(), `{}`, c)
	if st := Status(t, Do(t, m, "bob", ReadTool(), `{}`, c)); st != StatusHit {
		t.Fatalf("shared scope: bob got %q", st)
	}
	m.SetSettings(Kept(Settings{AgentScoped: map[string]bool{"code-kg": true}}))
	Do(t, m, "alice", ReadTool(), `{"q":1}`, c)
	if st := Status(t, Do(t, m, "bob", ReadTool(), `{"q":1}`, c)); st != StatusMiss {
		t.Fatalf("agent scope: bob got alice's answer (%q)", st)
	}
	if st := Status(t, Do(t, m, "alice", ReadTool(), `{"q":1}`, c)); st != StatusHit {
		t.Fatalf("agent scope: alice %q", st)
	}
	if st := Status(t, Do(t, m, "bob", OtherTool(), `{}`, c)); st != StatusMiss {
		t.Fatalf("other server: %q", st)
	}
	if st := Status(t, Do(t, m, "alice", OtherTool(), `{}`, c)); st != StatusHit {
		t.Fatalf("other server stays shared: %q", st)
	}
}

func TestSingleFlight(t *testing.T) {
	m := openTest(t, Options{})
	const n = 16
	var calls atomic.Int64
	entered := make(chan struct{})
	release := make(chan struct{})
	forward := Plain(func(context.Context) (json.RawMessage, error) {
		if calls.Add(1) == 1 {
			close(entered)
		}
		<-release
		return json.RawMessage(`{"content":[{"type":"text","text":"shared"}],"_meta":{"child/trace":"t1"}}`), nil
	})
	var wg sync.WaitGroup
	results := make([]json.RawMessage, n)
	errs := make([]error, n)
	start := func(i int) {
		wg.Go(func() {
			results[i], errs[i] = m.Call(context.Background(), "", ReadTool(), json.RawMessage(`{"k":"v"}`), forward)
		})
	}
	start(0)
	<-entered
	for i := 1; i < n; i++ {
		start(i)
	}
	for deadline := time.Now().Add(10 * time.Second); localWaiting(m) < n-1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d followers joined the flight", localWaiting(m), n-1)
		}
	}
	close(release)
	wg.Wait()
	if calls.Load() != 1 {
		t.Fatalf("forward called %d times, want 1", calls.Load())
	}
	counts := map[string]int{}
	coalesced := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if Text(results[i]) != "shared" || metaMember(t, results[i], "child/trace") != `"t1"` {
			t.Fatalf("call %d got %s", i, results[i])
		}
		counts[Status(t, results[i])]++
		var report struct{ Coalesced bool }
		if err := json.Unmarshal([]byte(metaMember(t, results[i], MetaKey)), &report); err != nil {
			t.Fatal(err)
		}
		if report.Coalesced {
			coalesced++
		}
	}
	if counts[StatusMiss] != 1 || counts[StatusHit] != n-1 || coalesced != n-1 {
		t.Fatalf("statuses %v, %d coalesced", counts, coalesced)
	}
	// Each caller got its own bytes.
	results[0][0] = 'X'
	for i := 1; i < n; i++ {
		if results[i][0] == 'X' {
			t.Fatal("results share memory")
		}
	}
}

func TestLeaderCancelDoesNotPoisonFollowers(t *testing.T) {
	m := openTest(t, Options{})
	var calls atomic.Int64
	leaderIn := make(chan struct{})
	forward := Plain(func(ctx context.Context) (json.RawMessage, error) {
		if calls.Add(1) == 1 {
			close(leaderIn)
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return TextResult("from the follower's retry"), nil
	})
	leaderCtx, cancel := context.WithCancel(context.Background())
	leaderErr := make(chan error, 1)
	go func() {
		_, err := m.Call(leaderCtx, "", ReadTool(), json.RawMessage(`{}`), forward)
		leaderErr <- err
	}()
	<-leaderIn
	type out struct {
		res json.RawMessage
		err error
	}
	follower := make(chan out, 1)
	go func() {
		res, err := m.Call(context.Background(), "", ReadTool(), json.RawMessage(`{}`), forward)
		follower <- out{res, err}
	}()
	WaitFor(t, "the follower to join", func() bool { return localWaiting(m) == 1 })
	cancel()
	if err := <-leaderErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("leader: %v", err)
	}
	got := <-follower
	if got.err != nil || Text(got.res) != "from the follower's retry" {
		t.Fatalf("follower: %v %q", got.err, Text(got.res))
	}
	if calls.Load() != 2 {
		t.Fatalf("forward called %d times, want 2", calls.Load())
	}
	// A follower whose own context ends stops waiting.
	block, leading := make(chan struct{}), make(chan struct{})
	defer close(block)
	go m.Call(context.Background(), "", ReadTool(), json.RawMessage(`{"x":1}`), Plain(func(context.Context) (json.RawMessage, error) {
		close(leading)
		<-block
		return TextResult("late"), nil
	}))
	<-leading
	ctx, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if _, err := m.Call(ctx, "", ReadTool(), json.RawMessage(`{"x":1}`), forward); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting follower: %v", err)
	}
}

func TestRedact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	m := openTest(t, Options{Backend: sqlite.File(path), Redact: func(b []byte) []byte {
		return []byte(strings.ReplaceAll(string(b), "hunter2", "[redacted]"))
	}})
	c := &Child{Text: func(json.RawMessage) string { return "password is hunter2" }}
	if got := Text(Do(t, m, "", ReadTool(), `{"token":"hunter2"}`, c)); got != "password is hunter2" {
		t.Fatalf("miss: %q", got)
	}
	if got := Text(Do(t, m, "", ReadTool(), `{"token":"hunter2"}`, c)); got != "password is [redacted]" {
		t.Fatalf("hit: %q", got)
	}
	// Other secret, other key: redaction does not merge keys.
	if st := Status(t, Do(t, m, "", ReadTool(), `{"token":"hunter3"}`, c)); st != StatusMiss {
		t.Fatalf("other token: %q", st)
	}
	m.Close()
	for _, p := range []string{path, path + "-wal"} {
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), "hunter2") {
			t.Fatalf("secret in %s", p)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("database mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
}

func TestNilAndBypass(t *testing.T) {
	var m *Memory
	c := &Child{}
	res, err := m.Call(context.Background(), "", ReadTool(), nil, c.Forward(nil))
	if err != nil || string(res) != string(TextResult("answer 1 to ")) {
		t.Fatalf("nil memory: %v %s", err, res)
	}
	// Not even a result memory would have to splice into is touched.
	for _, raw := range []string{`{"_meta":{"a":1},  "content":[]}`, `[1]`, `not json`} {
		res, err := m.Call(context.Background(), "", ReadTool(), nil, Answers(raw))
		if err != nil || string(res) != raw {
			t.Fatalf("nil memory changed %s to %s (%v)", raw, res, err)
		}
	}
	if err := m.MarkStale(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	m.SetSettings(Kept(Settings{}))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	mm := openTest(t, Options{})
	unannotated := Tool{Name: "x.y", Server: "x"}
	for range 2 {
		if st := Status(t, Do(t, mm, "", unannotated, `{}`, c)); st != StatusBypass {
			t.Fatalf("unannotated: %q", st)
		}
	}
	// Arguments that are not JSON are forwarded for the child to reject.
	if st := Status(t, Do(t, mm, "", ReadTool(), `{bad`, c)); st != StatusBypass {
		t.Fatalf("bad args: %q", st)
	}
}

func TestInvalidateServerAndClear(t *testing.T) {
	m := openTest(t, Options{})
	c := &Child{}
	ctx := context.Background()
	for i := range 3 {
		Do(t, m, "", ReadTool(), fmt.Sprintf(`{"i":%d}`, i), c)
		Do(t, m, "", OtherTool(), fmt.Sprintf(`{"i":%d}`, i), c)
	}
	if err := m.MarkStale(ctx, "code-kg"); err != nil {
		t.Fatal(err)
	}
	if st := Status(t, Do(t, m, "", ReadTool(), `{"i":0}`, c)); st != StatusMiss {
		t.Fatalf("after MarkStale: %q", st)
	}
	if st := Status(t, Do(t, m, "", OtherTool(), `{"i":0}`, c)); st != StatusHit {
		t.Fatalf("other server after MarkStale: %q", st)
	}
	if st := Status(t, Do(t, m, "", ReadTool(), `{"i":1}`, c)); st != StatusMiss {
		t.Fatalf("another stale entry: %q", st)
	}
	n, err := m.Clear(ctx, "doc-kg", "")
	if err != nil || n != 3 {
		t.Fatalf("Clear(doc-kg) = %d, %v", n, err)
	}
	// Stale entries are kept (for stale-if-error) until they expire or are
	// cleared.
	n, err = m.Clear(ctx, "", "")
	if err != nil || n != 3 {
		t.Fatalf("Clear(all) = %d, %v", n, err)
	}
	list, err := m.List(ctx, 0)
	if err != nil || len(list) != 0 {
		t.Fatalf("List after clear: %v %v", list, err)
	}
}

func TestList(t *testing.T) {
	clk := NewClock()
	m := openTest(t, Options{Now: clk.Now})
	m.SetSettings(Kept(Settings{TTL: map[string]TTL{"doc-kg.*": {Never: true}}}))
	c := &Child{}
	Do(t, m, "", ReadTool(), `{"b":1,"a":"x"}`, c)
	clk.Advance(time.Second)
	Do(t, m, "", OtherTool(), `{}`, c)
	clk.Advance(time.Second)
	Do(t, m, "", ReadTool(), `{"a":"x","b":1}`, c) // hit: most recently used
	list, err := m.List(context.Background(), 10)
	if err != nil || len(list) != 2 {
		t.Fatalf("List: %v %v", list, err)
	}
	e := list[0]
	if e.Tool != ReadTool().Name || string(e.Args) != `{"a":"x","b":1}` || e.Hits != 1 || e.ExpiresAt == nil ||
		e.ExpiresAt.Sub(e.CreatedAt) != KeepFor || len(e.Fingerprint) != 64 {
		t.Fatalf("entry %+v", e)
	}
	if list[1].ExpiresAt != nil {
		t.Fatalf("never entry has expiry %v", list[1].ExpiresAt)
	}
	if _, err := json.Marshal(list); err != nil {
		t.Fatal(err)
	}
}

func TestIdempotentWriteTool(t *testing.T) {
	// idempotentHint without readOnlyHint is never remembered: repeating an
	// idempotent call changes nothing more, but skipping it skips the
	// change (a directory that was never created). Its calls invalidate.
	m := openTest(t, Options{})
	ensure := Tool{Name: "code-kg.ensure_label", Server: "code-kg", Annotated: true, Idempotent: true}
	c := &Child{}
	Do(t, m, "", ReadTool(), `{}`, c)
	if st := Status(t, Do(t, m, "", ensure, `{"l":"bug"}`, c)); st != StatusBypass {
		t.Fatalf("first idempotent call: %q", st)
	}
	if st := Status(t, Do(t, m, "", ReadTool(), `{}`, c)); st != StatusMiss {
		t.Fatalf("read after idempotent write: %q", st)
	}
	before := c.Calls.Load()
	if st := Status(t, Do(t, m, "", ensure, `{"l":"bug"}`, c)); st != StatusBypass || c.Calls.Load() != before+1 {
		t.Fatalf("repeated idempotent call: %q, child calls %d -> %d", st, before, c.Calls.Load())
	}
	if st := Status(t, Do(t, m, "", ReadTool(), `{}`, c)); st != StatusMiss {
		t.Fatalf("read after the repeated idempotent write: %q", st)
	}
}

// TestExactKeysAsTheChildSeesThem: arguments a JavaScript or Python child
// receives as different strings never share an entry, by exact key or by
// similarity.
func TestExactKeysAsTheChildSeesThem(t *testing.T) {
	m := openTest(t, Options{})
	tool := Tool{Name: "doc-kg.search", Server: "doc-kg", Annotated: true, ReadOnly: true,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}}}`)}
	c := &Child{}
	args := []string{
		`{"query":"\ud800 id"}`, `{"query":"\ufffd id"}`, `{"query":"\udc00 id"}`,
		"{\"query\":\"\xff id\"}", "{\"query\":\"\xed\xa0\x80 id\"}",
	}
	for _, a := range args {
		if got := Status(t, Do(t, m, "", tool, a, c)); got != StatusMiss {
			t.Errorf("%q: status %s, want miss", a, got)
		}
	}
	if n := c.Calls.Load(); n != int64(len(args)) {
		t.Errorf("child called %d times, want %d", n, len(args))
	}
	for _, a := range args {
		if got := Status(t, Do(t, m, "", tool, a, c)); got != StatusHit {
			t.Errorf("%q again: status %s, want hit", a, got)
		}
	}
}

// localWaiting is how many calls of m wait for an identical call of m.
func localWaiting(m *Memory) int {
	n, _ := m.Waiting()
	return n
}

// sqlDB is a connection of its own to m's SQLite file, as another process
// would have, closed with t.
func sqlDB(t testing.TB, m *Memory) *sql.DB {
	t.Helper()
	db, err := sqlitedb.Open(m.StoreOf().Where(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestQueryHitNeverWaits: Query.Hit answers from what memory holds and never
// waits, even while an identical call is in flight; Query.Call then shares that
// call; a nil Memory's query forwards.
func TestQueryHitNeverWaits(t *testing.T) {
	ctx := context.Background()
	m := openTest(t, Options{})
	if m.LookupWaits() {
		t.Error("a SQLite file's lookups said they wait on the network")
	}
	args := json.RawMessage(`{"q":1}`)
	release := make(chan struct{})
	calls := atomic.Int64{}
	slow := Plain(func(context.Context) (json.RawMessage, error) {
		calls.Add(1)
		<-release
		return TextResult("slow answer"), nil
	})
	leader := make(chan json.RawMessage)
	go func() {
		res, _ := m.Call(ctx, "a", ReadTool(), args, slow)
		leader <- res
	}()
	WaitFor(t, "the leader to reach its child", func() bool { return calls.Load() == 1 })

	q := m.Query("a", ReadTool(), args)
	hit := make(chan bool, 1)
	go func() {
		_, ok := q.Hit(ctx)
		hit <- ok
	}()
	select {
	case ok := <-hit:
		if ok {
			t.Fatal("Hit answered a call still in flight")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Hit waited for the identical call in flight")
	}
	follower := make(chan json.RawMessage)
	go func() {
		res, err := q.Call(ctx, slow)
		if err != nil {
			t.Error(err)
		}
		follower <- res
	}()
	WaitFor(t, "the follower to join the call in flight", func() bool { local, _ := m.Waiting(); return local == 1 })
	close(release)
	lead, follow := <-leader, <-follower
	if Text(lead) != "slow answer" || Text(follow) != "slow answer" || calls.Load() != 1 {
		t.Fatalf("leader %s, follower %s, child calls %d: want one call shared", lead, follow, calls.Load())
	}
	if !strings.Contains(string(follow), `"coalesced":true`) {
		t.Errorf("the follower's answer is not marked as shared: %s", follow)
	}

	res, ok := m.Query("a", ReadTool(), args).Hit(ctx)
	if !ok || Status(t, res) != StatusHit || Text(res) != "slow answer" {
		t.Errorf("Hit after the call: %s, %v; want the stored answer as a hit", res, ok)
	}

	var off *Memory
	raw, err := off.Query("a", ReadTool(), args).Call(ctx, Answers(`{"content":[]}`))
	if _, hit := off.Query("a", ReadTool(), args).Hit(ctx); hit || err != nil || string(raw) != `{"content":[]}` {
		t.Errorf("memory off: hit %v, answer %s, %v; want the child's answer as it was", hit, raw, err)
	}
}
