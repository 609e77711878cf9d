package aggregation

import (
	"bytes"
	"encoding/json"
	"testing"
)

// readRequestMetaByDecoding is how readRequestMeta read a request's _meta
// before it walked the params: with encoding/json, into maps, and written
// back with marshal. It is the reference the walk is held to.
func readRequestMetaByDecoding(params json.RawMessage) clientMeta {
	var fields map[string]json.RawMessage
	m := clientMeta{params: params}
	if len(params) == 0 {
		return m
	}
	if err := json.Unmarshal(params, &fields); err != nil || fields == nil {
		m.err = errNotAnObject
		return m
	}
	var meta map[string]json.RawMessage
	if raw, ok := fields["_meta"]; ok {
		if json.Unmarshal(raw, &meta) != nil {
			m.err = errNotAnObject
			return m
		}
	}
	m.read(meta)
	if m.err != nil {
		return m
	}
	n := len(meta)
	for k := range meta {
		if hopMetaKey(k) {
			delete(meta, k)
		}
	}
	if len(meta) != n {
		if len(meta) == 0 {
			delete(fields, "_meta")
		} else {
			fields["_meta"] = marshal(meta)
		}
		m.params = marshal(fields)
	}
	return m
}

var errNotAnObject = json.Unmarshal([]byte(`1`), &map[string]any{})

var requestMetaCases = []struct {
	name, params string
	modern       bool   // the _meta names a modern version
	fails        bool   // the params cannot be read
	want         string // the params the step gets; "" for the request's own
}{
	{name: "no params"},
	{name: "legacy", params: `{"name":"echo","arguments":{"x":1}}`},
	{name: "modern", params: `{"name":"echo","arguments":{"x":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":7}}`, modern: true,
		want: `{"_meta":{"progressToken":7},"arguments":{"x":1},"name":"echo"}`},
	{name: "modern, only protocol fields", params: ` { "name" : "echo" , "_meta" : { "io.modelcontextprotocol/protocolVersion" : "2026-07-28", "io.modelcontextprotocol/clientInfo": {"name":"c","version":"2"} } } `, modern: true,
		want: `{"name":"echo"}`},
	{name: "legacy version", params: `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}`, want: `{}`},
	{name: "escaped keys", params: `{"_m\u0065ta":{"io.modelcontextprotocol\/protocolVersion":"2026-07-28","k\u00e9":"<&>"},"n\"ame":"a\nb"}`, modern: true,
		want: `{"_meta":{"ké":"<&>"},"n\"ame":"a\nb"}`},
	{name: "duplicate keys: the last counts", params: `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","a":1},"name":"x","name":"y"}`, modern: true,
		want: `{"_meta":{"a":1},"name":"y"}`},
	{name: "null _meta", params: `{"name":"echo","_meta":null}`},
	{name: "params a string", params: `"io.modelcontextprotocol/protocolVersion"`, fails: true},
	{name: "params an array", params: `[1,2]`, fails: true},
	{name: "params null", params: `null`, fails: true},
	{name: "_meta an array", params: `{"_meta":[1]}`, fails: true},
	{name: "version not a string", params: `{"_meta":{"io.modelcontextprotocol/protocolVersion":2026}}`, fails: true},
}

func TestReadRequestMeta(t *testing.T) {
	for _, tc := range requestMetaCases {
		t.Run(tc.name, func(t *testing.T) {
			params := json.RawMessage(tc.params)
			if tc.params == "" {
				params = nil
			}
			got := readRequestMeta(params)
			if (got.err != nil) != tc.fails {
				t.Fatalf("err = %v, want failure %v", got.err, tc.fails)
			}
			if tc.fails {
				return
			}
			if got.modern() != tc.modern {
				t.Errorf("modern = %v, want %v (version %q)", got.modern(), tc.modern, got.version)
			}
			want := tc.want
			if want == "" {
				want = tc.params
			}
			if string(got.params) != want {
				t.Errorf("params =\n%s\nwant\n%s", got.params, want)
			}
			sameMeta(t, got, readRequestMetaByDecoding(params))
		})
	}
}

// sameMeta fails t unless got reads what the reference read.
func sameMeta(t *testing.T, got, ref clientMeta) {
	t.Helper()
	if (got.err != nil) != (ref.err != nil) {
		t.Fatalf("err = %v, the reference's %v", got.err, ref.err)
	}
	if got.err != nil {
		return
	}
	if got.version != ref.version || got.hasVersion != ref.hasVersion || !bytes.Equal(got.caps, ref.caps) ||
		got.clientName != ref.clientName || got.clientVer != ref.clientVer || got.level != ref.level || got.hasLevel != ref.hasLevel ||
		!bytes.Equal(got.params, ref.params) {
		t.Fatalf("read\n%+v\nthe reference read\n%+v", got, ref)
	}
}

// FuzzReadRequestMeta holds the walk to what encoding/json reads, for every
// params a decoded message may carry (valid JSON).
func FuzzReadRequestMeta(f *testing.F) {
	for _, tc := range requestMetaCases {
		f.Add(tc.params)
	}
	f.Fuzz(func(t *testing.T, params string) {
		if params == "" || !json.Valid([]byte(params)) {
			return
		}
		sameMeta(t, readRequestMeta(json.RawMessage(params)), readRequestMetaByDecoding(json.RawMessage(params)))
	})
}

func BenchmarkReadRequestMeta(b *testing.B) {
	params := json.RawMessage(`{"name":"fx__echo","arguments":{"text":"hello","n":12345},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"e2e-test","version":"1"}}}`)
	for b.Loop() {
		if m := readRequestMeta(params); m.err != nil {
			b.Fatal(m.err)
		}
	}
}
