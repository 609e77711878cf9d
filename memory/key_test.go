package memory

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCanonicalJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"key order", `{"b":2,"a":1}`, `{"a":1,"b":2}`},
		{"whitespace", " { \"b\" : 2 ,\n\t\"a\" : [ 1 , 2 ] } ", `{"a":[1,2],"b":2}`},
		{"nested objects sorted", `{"z":{"y":1,"x":{"b":true,"a":null}},"a":[]}`, `{"a":[],"z":{"x":{"a":null,"b":true},"y":1}}`},
		{"array order kept", `[3,1,2]`, `[3,1,2]`},
		{"one", `1`, `1`},
		{"one point zero kept", `1.0`, `1.0`},
		{"one e zero kept", `1e0`, `1e0`},
		{"ten e minus one kept", `10E-1`, `10E-1`},
		{"exponent plus kept", `1.5e+2`, `1.5e+2`},
		{"negative zero kept", `-0.0`, `-0.0`},
		{"zero exponent kept", `0e10`, `0e10`},
		{"trailing zero kept", `12.340`, `12.340`},
		{"numbers in an object", `{"n": 1.0, "m" : 1e2}`, `{"m":1e2,"n":1.0}`},
		{"small fraction", `0.00123`, `0.00123`},
		{"tiny", `1.5e-10`, `1.5e-10`},
		{"huge", `1e400`, `1e400`},
		{"big integer exact", `123456789012345678901234567890`, `123456789012345678901234567890`},
		{"big integer not rounded", `9007199254740993`, `9007199254740993`},
		{"negative", `-42.50`, `-42.50`},
		{"unicode escape", `"caf\u00e9"`, `"café"`},
		{"surrogate pair", `"\ud83d\ude00"`, `"😀"`},
		{"lone surrogate kept", `"\ud800x"`, `"\ud800x"`},
		{"lone surrogate lower-cased", `"\uDC0Fx"`, `"\udc0fx"`},
		{"high then not low", `"\ud800\u0041"`, `"\ud800A"`},
		{"two highs", `"\ud800\ud800"`, `"\ud800\ud800"`},
		{"replacement character", `"\ufffd"`, "\"\uFFFD\""},
		{"solidus", `"a\/b"`, `"a/b"`},
		{"control escapes", `"\u000a\u0009\u0001"`, `"\n\t\u0001"`},
		{"html not escaped", `"<a&b>"`, `"<a&b>"`},
		{"uppercase hex", `"\u00E9"`, `"é"`},
		{"quote and backslash", `"\"\\"`, `"\"\\"`},
		{"empty", ``, `{}`},
		{"null", `null`, `{}`},
		{"literals", `[true,false,null]`, `[true,false,null]`},
		{"unicode keys sorted bytewise", `{"é":1,"z":2,"a":3}`, `{"a":3,"z":2,"é":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CanonicalJSON(json.RawMessage(tt.in))
			if err != nil {
				t.Fatalf("CanonicalJSON(%q): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Errorf("CanonicalJSON(%q) = %s, want %s", tt.in, got, tt.want)
			}
			// Idempotent and valid JSON.
			again, err := CanonicalJSON(got)
			if err != nil || string(again) != string(got) {
				t.Errorf("not idempotent: %s -> %s (%v)", got, again, err)
			}
			if !json.Valid(got) {
				t.Errorf("invalid JSON %s", got)
			}
		})
	}
}

func TestCanonicalJSONDistinct(t *testing.T) {
	pairs := [][2]string{
		{`{"env":"staging"}`, `{"env":"production"}`},
		{`1`, `1.0000000000000001`},
		{`9007199254740993`, `9007199254740992`},
		{`"1"`, `1`},
		{`[1,2]`, `[2,1]`},
		{`{"a":null}`, `{}`},
		{`0.1`, `0.01`},
		{`-1`, `1`},
		{`100`, `1e3`},
		// Spellings of one value that a child reads apart (int and float in
		// Python, -0 in JavaScript).
		{`{"n":1.0}`, `{"n":1}`},
		{`{"n":1e2}`, `{"n":100}`},
		{`{"n":1E2}`, `{"n":1e2}`},
		{`{"n":-0}`, `{"n":0}`},
		{`{"n":0.10}`, `{"n":0.1}`},
		// What a JavaScript or Python child sees differently.
		{`{"query":"\ud800 id"}`, `{"query":"\ufffd id"}`},
		{`{"query":"\ud800 id"}`, `{"query":"\udc00 id"}`},
		{`{"q":"\ud800"}`, "{\"q\":\"\xed\xa0\x80\"}"},
		{"{\"q\":\"\xff\"}", `{"q":"\ufffd"}`},
		{"{\"q\":\"\xff\"}", "{\"q\":\"\xfe\"}"},
		{"{\"q\":\"a\xff\\n\"}", `{"q":"a\ufffd\n"}`},
	}
	for _, p := range pairs {
		a, err1 := CanonicalJSON(json.RawMessage(p[0]))
		b, err2 := CanonicalJSON(json.RawMessage(p[1]))
		if err1 != nil || err2 != nil {
			t.Fatalf("%v %v", err1, err2)
		}
		if string(a) == string(b) {
			t.Errorf("%s and %s both canonicalise to %s", p[0], p[1], a)
		}
	}
}

func TestCanonicalJSONErrors(t *testing.T) {
	for _, in := range []string{
		`{"a":1,"a":2}`, `{"a":1,}`, `[1,]`, `{a:1}`, `01`, `1.`, `.5`, `1e`, `+1`,
		`"abc`, `"\x"`, `"\u12"`, "\"a\x01\"", `tru`, `{"a":1} x`, `[1 2]`, `NaN`,
		strings.Repeat("[", 600) + strings.Repeat("]", 600),
	} {
		if got, err := CanonicalJSON(json.RawMessage(in)); err == nil {
			t.Errorf("CanonicalJSON(%q) = %s, want error", in, got)
		}
	}
}

func BenchmarkCanonicalJSON(b *testing.B) {
	in := json.RawMessage(`{"query":"SELECT * FROM issues WHERE project = 'NEX'","limit":50,"offset":0,
		"filters":{"status":["open","in progress"],"assignee":"m\u00fcller","labels":["bug","p1"]},
		"include_comments":true,"since":1.7e12,"fields":["id","title","status","updated"]}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := CanonicalJSON(in); err != nil {
			b.Fatal(err)
		}
	}
}
