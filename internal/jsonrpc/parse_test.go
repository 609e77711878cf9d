package jsonrpc

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// messages are the seeds of FuzzUnmarshal and the table of TestUnmarshalPlain:
// what clients and children send, and what they send wrong.
var messages = []struct {
	text  string
	plain bool // decoded in one pass, not by encoding/json
}{
	{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fx__echo","arguments":{"message":"m1"}}}`, true},
	{`{"jsonrpc":"2.0","id":"a-1","result":{"content":[{"type":"text","text":"é \"q\" \u00e9"}],"isError":false}}`, true},
	{` { "jsonrpc" : "2.0" , "method" : "notifications/progress" , "params" : { "progress" : 0.5e+1 } } ` + "\n", true},
	{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, true},
	{`{"jsonrpc":"2.0","id":1,"result":{},"id":2}`, false},
	{`{"jsonrpc":"2.0","method":"a","method":null}`, false},
	{`{"jsonrpc":"2.0","jsonrpc":null,"method":"x"}`, false},
	{`{"jsonrpc":"2.0","method":1,"method":"x","id":1}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","method":null}`, false},
	{`{"jsonrpc":null,"method":"x","extra":[1,-0.5,true,false,null,{}]}`, true},
	{`{}`, true},
	{`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no such method"}}`, false},
	{`{"jsonrpc":"2.0","id":1,"error":null}`, false},
	{`{"JSONRPC":"2.0","Method":"ping","ID":1}`, false},
	{`{"jſonrpc":"2.0","method":"ping"}`, false},
	{`{"jsonrpc":"2.0","method":"pi\u006eg"}`, false},
	{`{"jsonrpc":"2.0","method":"pïng"}`, true},
	{"{\"jsonrpc\":\"2.0\",\"method\":\"p\xffng\"}", false},
	{`{"json\u0072pc":"2.0"}`, false},
	{`{"jsonrpc":2,"method":"ping"}`, false},
	{`{"jsonrpc":"2.0","method":["ping"]}`, false},
	{`[{"jsonrpc":"2.0","method":"ping"}]`, false},
	{`null`, false},
	{`"text"`, false},
	{`{"jsonrpc":"2.0","id":01}`, false},
	{`{"jsonrpc":"2.0","id":1,}`, false},
	{`{"jsonrpc":"2.0","id":1} x`, false},
	{`{"jsonrpc":"2.0","params":{"a":"\x"}}`, false},
	{"{\"jsonrpc\":\"2.0\",\"params\":\"tab\there\"}", false},
	{`{"jsonrpc":"2.0","params":[1,2`, false},
	{`{"jsonrpc":"2.0","params":1.}`, false},
	{`{"jsonrpc":"2.0","params":-}`, false},
	{`{"jsonrpc":"2.0","params":tru}`, false},
	{`{"jsonrpc":"2.0","params":"\ud83d"}`, true},
	{`{"a":` + strings.Repeat("[", maxParseDepth+2) + strings.Repeat("]", maxParseDepth+2) + `}`, false},
}

// TestUnmarshalPlain checks which messages take the one-pass path, and that
// every one decodes as encoding/json decodes it.
func TestUnmarshalPlain(t *testing.T) {
	for _, tc := range messages {
		var m Message
		if got := parseMessage([]byte(tc.text), &m); got != tc.plain {
			t.Errorf("parseMessage(%.60s) = %v, want %v", tc.text, got, tc.plain)
		}
		sameAsEncodingJSON(t, []byte(tc.text))
	}
}

// TestUnmarshalAliases checks that the raw parts are the message's own bytes,
// which is what spares the copies.
func TestUnmarshalAliases(t *testing.T) {
	b := []byte(`{"jsonrpc":"2.0","id":1,"result":{"x":1}}`)
	var m Message
	if err := Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if &m.Result[0] != &b[bytes.Index(b, []byte(`{"x"`))] {
		t.Fatal("Result is a copy")
	}
	if cap(m.ID) != len(m.ID) {
		t.Fatal("ID may be appended to over the bytes after it")
	}
}

func FuzzUnmarshal(f *testing.F) {
	for _, tc := range messages {
		f.Add([]byte(tc.text))
	}
	f.Fuzz(sameAsEncodingJSON)
}

// sameAsEncodingJSON holds Unmarshal to json.Unmarshal: the same message, and
// an error exactly when encoding/json has one.
func sameAsEncodingJSON(t *testing.T, b []byte) {
	var want, got Message
	wantErr := json.Unmarshal(b, &want)
	gotErr := Unmarshal(bytes.Clone(b), &got)
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("%q: error %v, encoding/json's %v", b, gotErr, wantErr)
	}
	if wantErr != nil {
		if gotErr.Error() != wantErr.Error() {
			t.Fatalf("%q: error %q, encoding/json's %q", b, gotErr, wantErr)
		}
		return
	}
	if !reflect.DeepEqual(normal(got), normal(want)) {
		t.Fatalf("%q:\n got %+v\nwant %+v", b, got, want)
	}
}

// normal is m with its empty raw parts nil: a RawMessage encoding/json never
// set is nil, one Unmarshal never set too, and the bytes are what matter.
func normal(m Message) Message {
	for _, r := range []*json.RawMessage{&m.ID, &m.Params, &m.Result} {
		if len(*r) == 0 {
			*r = nil
		}
	}
	return m
}

// BenchmarkUnmarshal compares the one-pass decode of what a gateway reads all
// day with encoding/json's:
//
//	go test ./internal/jsonrpc -run '^$' -bench Unmarshal -benchmem
func BenchmarkUnmarshal(b *testing.B) {
	inputs := []struct{ name, text string }{
		{"request", `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"code-kg__find_symbol","arguments":{"query":"parseMessage","limit":10},"_meta":{"progressToken":"p-42"}}}`},
		{"answer", `{"jsonrpc":"2.0","id":"nexus-7","result":{"content":[{"type":"text","text":"` + strings.Repeat(`lorem ipsum \"dolor\" sit amet `, 40) + `"}],"isError":false}}`},
	}
	for _, in := range inputs {
		line := []byte(in.text)
		b.Run(in.name+"/encoding-json", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var m Message
				if err := json.Unmarshal(line, &m); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(in.name+"/one-pass", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var m Message
				if err := Unmarshal(line, &m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
