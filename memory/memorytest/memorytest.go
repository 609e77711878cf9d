// Package memorytest is what the tests of memory and of its stores share:
// the store contract suite (RunStoreContract), which every memory.Store
// runs from its own package, and the fakes and helpers the suite is
// written with (a child server that counts calls, a clock, tools). The
// tools are functions, so that no test can change another's.
package memorytest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/memory"
)

// Clock is an injectable Options.Now, starting at a fixed time.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at 2026-01-02 03:04:05 UTC.
func NewClock() *Clock { return &Clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Logger sends memory's logs to t.Log.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// KeepFor is what most tests keep answers for: results are kept only for a
// TTL someone gave (see memory's TestNoTTLNoMemory).
const KeepFor = 5 * time.Minute

// Kept is s with KeepFor for every tool s gives no TTL.
func Kept(s memory.Settings) memory.Settings {
	if _, ok := s.TTL["*"]; !ok {
		s.TTL = maps.Clone(s.TTL)
		if s.TTL == nil {
			s.TTL = map[string]memory.TTL{}
		}
		s.TTL["*"] = memory.TTL{D: KeepFor}
	}
	return s
}

// Child is a fake child server that counts calls.
type Child struct {
	Calls atomic.Int64
	Text  func(args json.RawMessage) string
}

// Forward answers args: "answer N to ARGS" by default.
func (c *Child) Forward(args json.RawMessage) memory.Forward {
	return Plain(func(context.Context) (json.RawMessage, error) {
		n := c.Calls.Add(1)
		text := fmt.Sprintf("answer %d to %s", n, args)
		if c.Text != nil {
			text = c.Text(args)
		}
		return TextResult(text), nil
	})
}

// TextResult is the raw CallToolResult a child sends for one text item.
func TextResult(text string) json.RawMessage {
	b, err := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}})
	if err != nil {
		panic(err)
	}
	return b
}

// ErrorResult is the raw CallToolResult of a call the child reports failed.
func ErrorResult(text string) json.RawMessage {
	b, err := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}, "isError": true})
	if err != nil {
		panic(err)
	}
	return b
}

// Answers returns a forward func that always answers raw.
func Answers(raw string) memory.Forward {
	return Plain(func(context.Context) (json.RawMessage, error) { return json.RawMessage(raw), nil })
}

// ReadTool is a read-only tool without free text.
func ReadTool() memory.Tool {
	return memory.Tool{Name: "code-kg.kg_latest_graph", Server: "code-kg", Annotated: true, ReadOnly: true}
}

// ReadTool2 is another read-only tool of ReadTool's server.
func ReadTool2() memory.Tool {
	return memory.Tool{Name: "code-kg.kg_graph_summary", Server: "code-kg", Annotated: true, ReadOnly: true}
}

// OtherTool is a read-only tool of another server.
func OtherTool() memory.Tool {
	return memory.Tool{Name: "doc-kg.search", Server: "doc-kg", Annotated: true, ReadOnly: true}
}

// WriteTool is a tool of ReadTool's server that is not read-only: calls of
// it invalidate the server's entries.
func WriteTool() memory.Tool {
	return memory.Tool{Name: "code-kg.kg_regenerate", Server: "code-kg", Annotated: true}
}

// Do calls tool with args on m, answered by c.
func Do(t testing.TB, m *memory.Memory, agent string, tool memory.Tool, args string, c *Child) json.RawMessage {
	t.Helper()
	res, err := m.Call(context.Background(), agent, tool, json.RawMessage(args), c.Forward(json.RawMessage(args)))
	if err != nil {
		t.Fatalf("Call(%s, %s): %v", tool.Name, args, err)
	}
	return res
}

// Status is the cache status memory reported on res.
func Status(t testing.TB, res json.RawMessage) string {
	t.Helper()
	s, _, ok := memory.CacheStatus(res)
	if !ok {
		t.Fatalf("result has no %s: %s", memory.MetaKey, res)
	}
	return s
}

// Text returns the text of the first content item of res.
func Text(res json.RawMessage) string {
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

// IsError reports the isError member of res.
func IsError(t testing.TB, res json.RawMessage) bool {
	t.Helper()
	var r struct {
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		t.Fatalf("result %s: %v", res, err)
	}
	return r.IsError
}

// WantStatus fails t unless memory reported want on res.
func WantStatus(t *testing.T, what string, res json.RawMessage, want string) {
	t.Helper()
	if got := Status(t, res); got != want {
		t.Fatalf("%s: status %q, want %q", what, got, want)
	}
}

// WaitFor polls cond until it holds, failing t after 10 seconds.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// SearchSchema is the input schema of SearchTool: query is its free text.
func SearchSchema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{
	"query":{"type":"string","maxLength":500},
	"limit":{"type":"integer"},
	"source_app":{"type":"string","enum":["notes","manual"]}},"required":["query"]}`)
}

// SearchTool is a read-only search tool with free text, for similarity hits.
func SearchTool() memory.Tool {
	return memory.Tool{Name: "doc-kg.doc_kg_search", Server: "doc-kg", Annotated: true, ReadOnly: true, InputSchema: SearchSchema()}
}

// SemanticReport decodes the semantic cache report of res.
func SemanticReport(t testing.TB, res json.RawMessage) (status string, sim float64, matched string) {
	t.Helper()
	var r struct {
		Meta map[string]struct {
			Status     string  `json:"status"`
			Similarity float64 `json:"similarity"`
			Matched    string  `json:"matched"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		t.Fatalf("result %s: %v", res, err)
	}
	c := r.Meta[memory.MetaKey]
	return c.Status, c.Similarity, c.Matched
}

// SearchArgs is the arguments of a SearchTool call.
func SearchArgs(query string, limit int) string {
	b, _ := json.Marshal(map[string]any{"query": query, "limit": limit})
	return string(b)
}

// Plain adapts a forward that answers like a child that always answered: the
// shape most tests need.
func Plain(f func(context.Context) (json.RawMessage, error)) memory.Forward {
	return func(ctx context.Context) (memory.Answer, error) {
		raw, err := f(ctx)
		return memory.Answer{Result: raw}, err
	}
}

// OpenMemory opens a Memory on opts.Backend that logs to t and keeps
// answers for KeepFor, failing t if it cannot or steps aside; t's cleanup
// closes it.
func OpenMemory(t testing.TB, opts memory.Options) *memory.Memory {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = Logger(t)
	}
	m, err := memory.Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := m.Err(); err != nil {
		t.Fatalf("Open: memory disabled: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	m.SetSettings(Kept(memory.Settings{}))
	return m
}

// DoVerified is Do through a Query, whose answer from memory (if it was
// one) is then offered to verification with c's forward.
func DoVerified(t testing.TB, m *memory.Memory, agent string, tool memory.Tool, args string, c *Child) json.RawMessage {
	t.Helper()
	ctx := context.Background()
	q := m.Query(agent, tool, json.RawMessage(args))
	res, ok := q.Hit(ctx)
	if !ok {
		var err error
		if res, err = q.Call(ctx, c.Forward(json.RawMessage(args))); err != nil {
			t.Fatalf("Call(%s, %s): %v", tool.Name, args, err)
		}
	}
	q.VerifyLater(ctx, c.Forward(json.RawMessage(args)))
	return res
}
