package memory_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/nexus-mcp/nexus/memory"
	. "github.com/nexus-mcp/nexus/memory/memorytest"
)

// metaMember returns the compacted bytes of _meta[key] in raw, or "".
func metaMember(t testing.TB, raw json.RawMessage, key string) string {
	t.Helper()
	return Members(t, json.RawMessage(Members(t, raw)["_meta"]))[key]
}

// storedResults returns every result blob in m's database.
func storedResults(t testing.TB, m *Memory) []string {
	t.Helper()
	rows, err := sqlDB(t, m).Query(`SELECT result FROM entries ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestResultRoundTrip(t *testing.T) {
	clk := NewClock()
	m := openTest(t, Options{Now: clk.Now})
	// Every content type, structuredContent, the child's _meta and a member
	// MCP does not define yet; numbers and escapes as no encoder writes them.
	child := json.RawMessage(`{
		"content": [
			{"type": "text", "text": "hello \u2028 <world> & \"quotes\" caf\u00e9 ` + "\u2029" + `",
			 "annotations": {"audience": ["user"], "priority": 0.50}},
			{"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
			{"type": "audio", "data": "aGVsbG8=", "mimeType": "audio/wav"},
			{"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt", "mimeType": "text/plain"},
			{"type": "resource", "resource": {"uri": "file:///b.txt", "mimeType": "text/plain", "text": "bee"}},
			{"type": "resource", "resource": {"uri": "file:///c.bin", "mimeType": "application/octet-stream", "blob": "AAEC"}}
		],
		"structuredContent": {"nodes": [{"id": "a", "n": 1.50}], "ok": true, "big": 12345678901234567890, "e": 1E+2},
		"_meta": {"child/trace": "abc", "progressToken": 7},
		"x-future": {"anything": [1, 2, 3]}
	}`)
	ctx := context.Background()
	miss, err := m.Call(ctx, "", ReadTool(), nil, Answers(string(child)))
	if err != nil || Status(t, miss) != StatusMiss {
		t.Fatalf("miss: %v %s", err, miss)
	}
	clk.Advance(2 * time.Second)
	hit, err := m.Call(ctx, "", ReadTool(), nil, Answers(`{"content":[]}`))
	if err != nil || Status(t, hit) != StatusHit {
		t.Fatalf("hit: %v %s", err, hit)
	}
	SameExceptReport(t, "miss", miss, child)
	SameExceptReport(t, "hit", hit, child)
	if got := metaMember(t, miss, MetaKey); got != `{"status":"miss"}` {
		t.Errorf("miss report %s", got)
	}
	if got := metaMember(t, hit, MetaKey); got != `{"status":"hit","age_ms":2000}` {
		t.Errorf("hit report %s", got)
	}
	// What is stored is the child's bytes, not even reformatted.
	if got := storedResults(t, m); len(got) != 1 || got[0] != string(child) {
		t.Fatalf("stored %q, want the child's bytes", got)
	}
	// The results are single-line JSON (stdio framing).
	for _, r := range []json.RawMessage{miss, hit} {
		if !json.Valid(r) || bytes.ContainsAny(r, "\r\n") {
			t.Fatalf("result is not compact JSON: %s", r)
		}
	}
}

func TestUnknownContentType(t *testing.T) {
	m := openTest(t, Options{})
	const hologram = `{"content":[{"type":"hologram","data":"x"}]}`
	ctx := context.Background()
	miss, err := m.Call(ctx, "", ReadTool(), nil, Answers(hologram))
	if err != nil || Status(t, miss) != StatusMiss {
		t.Fatalf("miss: %v %s", err, miss)
	}
	hit, err := m.Call(ctx, "", ReadTool(), nil, Answers(`{"content":[]}`))
	if err != nil || Status(t, hit) != StatusHit {
		t.Fatalf("unknown content type not cached: %v %s", err, hit)
	}
	for _, r := range []json.RawMessage{miss, hit} {
		if got := Members(t, r)["content"]; got != `[{"type":"hologram","data":"x"}]` {
			t.Fatalf("content %s", got)
		}
	}
	if got := storedResults(t, m); len(got) != 1 || got[0] != hologram {
		t.Fatalf("stored %q", got)
	}
	// Passed through on a bypass too.
	res, err := m.Call(ctx, "", Tool{Name: "x.y", Server: "x"}, nil, Answers(hologram))
	if err != nil || Status(t, res) != StatusBypass || Members(t, res)["content"] != `[{"type":"hologram","data":"x"}]` {
		t.Fatalf("bypass: %v %s", err, res)
	}
}

func TestChildMetaKept(t *testing.T) {
	m := openTest(t, Options{})
	const child = `{"content":[{"type":"text","text":"t"}],"_meta":{"child/trace":"abc","progressToken":"p-1","nested":{"a":[1, 2]}}}`
	want := map[string]string{"child/trace": `"abc"`, "progressToken": `"p-1"`, "nested": `{"a":[1,2]}`}
	check := func(what string, res json.RawMessage, wantStatus string) {
		t.Helper()
		if st := Status(t, res); st != wantStatus {
			t.Fatalf("%s: status %q, want %q", what, st, wantStatus)
		}
		for k, v := range want {
			if got := metaMember(t, res, k); got != v {
				t.Errorf("%s: _meta[%q] = %s, want %s", what, k, got, v)
			}
		}
	}
	ctx := context.Background()
	res, _ := m.Call(ctx, "", ReadTool(), nil, Answers(child))
	check("miss", res, StatusMiss)
	res, _ = m.Call(ctx, "", ReadTool(), nil, Answers(child))
	check("hit", res, StatusHit)
	res, _ = m.Call(ctx, "", Tool{Name: "x.y", Server: "x"}, nil, Answers(child))
	check("bypass", res, StatusBypass)
}

func TestStoredEntryHasNoReport(t *testing.T) {
	clk := NewClock()
	m := openTest(t, Options{Now: clk.Now})
	ctx := context.Background()
	// A child that is itself a Nexus gateway reports its own cache, in
	// either spelling of the key.
	for i, child := range []string{
		`{"content":[{"type":"text","text":"t"}],"_meta":{"nexus/cache":{"status":"hit","age_ms":99999},"k":"v"}}`,
		`{"content":[{"type":"text","text":"t"}],"_meta":{"nexus\/cache":{"status":"hit","age_ms":99999},"k":"v"}}`,
	} {
		args := json.RawMessage(`{"i":` + string(rune('0'+i)) + `}`)
		miss, err := m.Call(ctx, "", ReadTool(), args, Answers(child))
		if err != nil {
			t.Fatal(err)
		}
		if got := metaMember(t, miss, MetaKey); got != `{"status":"miss"}` {
			t.Fatalf("miss: child's report not replaced: %s", miss)
		}
		if metaMember(t, miss, "k") != `"v"` {
			t.Fatalf("miss: child's _meta lost: %s", miss)
		}
		clk.Advance(time.Second)
		hit, _ := m.Call(ctx, "", ReadTool(), args, Answers(`{}`))
		if got := metaMember(t, hit, MetaKey); got != `{"status":"hit","age_ms":1000}` || metaMember(t, hit, "k") != `"v"` {
			t.Fatalf("hit: %s", hit)
		}
	}
	// Ordinary results are stored as they came, with no report.
	Do(t, m, "", ReadTool(), `{"plain":true}`, &Child{})
	stored := storedResults(t, m)
	if len(stored) != 3 {
		t.Fatalf("%d entries stored, want 3", len(stored))
	}
	for _, s := range stored {
		if strings.Contains(s, "nexus/cache") || strings.Contains(s, `nexus\/cache`) {
			t.Fatalf("stored entry carries a cache report: %s", s)
		}
	}
	// A report in a stored entry (written by anything else) is replaced.
	if _, err := sqlDB(t, m).Exec(`UPDATE entries SET result = ?`,
		`{"content":[],"_meta":{"nexus/cache":{"status":"bypass"},"k":"v"}}`); err != nil {
		t.Fatal(err)
	}
	hit := Do(t, m, "", ReadTool(), `{"plain":true}`, &Child{})
	if got := metaMember(t, hit, MetaKey); got != `{"status":"hit","age_ms":0}` || metaMember(t, hit, "k") != `"v"` {
		t.Fatalf("stored report not replaced: %s", hit)
	}
}

func TestNonObjectResults(t *testing.T) {
	m := openTest(t, Options{})
	ctx := context.Background()
	for _, raw := range []string{`[1,2]`, `"text"`, `null`, `42`, `{"content":[`, `{"_meta":"x","content":[]}`, `{"_meta":[1]}`} {
		var calls int
		forward := Plain(func(context.Context) (json.RawMessage, error) {
			calls++
			return json.RawMessage(raw), nil
		})
		for _, tool := range []Tool{ReadTool(), ReadTool(), {Name: "x.y", Server: "x"}} {
			res, err := m.Call(ctx, "", tool, json.RawMessage(`{"r":`+jsonString(raw)+`}`), forward)
			if err != nil || string(res) != raw {
				t.Fatalf("%s (%s): got %s, %v; want it unchanged", raw, tool.Name, res, err)
			}
		}
		if calls != 3 {
			t.Fatalf("%s: forwarded %d times, want 3 (never stored)", raw, calls)
		}
	}
	if got := storedResults(t, m); len(got) != 0 {
		t.Fatalf("stored %q", got)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// rpcError stands for the gateway's JSON-RPC error type.
type rpcError struct{ code int }

func (e *rpcError) Error() string { return "rpc error" }

func TestForwardErrorUnchanged(t *testing.T) {
	m := openTest(t, Options{})
	ctx := context.Background()
	want := &rpcError{code: -32001}
	failing := Plain(func(context.Context) (json.RawMessage, error) { return nil, want })
	check := func(what string, res json.RawMessage, err error) {
		t.Helper()
		var re *rpcError
		if err != want || !errors.As(err, &re) || re.code != -32001 || res != nil {
			t.Fatalf("%s: got %s, %v; want the child's error value", what, res, err)
		}
	}
	for _, tool := range []Tool{ReadTool(), WriteTool(), {Name: "x.y", Server: "x"}} {
		res, err := m.Call(ctx, "", tool, nil, failing)
		check(tool.Name, res, err)
	}
	var off *Memory
	res, err := off.Call(ctx, "", ReadTool(), nil, failing)
	check("nil memory", res, err)

	// Followers of a failed identical call get the same value.
	entered, release := make(chan struct{}), make(chan struct{})
	leader := Plain(func(context.Context) (json.RawMessage, error) {
		close(entered)
		<-release
		return nil, want
	})
	var wg sync.WaitGroup
	errs := make([]error, 4)
	wg.Go(func() { _, errs[0] = m.Call(ctx, "", ReadTool(), json.RawMessage(`{"f":1}`), leader) })
	<-entered
	for i := 1; i < len(errs); i++ {
		wg.Go(func() { _, errs[i] = m.Call(ctx, "", ReadTool(), json.RawMessage(`{"f":1}`), failing) })
	}
	WaitFor(t, "the followers to join", func() bool { return localWaiting(m) == len(errs)-1 })
	close(release)
	wg.Wait()
	for i, err := range errs {
		check("follower "+string(rune('0'+i)), nil, err)
	}
}
