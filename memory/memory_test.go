package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock is an injectable Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testLogger sends memory's logs to t.Log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func openTest(t testing.TB, opts Options) *Memory {
	t.Helper()
	if opts.Path == "" {
		opts.Path = filepath.Join(t.TempDir(), "memory.db")
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	m, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := m.Err(); err != nil {
		t.Fatalf("Open: memory disabled: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	m.SetSettings(kept(Settings{}))
	return m
}

// testTTL is what most tests keep answers for: results are kept only for a
// TTL someone gave (see TestNoTTLNoMemory).
const testTTL = 5 * time.Minute

// kept is s with testTTL for every tool s gives no TTL.
func kept(s Settings) Settings {
	if _, ok := s.TTL["*"]; !ok {
		s.TTL = maps.Clone(s.TTL)
		if s.TTL == nil {
			s.TTL = map[string]TTL{}
		}
		s.TTL["*"] = TTL{D: testTTL}
	}
	return s
}

// child is a fake child server that counts calls.
type child struct {
	calls atomic.Int64
	text  func(args json.RawMessage) string
}

func (c *child) forward(args json.RawMessage) Forward {
	return plain(func(context.Context) (json.RawMessage, error) {
		n := c.calls.Add(1)
		text := fmt.Sprintf("answer %d to %s", n, args)
		if c.text != nil {
			text = c.text(args)
		}
		return textResult(text), nil
	})
}

// textResult is the raw CallToolResult a child sends for one text item.
func textResult(text string) json.RawMessage {
	b, err := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}})
	if err != nil {
		panic(err)
	}
	return b
}

// errorResult is the raw CallToolResult of a call the child reports failed.
func errorResult(text string) json.RawMessage {
	b, err := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}, "isError": true})
	if err != nil {
		panic(err)
	}
	return b
}

// answer returns a forward func that always answers raw.
func answer(raw string) Forward {
	return plain(func(context.Context) (json.RawMessage, error) { return json.RawMessage(raw), nil })
}

var (
	readTool  = Tool{Name: "code-kg.kg_latest_graph", Server: "code-kg", Annotated: true, ReadOnly: true}
	readTool2 = Tool{Name: "code-kg.kg_graph_summary", Server: "code-kg", Annotated: true, ReadOnly: true}
	otherTool = Tool{Name: "doc-kg.search", Server: "doc-kg", Annotated: true, ReadOnly: true}
	writeTool = Tool{Name: "code-kg.kg_regenerate", Server: "code-kg", Annotated: true}
)

func do(t testing.TB, m *Memory, agent string, tool Tool, args string, c *child) json.RawMessage {
	t.Helper()
	res, err := m.Call(context.Background(), agent, tool, json.RawMessage(args), c.forward(json.RawMessage(args)))
	if err != nil {
		t.Fatalf("Call(%s, %s): %v", tool.Name, args, err)
	}
	return res
}

func status(t testing.TB, res json.RawMessage) string {
	t.Helper()
	s, _, ok := CacheStatus(res)
	if !ok {
		t.Fatalf("result has no %s: %s", MetaKey, res)
	}
	return s
}

// text returns the text of the first content item of res.
func text(res json.RawMessage) string {
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(res, &r); err != nil || len(r.Content) == 0 {
		return ""
	}
	if r.Content[0].Type != "text" {
		return r.Content[0].Type
	}
	return r.Content[0].Text
}

// isError reports the isError member of res.
func isError(t testing.TB, res json.RawMessage) bool {
	t.Helper()
	s, err := readShape(res)
	if err != nil {
		t.Fatalf("result %s: %v", res, err)
	}
	return s.IsError
}

