package memory

// The tests of memory's pieces that need no store: the hot layer, the
// _meta edits and the in-memory index. The tests of Memory over a real
// store are in package memory_test, which can import memory/sqlite.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/nexus-mcp/nexus/memory/embedder"
)

func TestHotLayerBound(t *testing.T) {
	h := newHot(3 * (hotOverhead + 10))
	for i := range 5 {
		h.put([]byte{byte(i)}, Entry{ID: int64(i), Result: make([]byte, 9)}, 0, 0)
	}
	if h.size > h.max || len(h.items) != 3 {
		t.Fatalf("size %d of %d, %d items", h.size, h.max, len(h.items))
	}
	if _, _, ok := h.get([]byte{0}); ok {
		t.Error("the least recently used entry was kept")
	}
	if _, _, ok := h.get([]byte{4}); !ok {
		t.Error("the newest entry was evicted")
	}
	h.put([]byte{9}, Entry{Result: make([]byte, 4*hotOverhead)}, 0, 0)
	if _, _, ok := h.get([]byte{9}); ok {
		t.Error("an entry over the bound was kept")
	}
	epoch := h.Epoch()
	h.Reset()
	h.put([]byte{7}, Entry{}, 0, epoch)
	if _, _, ok := h.get([]byte{7}); ok || h.size != 0 {
		t.Error("a read from before a reset was kept")
	}
}

// TestMetaTemplate: a hot hit's bytes are the bytes withMeta makes.
func TestMetaTemplate(t *testing.T) {
	report := cacheReport(StatusHit, 42, false)
	for _, in := range []string{
		`{}`, `{"content":[{"type":"text","text":"a <b> & c"}]}`,
		`{"_meta":{"x":1},"content":[]}`, `{"_meta":{},"z":true,"a":[1,2]}`, `{"_meta":null}`,
		` {"content" : [ ] , "structuredContent": {"k": "\u2028"} } `,
	} {
		want, err := withMeta(json.RawMessage(in), MetaKey, report)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := newMetaTemplate([]byte(in))
		if tmpl == nil {
			t.Fatalf("%s: no template", in)
		}
		if got := tmpl.fill(report); string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", in, got, want)
		}
	}
	if newMetaTemplate([]byte(`{"text":"\u0000nexus-cache-report-slot\u0000"}`)) != nil {
		t.Error("a result holding the slot got a template")
	}
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
		SameExceptReport(t, "splice", got, json.RawMessage(in))
	})
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

// TestIndexSearch: the index finds the exact nearest neighbours of
// vectors near stored ones, with their similarity within 0.01, and
// forgets removed entries.
func TestIndexSearch(t *testing.T) {
	for _, sparse := range []bool{false, true} {
		t.Run(fmt.Sprintf("sparse=%v", sparse), func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			x := newIndex()
			vecs := map[int64][]float32{}
			for id := int64(1); id <= 2000; id++ {
				v := randomUnit(r, 128, sparse)
				vecs[id] = v
				x.add(int64(id%3), id, v)
			}
			for q := int64(1); q <= 200; q += 7 {
				// A neighbour of entry q: q plus a little noise.
				v := slices.Clone(vecs[q])
				noise := randomUnit(r, 128, sparse)
				for i := range v {
					v[i] += 0.3 * noise[i]
				}
				if err := embedder.Normalize(v); err != nil {
					t.Fatal(err)
				}
				hits := x.search(q%3, v, 1)
				if len(hits) != 1 || hits[0].id != q {
					t.Fatalf("query near %d: %+v", q, hits)
				}
				if d := hits[0].similarity - embedder.Cosine(v, vecs[q]); d > 0.01 || d < -0.01 {
					t.Errorf("similarity %v, exact %v", hits[0].similarity, embedder.Cosine(v, vecs[q]))
				}
			}
			x.remove(7)
			if hits := x.search(1, vecs[7], 1); len(hits) == 1 && hits[0].id == 7 {
				t.Error("removed entry found")
			}
			if x.size() != 1999 {
				t.Errorf("size %d", x.size())
			}
			// Replacing keeps one copy.
			x.add(1, 10, vecs[10])
			if x.size() != 1999 {
				t.Errorf("size after replace %d", x.size())
			}
		})
	}
}

func randomUnit(r *rand.Rand, dims int, sparse bool) []float32 {
	v := make([]float32, dims)
	for i := range v {
		if sparse && r.IntN(10) != 0 {
			continue
		}
		v[i] = float32(r.NormFloat64())
	}
	if embedder.Normalize(v) != nil {
		v[0] = 1
	}
	return v
}

func TestSemanticReport(t *testing.T) {
	got := string(semanticReport(&semHit{similarity: 0.934567, matched: `a "b" <c>`}, 12, false))
	want := `{"status":"semantic_hit","similarity":0.9346,"matched":"a \"b\" <c>","age_ms":12}`
	if got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

// members returns the compacted value bytes of each member of the JSON
// object raw; nil for an empty raw.
func Members(t testing.TB, raw json.RawMessage) map[string]string {
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

// SameExceptReport fails unless got has every member of want with the same
// value bytes (compacted), and nothing else but _meta[MetaKey].
func SameExceptReport(t testing.TB, what string, got, want json.RawMessage) {
	t.Helper()
	g, w := Members(t, got), Members(t, want)
	gm, wm := Members(t, json.RawMessage(g["_meta"])), Members(t, json.RawMessage(w["_meta"]))
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
