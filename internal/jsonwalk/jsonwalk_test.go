package jsonwalk

import (
	"encoding/json"
	"maps"
	"testing"
)

// encodeSeeds are objects whose re-encoding is easy to get wrong: space in
// and around values, escapes in keys and strings, repeated keys, non-ASCII.
var encodeSeeds = []string{
	`{"name":"a"}`,
	` { "name" : "a" , "inputSchema" : { "type" : "object" , "properties" : { } } } `,
	"{\"name\":\"a\",\n\t\"description\":\"tabs\\tand \\\"quotes\\\" and \\\\ back \\\\\\\"\",\r\n\"z\":[ 1 , 2.50 , -0 , 1e3 , true , null ]}",
	`{"name":"a","description":"<b> & é ☃ \u2028 \ud83d\ude00 \u0001"}`,
	`{"b\u0061":1,"ba":2,"\u00e9":3,"é":4,"a\"b":5,"a\\b":6,"\u007f":7,"\u2028":8,"<&>":9}`,
	`{"name":"a","name":"b","annotations":{"readOnlyHint":true,"readOnlyHint":false}}`,
	`{"name":"a","_meta":{"ui":{"resourceUri":"ui://x"}},"icons":[{"src":"data:,x y"}],"execution":{"taskSupport":"optional"}}`,
	"{\"name\":\"a\",\"description\":\"bad utf8 \xff\xfe here\",\"\xff\":1}",
	`{}`,
	` {"k\u00e9y" :{"a":[{}, [], "]}\\\"" ] } , "k" : -1.5e-3 ,"é\n":"x"} `,
}

// FuzzMembers holds Members to what decoding into a map gives, and Object to
// what Marshal writes for the same members, byte for byte: clients were given
// Marshal's bytes before.
func FuzzMembers(f *testing.F) {
	for _, s := range encodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		var want map[string]json.RawMessage
		if json.Unmarshal(obj, &want) != nil || want == nil {
			return // not an object
		}
		got, err := Members(obj)
		if err != nil || !maps.EqualFunc(got, want, func(a, b json.RawMessage) bool { return string(a) == string(b) }) {
			t.Fatalf("Members(%q) = %q, %v; decoding gives %q", obj, got, err, want)
		}
		if got, want := Object(got), Marshal(want); string(got) != string(want) {
			t.Fatalf("Object(%q) =\n %s\nMarshal's\n %s", obj, got, want)
		}
	})
}

func TestObjectNull(t *testing.T) {
	fields := map[string]json.RawMessage{"a": nil, "b": json.RawMessage(`[ ]`)}
	if got, want := Object(fields), Marshal(fields); string(got) != string(want) {
		t.Fatalf("Object = %s, Marshal's %s", got, want)
	}
}
