package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// members returns the compacted value bytes of each member of the JSON
// object raw; nil for an empty raw.
func members(t testing.TB, raw json.RawMessage) map[string]string {
	t.Helper()
	if len(raw) == 0 {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("not a JSON object: %v: %s", err, raw)
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		var b bytes.Buffer
		if err := json.Compact(&b, v); err != nil {
			t.Fatal(err)
		}
		out[k] = b.String()
	}
	return out
}

// metaMember returns the compacted bytes of _meta[key] in raw, or "".
func metaMember(t testing.TB, raw json.RawMessage, key string) string {
	t.Helper()
	return members(t, json.RawMessage(members(t, raw)["_meta"]))[key]
}

// storedResults returns every result blob in m's database.
func storedResults(t testing.TB, m *Memory) []string {
	t.Helper()
	rows, err := sq(m).db.Query(`SELECT result FROM entries ORDER BY id`)
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

// sameExceptReport fails unless got has every member of want with the same
// value bytes (compacted), and nothing else but _meta[MetaKey].
func sameExceptReport(t testing.TB, what string, got, want json.RawMessage) {
	t.Helper()
	g, w := members(t, got), members(t, want)
	gm, wm := members(t, json.RawMessage(g["_meta"])), members(t, json.RawMessage(w["_meta"]))
	delete(g, "_meta")
	delete(w, "_meta")
	delete(gm, MetaKey)
	for k, v := range w {
		if g[k] != v {
			t.Errorf("%s: member %q = %s, want %s", what, k, g[k], v)
		}
	}
	for k, v := range wm {
		if gm[k] != v {
			t.Errorf("%s: _meta member %q = %s, want %s", what, k, gm[k], v)
		}
	}
	if len(g) != len(w) || len(gm) != len(wm) {
		t.Errorf("%s: extra members:\ngot  %s\nwant %s", what, got, want)
	}
}

func TestResultRoundTrip(t *testing.T) {
	clk := newClock()
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
	miss, err := m.Call(ctx, "", readTool, nil, answer(string(child)))
	if err != nil || status(t, miss) != StatusMiss {
		t.Fatalf("miss: %v %s", err, miss)
	}
	clk.Advance(2 * time.Second)
	hit, err := m.Call(ctx, "", readTool, nil, answer(`{"content":[]}`))
	if err != nil || status(t, hit) != StatusHit {
		t.Fatalf("hit: %v %s", err, hit)
	}
	sameExceptReport(t, "miss", miss, child)
	sameExceptReport(t, "hit", hit, child)
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
	miss, err := m.Call(ctx, "", readTool, nil, answer(hologram))
	if err != nil || status(t, miss) != StatusMiss {
		t.Fatalf("miss: %v %s", err, miss)
	}
	hit, err := m.Call(ctx, "", readTool, nil, answer(`{"content":[]}`))
	if err != nil || status(t, hit) != StatusHit {
		t.Fatalf("unknown content type not cached: %v %s", err, hit)
	}
	for _, r := range []json.RawMessage{miss, hit} {
		if got := members(t, r)["content"]; got != `[{"type":"hologram","data":"x"}]` {
			t.Fatalf("content %s", got)
		}
	}
	if got := storedResults(t, m); len(got) != 1 || got[0] != hologram {
		t.Fatalf("stored %q", got)
	}
	// Passed through on a bypass too.
	res, err := m.Call(ctx, "", Tool{Name: "x.y", Server: "x"}, nil, answer(hologram))
	if err != nil || status(t, res) != StatusBypass || members(t, res)["content"] != `[{"type":"hologram","data":"x"}]` {
		t.Fatalf("bypass: %v %s", err, res)
	}
}

func TestChildMetaKept(t *testing.T) {
	m := openTest(t, Options{})
	const child = `{"content":[{"type":"text","text":"t"}],"_meta":{"child/trace":"abc","progressToken":"p-1","nested":{"a":[1, 2]}}}`
	want := map[string]string{"child/trace": `"abc"`, "progressToken": `"p-1"`, "nested": `{"a":[1,2]}`}
	check := func(what string, res json.RawMessage, wantStatus string) {
		t.Helper()
		if st := status(t, res); st != wantStatus {
			t.Fatalf("%s: status %q, want %q", what, st, wantStatus)
		}
		for k, v := range want {
			if got := metaMember(t, res, k); got != v {
				t.Errorf("%s: _meta[%q] = %s, want %s", what, k, got, v)
			}
		}
	}
	ctx := context.Background()
	res, _ := m.Call(ctx, "", readTool, nil, answer(child))
	check("miss", res, StatusMiss)
	res, _ = m.Call(ctx, "", readTool, nil, answer(child))
	check("hit", res, StatusHit)
	res, _ = m.Call(ctx, "", Tool{Name: "x.y", Server: "x"}, nil, answer(child))
	check("bypass", res, StatusBypass)
}

func TestStoredEntryHasNoReport(t *testing.T) {
	clk := newClock()
	m := openTest(t, Options{Now: clk.Now})
	ctx := context.Background()
	// A child that is itself a Nexus gateway reports its own cache, in
	// either spelling of the key.
	for i, child := range []string{
		`{"content":[{"type":"text","text":"t"}],"_meta":{"nexus/cache":{"status":"hit","age_ms":99999},"k":"v"}}`,
		`{"content":[{"type":"text","text":"t"}],"_meta":{"nexus\/cache":{"status":"hit","age_ms":99999},"k":"v"}}`,
	} {
		args := json.RawMessage(`{"i":` + string(rune('0'+i)) + `}`)
		miss, err := m.Call(ctx, "", readTool, args, answer(child))
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
		hit, _ := m.Call(ctx, "", readTool, args, answer(`{}`))
		if got := metaMember(t, hit, MetaKey); got != `{"status":"hit","age_ms":1000}` || metaMember(t, hit, "k") != `"v"` {
			t.Fatalf("hit: %s", hit)
		}
	}
	// Ordinary results are stored as they came, with no report.
	do(t, m, "", readTool, `{"plain":true}`, &child{})
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
	if _, err := sq(m).db.Exec(`UPDATE entries SET result = ?`,
		`{"content":[],"_meta":{"nexus/cache":{"status":"bypass"},"k":"v"}}`); err != nil {
		t.Fatal(err)
	}
	hit := do(t, m, "", readTool, `{"plain":true}`, &child{})
	if got := metaMember(t, hit, MetaKey); got != `{"status":"hit","age_ms":0}` || metaMember(t, hit, "k") != `"v"` {
		t.Fatalf("stored report not replaced: %s", hit)
	}
}

func TestNonObjectResults(t *testing.T) {
	m := openTest(t, Options{})
	ctx := context.Background()
	for _, raw := range []string{`[1,2]`, `"text"`, `null`, `42`, `{"content":[`, `{"_meta":"x","content":[]}`, `{"_meta":[1]}`} {
		var calls int
		forward := plain(func(context.Context) (json.RawMessage, error) {
			calls++
			return json.RawMessage(raw), nil
		})
		for _, tool := range []Tool{readTool, readTool, {Name: "x.y", Server: "x"}} {
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
	failing := plain(func(context.Context) (json.RawMessage, error) { return nil, want })
	check := func(what string, res json.RawMessage, err error) {
		t.Helper()
		var re *rpcError
		if err != want || !errors.As(err, &re) || re.code != -32001 || res != nil {
			t.Fatalf("%s: got %s, %v; want the child's error value", what, res, err)
		}
	}
	for _, tool := range []Tool{readTool, writeTool, {Name: "x.y", Server: "x"}} {
		res, err := m.Call(ctx, "", tool, nil, failing)
		check(tool.Name, res, err)
	}
	var off *Memory
	res, err := off.Call(ctx, "", readTool, nil, failing)
	check("nil memory", res, err)

	// Followers of a failed identical call get the same value.
	entered, release := make(chan struct{}), make(chan struct{})
	leader := plain(func(context.Context) (json.RawMessage, error) {
		close(entered)
		<-release
		return nil, want
	})
	var wg sync.WaitGroup
	errs := make([]error, 4)
	wg.Go(func() { _, errs[0] = m.Call(ctx, "", readTool, json.RawMessage(`{"f":1}`), leader) })
	<-entered
	for i := 1; i < len(errs); i++ {
		wg.Go(func() { _, errs[i] = m.Call(ctx, "", readTool, json.RawMessage(`{"f":1}`), failing) })
	}
	waitFor(t, "the followers to join", func() bool { return m.flights.followers() == len(errs)-1 })
	close(release)
	wg.Wait()
	for i, err := range errs {
		check("follower "+string(rune('0'+i)), nil, err)
	}
}

func TestWithMeta(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{}`, `{"_meta":{"k":1}}`},
		{`{"a":1}`, `{"_meta":{"k":1},"a":1}`},
		{`{"_meta":null,"a":1}`, `{"_meta":{"k":1},"a":1}`},
		{`{"_meta":{},"a":1}`, `{"_meta":{"k":1},"a":1}`},
		{`{"_meta":{"z":true,"k":"old"},"a":1}`, `{"_meta":{"k":1,"z":true},"a":1}`},
		// Value bytes are kept, only compacted: no re-escaping, no number
		// reformatting, no HTML escaping.
		{" { \"a\" : [ 1 , 2 ] ,\n\t\"b\":\"<&> \\u2028 caf\\u00e9 \\/\" } ", `{"_meta":{"k":1},"a":[1,2],"b":"<&> \u2028 caf\u00e9 \/"}`},
		{"{\"b\":\"x\u2028y\"}", "{\"_meta\":{\"k\":1},\"b\":\"x\u2028y\"}"},
		{`{"n":1.50,"big":12345678901234567890,"e":1E+2,"neg":-0}`, `{"_meta":{"k":1},"big":12345678901234567890,"e":1E+2,"n":1.50,"neg":-0}`},
		{`{"content":[{"type":"hologram","data":"x"}],"_meta":{"p":{"q":[ ]}}}`, `{"_meta":{"k":1,"p":{"q":[]}},"content":[{"type":"hologram","data":"x"}]}`},
	} {
		in := []byte(tc.in)
		got, err := withMeta(in, "k", json.RawMessage(`1`))
		if err != nil || string(got) != tc.want {
			t.Errorf("withMeta(%s)\n got %s, %v\nwant %s", tc.in, got, err, tc.want)
		}
		if string(in) != tc.in {
			t.Errorf("withMeta modified its input: %s", in)
		}
	}
	// Values of any type are marshalled, without HTML escaping.
	if got, err := withMeta(json.RawMessage(`{}`), "k", map[string]any{"x": "<b>"}); err != nil || string(got) != `{"_meta":{"k":{"x":"<b>"}}}` {
		t.Errorf("map value: %s, %v", got, err)
	}
	// Anything else is returned unchanged, with an error.
	for _, in := range []string{``, ` `, `[]`, `null`, `"s"`, `1`, `{"a":`, `{"a":1}x`, `{"_meta":[]}`, `{"_meta":"s"}`, `{"_meta":{"a":}}`} {
		got, err := withMeta(json.RawMessage(in), "k", 1)
		if err == nil || string(got) != in {
			t.Errorf("withMeta(%q) = %s, %v; want it unchanged and an error", in, got, err)
		}
	}
	if _, err := withMeta(json.RawMessage(`[]`), "k", 1); !errors.Is(err, errNotObject) {
		t.Errorf("non-object error %v", err)
	}
	if got, err := withMeta(json.RawMessage(`{}`), "k", func() {}); err == nil || string(got) != `{}` {
		t.Errorf("unmarshallable value: %s, %v", got, err)
	}
}

func TestWithoutMeta(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"_meta":{"nexus/cache":{"status":"hit"},"k":"v"},"a":1}`, `{"_meta":{"k":"v"},"a":1}`},
		{`{"_meta":{"nexus/cache":1}}`, `{"_meta":{}}`},
		{`{"a": 1}`, `{"a": 1}`}, // no _meta: none is added
	} {
		got, err := withoutMeta(json.RawMessage(tc.in), MetaKey)
		if err != nil || string(got) != tc.want {
			t.Errorf("withoutMeta(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

func TestCacheStatus(t *testing.T) {
	for _, tc := range []struct {
		in     string
		status string
		age    int64
		ok     bool
	}{
		{`{"_meta":{"nexus/cache":{"status":"hit","age_ms":1500}}}`, StatusHit, 1500, true},
		{`{"_meta":{"nexus/cache":{"status":"hit","age_ms":1.5e3,"coalesced":true}},"content":[]}`, StatusHit, 1500, true},
		{`{"_meta":{"nexus/cache":{"status":"miss"}}}`, StatusMiss, 0, true},
		{`{"_meta":{"nexus\/cache":{"status":"bypass"}}}`, StatusBypass, 0, true},
		{`{"content":[]}`, "", 0, false},
		{`{"_meta":{"other":1}}`, "", 0, false},
		{`{"_meta":{"nexus/cache":{}}}`, "", 0, false},
		{`{"_meta":{"nexus/cache":"hit"}}`, "", 0, false},
		{`{"_meta":"x"}`, "", 0, false},
		{`[1]`, "", 0, false},
		{`null`, "", 0, false},
		{``, "", 0, false},
	} {
		s, age, ok := CacheStatus(json.RawMessage(tc.in))
		if s != tc.status || age != tc.age || ok != tc.ok {
			t.Errorf("CacheStatus(%s) = %q, %d, %v; want %q, %d, %v", tc.in, s, age, ok, tc.status, tc.age, tc.ok)
		}
	}
	// What memory writes, CacheStatus reads (the struct tag spells MetaKey).
	raw, err := withMeta(json.RawMessage(`{}`), MetaKey, cacheReport(StatusHit, 42, true))
	if err != nil {
		t.Fatal(err)
	}
	if s, age, ok := CacheStatus(raw); s != StatusHit || age != 42 || !ok {
		t.Fatalf("CacheStatus(%s) = %q, %d, %v", raw, s, age, ok)
	}
}

func TestCacheReport(t *testing.T) {
	for _, tc := range []struct {
		status    string
		age       int64
		coalesced bool
		want      string
	}{
		{StatusMiss, 0, false, `{"status":"miss"}`},
		{StatusBypass, 0, false, `{"status":"bypass"}`},
		{StatusHit, 0, false, `{"status":"hit","age_ms":0}`},
		{StatusHit, 1234, true, `{"status":"hit","age_ms":1234,"coalesced":true}`},
	} {
		if got := cacheReport(tc.status, tc.age, tc.coalesced); string(got) != tc.want || !json.Valid(got) {
			t.Errorf("cacheReport(%q, %d, %v) = %s, want %s", tc.status, tc.age, tc.coalesced, got, tc.want)
		}
	}
}

// FuzzWithMeta checks that a splice either leaves the result alone or adds
// exactly the report, keeping every other member's value.
func FuzzWithMeta(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"_meta":{"x":"<"}}`, `{"_meta":null}`, `[]`, `{"a":"\u2028"}`, `{"a":{"b":[1,2.50]}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := withMeta(json.RawMessage(in), MetaKey, cacheReport(StatusMiss, 0, false))
		if err != nil {
			if string(got) != in {
				t.Fatalf("error %v, and the result changed: %s", err, got)
			}
			return
		}
		if !json.Valid(got) {
			t.Fatalf("invalid JSON %s from %s", got, in)
		}
		if s, _, ok := CacheStatus(got); !ok || s != StatusMiss {
			t.Fatalf("no report in %s", got)
		}
		sameExceptReport(t, "splice", got, json.RawMessage(in))
	})
}

// BenchmarkWithMeta is the splice a hit pays, on a typical small result.
func BenchmarkWithMeta(b *testing.B) {
	res := json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("r", 200) + `"}],"_meta":{"child/trace":"abc"}}`)
	report := cacheReport(StatusHit, 1234, false)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := withMeta(res, MetaKey, report); err != nil {
			b.Fatal(err)
		}
	}
}