func TestRepeatedCallHits(t *testing.T) {
	clk := newClock()
	m := openTest(t, Options{Now: clk.Now})
	c := &child{}
	first := do(t, m, "agent-a", readTool, `{"a":1,"b":2}`, c)
	if got := status(t, first); got != StatusMiss {
		t.Fatalf("first status = %q, want miss", got)
	}
	clk.Advance(1500 * time.Millisecond)
	second := do(t, m, "agent-b", readTool, `{ "b":2.0, "a":1 }`, c)
	st, age, _ := CacheStatus(second)
	if st != StatusHit || age != 1500 {
		t.Fatalf("second: status %q age %d, want hit 1500", st, age)
	}
	if c.calls.Load() != 1 {
		t.Fatalf("forward called %d times, want 1", c.calls.Load())
	}
	if text(second) != text(first) {
		t.Fatalf("hit %q != miss %q", text(second), text(first))
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
	c := &child{}
	a := do(t, m, "", readTool, `{"env":"staging"}`, c)
	b := do(t, m, "", readTool, `{"env":"production"}`, c)
	if status(t, a) != StatusMiss || status(t, b) != StatusMiss || c.calls.Load() != 2 {
		t.Fatalf("statuses %q %q, calls %d", status(t, a), status(t, b), c.calls.Load())
	}
	if text(a) == text(b) {
		t.Fatal("staging and production share an answer")
	}
	// Same args, other tool: miss.
	if st := status(t, do(t, m, "", readTool2, `{"env":"staging"}`, c)); st != StatusMiss {
		t.Fatalf("other tool: %q", st)
	}
}

func TestTTLExpiry(t *testing.T) {
	clk := newClock()
	m := openTest(t, Options{Now: clk.Now})
	m.SetSettings(kept(Settings{TTL: map[string]TTL{"code-kg.*": {D: time.Minute}}}))
	c := &child{}
	do(t, m, "", readTool, `{}`, c)
	clk.Advance(59 * time.Second)
	if st := status(t, do(t, m, "", readTool, `{}`, c)); st != StatusHit {
		t.Fatalf("before expiry: %q", st)
	}
	clk.Advance(time.Second)
	res := do(t, m, "", readTool, `{}`, c)
	if st := status(t, res); st != StatusMiss || c.calls.Load() != 2 {
		t.Fatalf("after expiry: %q, calls %d", st, c.calls.Load())
	}
	// The refetched answer replaced the expired one.
	clk.Advance(time.Second)
	if res2 := do(t, m, "", readTool, `{}`, c); status(t, res2) != StatusHit || text(res2) != text(res) {
		t.Fatalf("refetched entry not served: %q %q", status(t, res2), text(res2))
	}
	// A shortened TTL applies to stored entries at once.
	m.SetSettings(kept(Settings{TTL: map[string]TTL{"code-kg.*": {D: 500 * time.Millisecond}}}))
	if st := status(t, do(t, m, "", readTool, `{}`, c)); st != StatusMiss {
		t.Fatalf("after shortening ttl: %q", st)
	}
	// Default TTL: five minutes.
	m.SetSettings(kept(Settings{}))
	do(t, m, "", otherTool, `{}`, c)
	clk.Advance(testTTL - time.Millisecond)
	if st := status(t, do(t, m, "", otherTool, `{}`, c)); st != StatusHit {
		t.Fatalf("within default ttl: %q", st)
	}
	clk.Advance(time.Millisecond)
	if st := status(t, do(t, m, "", otherTool, `{}`, c)); st != StatusMiss {
		t.Fatalf("after default ttl: %q", st)
	}
	// never: no expiry.
	m.SetSettings(kept(Settings{TTL: map[string]TTL{"*": {Never: true}}}))
	do(t, m, "", otherTool, `{"x":1}`, c)
	clk.Advance(1000 * 24 * time.Hour)
	if st := status(t, do(t, m, "", otherTool, `{"x":1}`, c)); st != StatusHit {
		t.Fatalf("never ttl: %q", st)
	}
}

func TestErrorsNotStored(t *testing.T) {
	m := openTest(t, Options{})
	var calls atomic.Int64
	errDown := errors.New("transport down")
	failing := plain(func(context.Context) (json.RawMessage, error) {
		calls.Add(1)
		return nil, errDown
	})
	counted := func(raw json.RawMessage) Forward {
		return plain(func(context.Context) (json.RawMessage, error) {
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
		res, err := m.Call(ctx, "", readTool, json.RawMessage(`{"e":1}`), counted(errorResult("boom")))
		if err != nil || !isError(t, res) || status(t, res) != StatusMiss {
			t.Fatalf("isError: %v %s", err, res)
		}
		if _, err := m.Call(ctx, "", readTool, json.RawMessage(`{"e":2}`), failing); err != errDown {
			t.Fatalf("error not passed through: %v", err)
		}
		for i, raw := range incomplete {
			args := json.RawMessage(fmt.Sprintf(`{"e":3,"i":%d}`, i))
			if res, err := m.Call(ctx, "", readTool, args, counted(json.RawMessage(raw))); err != nil || status(t, res) != StatusMiss {
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
		m.Call(ctx, "", readTool, args, counted(json.RawMessage(raw)))
		if res, _ := m.Call(ctx, "", readTool, args, counted(json.RawMessage(raw))); status(t, res) != StatusHit {
			t.Fatalf("complete %s not stored: %s", raw, res)
		}
	}
}

func TestOversizeNotStored(t *testing.T) {
	m := openTest(t, Options{MaxResultBytes: 1000})
	c := &child{text: func(args json.RawMessage) string {
		if strings.Contains(string(args), "big") {
			return strings.Repeat("x", 2000)
		}
		return "small"
	}}
	do(t, m, "", readTool, `{"size":"big"}`, c)
	if st := status(t, do(t, m, "", readTool, `{"size":"big"}`, c)); st != StatusMiss {
		t.Fatalf("oversize result served from memory: %q", st)
	}
	do(t, m, "", readTool, `{"size":"small"}`, c)
	if st := status(t, do(t, m, "", readTool, `{"size":"small"}`, c)); st != StatusHit {
		t.Fatalf("small result: %q", st)
	}
}

func TestMutatingCallInvalidates(t *testing.T) {
	m := openTest(t, Options{})
	c := &child{}
	fill := func() {
		for _, tl := range []Tool{readTool, readTool2, otherTool} {
			do(t, m, "", tl, `{}`, c)
		}
	}
	statuses := func() string {
		var s []string
		for _, tl := range []Tool{readTool, readTool2, otherTool} {
			s = append(s, status(t, do(t, m, "", tl, `{}`, c)))
		}
		return strings.Join(s, ",")
	}

	// Default: the whole server.
	fill()
	if st := status(t, do(t, m, "", writeTool, `{"force":true}`, c)); st != StatusBypass {
		t.Fatalf("mutating call status %q", st)
	}
	if got := statuses(); got != "miss,miss,hit" {
		t.Fatalf("after whole-server invalidation: %s", got)
	}

	// Narrowed by config.
	m.SetSettings(kept(Settings{Invalidate: map[string][]string{writeTool.Name: {readTool.Name}}}))
	do(t, m, "", writeTool, `{}`, c)
	if got := statuses(); got != "miss,hit,hit" {
		t.Fatalf("after narrowed invalidation: %s", got)
	}
	m.SetSettings(kept(Settings{Invalidate: map[string][]string{writeTool.Name: {"doc-kg.*"}}}))
	do(t, m, "", writeTool, `{}`, c)
	if got := statuses(); got != "hit,hit,miss" {
		t.Fatalf("after cross-server invalidation: %s", got)
	}

	// A call the child reports as failed changes nothing.
	m.SetSettings(kept(Settings{}))
	_, err := m.Call(context.Background(), "", writeTool, nil, plain(func(context.Context) (json.RawMessage, error) {
		return errorResult("denied"), nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := statuses(); got != "hit,hit,hit" {
		t.Fatalf("after failed mutating call: %s", got)
	}

	// A read-only tool forced to never is not a mutation.
	m.SetSettings(kept(Settings{Cache: map[string]Mode{otherTool.Name: Never}}))
	if st := status(t, do(t, m, "", otherTool, `{}`, c)); st != StatusBypass {
		t.Fatalf("never: %q", st)
	}
	m.SetSettings(kept(Settings{}))
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
		m.Call(context.Background(), "", readTool, nil, plain(func(context.Context) (json.RawMessage, error) {
			close(entered)
			<-release
			return textResult("before the write"), nil
		}))
	}()
	<-entered
	c := &child{}
	do(t, m, "", writeTool, `{}`, c)
	close(release)
	<-done
	if st := status(t, do(t, m, "", readTool, `{}`, c)); st != StatusMiss {
		t.Fatalf("pre-invalidation result served: %q", st)
	}
}

func TestAgentScoped(t *testing.T) {
	m := openTest(t, Options{})
	c := &child{}
	do(t, m, "alice", readTool, `{}`, c)
	if st := status(t, do(t, m, "bob", readTool, `{}`, c)); st != StatusHit {
		t.Fatalf("shared scope: bob got %q", st)
	}
	m.SetSettings(kept(Settings{AgentScoped: map[string]bool{"code-kg": true}}))
	do(t, m, "alice", readTool, `{"q":1}`, c)
	if st := status(t, do(t, m, "bob", readTool, `{"q":1}`, c)); st != StatusMiss {
		t.Fatalf("agent scope: bob got alice's answer (%q)", st)
	}
	if st := status(t, do(t, m, "alice", readTool, `{"q":1}`, c)); st != StatusHit {
		t.Fatalf("agent scope: alice %q", st)
	}
	if st := status(t, do(t, m, "bob", otherTool, `{}`, c)); st != StatusMiss {
		t.Fatalf("other server: %q", st)
	}
	if st := status(t, do(t, m, "alice", otherTool, `{}`, c)); st != StatusHit {
		t.Fatalf("other server stays shared: %q", st)
	}
}

func TestSingleFlight(t *testing.T) {
	m := openTest(t, Options{})
	const n = 16
	var calls atomic.Int64
	entered := make(chan struct{})
	release := make(chan struct{})
	forward := plain(func(context.Context) (json.RawMessage, error) {
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
			results[i], errs[i] = m.Call(context.Background(), "", readTool, json.RawMessage(`{"k":"v"}`), forward)
		})
	}
	start(0)
	<-entered
	for i := 1; i < n; i++ {
		start(i)
	}
	for deadline := time.Now().Add(10 * time.Second); m.flights.followers() < n-1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d followers joined the flight", m.flights.followers(), n-1)
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
		if text(results[i]) != "shared" || metaMember(t, results[i], "child/trace") != `"t1"` {
			t.Fatalf("call %d got %s", i, results[i])
		}
		counts[status(t, results[i])]++
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
	forward := plain(func(ctx context.Context) (json.RawMessage, error) {
		if calls.Add(1) == 1 {
			close(leaderIn)
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return textResult("from the follower's retry"), nil
	})
	leaderCtx, cancel := context.WithCancel(context.Background())
	leaderErr := make(chan error, 1)
	go func() {
		_, err := m.Call(leaderCtx, "", readTool, json.RawMessage(`{}`), forward)
		leaderErr <- err
	}()
	<-leaderIn
	type out struct {
		res json.RawMessage
		err error
	}
	follower := make(chan out, 1)
	go func() {
		res, err := m.Call(context.Background(), "", readTool, json.RawMessage(`{}`), forward)
		follower <- out{res, err}
	}()
	waitFor(t, "the follower to join", func() bool { return m.flights.followers() == 1 })
	cancel()
	if err := <-leaderErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("leader: %v", err)
	}
	got := <-follower
	if got.err != nil || text(got.res) != "from the follower's retry" {
		t.Fatalf("follower: %v %q", got.err, text(got.res))
	}
	if calls.Load() != 2 {
		t.Fatalf("forward called %d times, want 2", calls.Load())
	}
	// A follower whose own context ends stops waiting.
	block, leading := make(chan struct{}), make(chan struct{})
	defer close(block)
	go m.Call(context.Background(), "", readTool, json.RawMessage(`{"x":1}`), plain(func(context.Context) (json.RawMessage, error) {
		close(leading)
		<-block
		return textResult("late"), nil
	}))
	<-leading
	ctx, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if _, err := m.Call(ctx, "", readTool, json.RawMessage(`{"x":1}`), forward); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting follower: %v", err)
	}
}

func TestRedact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	m := openTest(t, Options{Path: path, Redact: func(b []byte) []byte {
		return []byte(strings.ReplaceAll(string(b), "hunter2", "[redacted]"))
	}})
	c := &child{text: func(json.RawMessage) string { return "password is hunter2" }}
	if got := text(do(t, m, "", readTool, `{"token":"hunter2"}`, c)); got != "password is hunter2" {
		t.Fatalf("miss: %q", got)
	}
	if got := text(do(t, m, "", readTool, `{"token":"hunter2"}`, c)); got != "password is [redacted]" {
		t.Fatalf("hit: %q", got)
	}
	// Other secret, other key: redaction does not merge keys.
	if st := status(t, do(t, m, "", readTool, `{"token":"hunter3"}`, c)); st != StatusMiss {
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
	c := &child{}
	res, err := m.Call(context.Background(), "", readTool, nil, c.forward(nil))
	if err != nil || string(res) != string(textResult("answer 1 to ")) {
		t.Fatalf("nil memory: %v %s", err, res)
	}
	// Not even a result memory would have to splice into is touched.
	for _, raw := range []string{`{"_meta":{"a":1},  "content":[]}`, `[1]`, `not json`} {
		res, err := m.Call(context.Background(), "", readTool, nil, answer(raw))
		if err != nil || string(res) != raw {
			t.Fatalf("nil memory changed %s to %s (%v)", raw, res, err)
		}
	}
	if err := m.MarkStale(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	m.SetSettings(kept(Settings{}))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	mm := openTest(t, Options{})
	unannotated := Tool{Name: "x.y", Server: "x"}
	for range 2 {
		if st := status(t, do(t, mm, "", unannotated, `{}`, c)); st != StatusBypass {
			t.Fatalf("unannotated: %q", st)
		}
	}
	// Arguments that are not JSON are forwarded for the child to reject.
	if st := status(t, do(t, mm, "", readTool, `{bad`, c)); st != StatusBypass {
		t.Fatalf("bad args: %q", st)
	}
}

func TestInvalidateServerAndClear(t *testing.T) {
	m := openTest(t, Options{})
	c := &child{}
	ctx := context.Background()
	for i := range 3 {
		do(t, m, "", readTool, fmt.Sprintf(`{"i":%d}`, i), c)
		do(t, m, "", otherTool, fmt.Sprintf(`{"i":%d}`, i), c)
	}
	if err := m.MarkStale(ctx, "code-kg"); err != nil {
		t.Fatal(err)
	}
	if st := status(t, do(t, m, "", readTool, `{"i":0}`, c)); st != StatusMiss {
		t.Fatalf("after MarkStale: %q", st)
	}
	if st := status(t, do(t, m, "", otherTool, `{"i":0}`, c)); st != StatusHit {
		t.Fatalf("other server after MarkStale: %q", st)
	}
	if st := status(t, do(t, m, "", readTool, `{"i":1}`, c)); st != StatusMiss {
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
	clk := newClock()
	m := openTest(t, Options{Now: clk.Now})
	m.SetSettings(kept(Settings{TTL: map[string]TTL{"doc-kg.*": {Never: true}}}))
	c := &child{}
	do(t, m, "", readTool, `{"b":1,"a":"x"}`, c)
	clk.Advance(time.Second)
	do(t, m, "", otherTool, `{}`, c)
	clk.Advance(time.Second)
	do(t, m, "", readTool, `{"a":"x","b":1}`, c) // hit: most recently used
	list, err := m.List(context.Background(), 10)
	if err != nil || len(list) != 2 {
		t.Fatalf("List: %v %v", list, err)
	}
	e := list[0]
	if e.Tool != readTool.Name || string(e.Args) != `{"a":"x","b":1}` || e.Hits != 1 || e.ExpiresAt == nil ||
		e.ExpiresAt.Sub(e.CreatedAt) != testTTL || len(e.Fingerprint) != 64 {
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
	c := &child{}
	do(t, m, "", readTool, `{}`, c)
	if st := status(t, do(t, m, "", ensure, `{"l":"bug"}`, c)); st != StatusBypass {
		t.Fatalf("first idempotent call: %q", st)
	}
	if st := status(t, do(t, m, "", readTool, `{}`, c)); st != StatusMiss {
		t.Fatalf("read after idempotent write: %q", st)
	}
	before := c.calls.Load()
	if st := status(t, do(t, m, "", ensure, `{"l":"bug"}`, c)); st != StatusBypass || c.calls.Load() != before+1 {
		t.Fatalf("repeated idempotent call: %q, child calls %d -> %d", st, before, c.calls.Load())
	}
	if st := status(t, do(t, m, "", readTool, `{}`, c)); st != StatusMiss {
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
	c := &child{}
	args := []string{
		`{"query":"\ud800 id"}`, `{"query":"\ufffd id"}`, `{"query":"\udc00 id"}`,
		"{\"query\":\"\xff id\"}", "{\"query\":\"\xed\xa0\x80 id\"}",
	}
	for _, a := range args {
		if got := status(t, do(t, m, "", tool, a, c)); got != StatusMiss {
			t.Errorf("%q: status %s, want miss", a, got)
		}
	}
	if n := c.calls.Load(); n != int64(len(args)) {
		t.Errorf("child called %d times, want %d", n, len(args))
	}
	for _, a := range args {
		if got := status(t, do(t, m, "", tool, a, c)); got != StatusHit {
			t.Errorf("%q again: status %s, want hit", a, got)
		}
	}
}

// plain adapts a forward that answers like a child that always answered: the
// shape most tests need.
func plain(f func(context.Context) (json.RawMessage, error)) Forward {
	return func(ctx context.Context) (Answer, error) {
		raw, err := f(ctx)
		return Answer{Result: raw}, err
	}
}
