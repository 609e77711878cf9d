package secrets

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"unicode/utf16"
)

// escapeAll spells every character of s as \uXXXX (surrogate pairs beyond the BMP),
// with upper-case hex when upper.
func escapeAll(s string, upper bool) string {
	var b strings.Builder
	for _, r := range s {
		for _, u := range utf16.Encode([]rune{r}) {
			f := "\\u%04x"
			if upper {
				f = "\\u%04X"
			}
			fmt.Fprintf(&b, f, u)
		}
	}
	return b.String()
}

// jsonQuote is s as a JSON string body, as encoding/json writes it.
func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// leaks reports whether secret can be read from the JSON text doc: in its bytes, or in
// any string of it decoded, or in JSON text nested in such a string.
func leaks(doc, secret string, depth int) bool {
	if strings.Contains(doc, secret) {
		return true
	}
	var v any
	if depth == 0 || json.Unmarshal([]byte(doc), &v) != nil {
		return false
	}
	var walk func(any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case string:
			return strings.Contains(v, secret) || leaks(v, secret, depth-1)
		case []any:
			for _, x := range v {
				if walk(x) {
					return true
				}
			}
		case map[string]any:
			for k, x := range v {
				if walk(k) || walk(x) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}

func TestRedactorJSON(t *testing.T) {
	const (
		canary  = "Sup3r/Secr3t-canary<&>"
		unicode = "pässwörd-€-𝄞-key"
		number  = "31415926535897"
	)
	r := NewRedactor()
	r.Add("fx/env/CANARY", canary)
	r.Add("fx/env/UNI", unicode)
	r.Add("fx/env/NUM", number)
	esc := jsonQuote(canary) // Sup3r/Secr3t-canary\u003c\u0026\u003e
	b64 := base64.StdEncoding.EncodeToString([]byte(canary))
	b64url := base64.URLEncoding.EncodeToString([]byte(canary))
	nested, _ := json.Marshal(map[string]string{"token": canary})
	nestedEsc, _ := json.Marshal(map[string]string{"token": escapeAll(canary, false)})

	for _, tc := range []struct {
		name, in, want string
	}{
		{"no secret", `{"a":"b\n\"c\"","n":1}`, `{"a":"b\n\"c\"","n":1}`},
		{"plain", `{"text":"token ` + esc + ` end"}`, `{"text":"token [redacted:fx/env/CANARY] end"}`},
		{"no html escape", `{"text":"Sup3r/Secr3t-canary<&>"}`, `{"text":"[redacted:fx/env/CANARY]"}`},
		{"first char escaped", `{"text":"\u0053up3r/Secr3t-canary<&>"}`, `{"text":"[redacted:fx/env/CANARY]"}`},
		{"escaped slash", `{"text":"Sup3r\/Secr3t-canary<&>!"}`, `{"text":"[redacted:fx/env/CANARY]!"}`},
		{"every char escaped", `["` + escapeAll(canary, false) + `"]`, `["[redacted:fx/env/CANARY]"]`},
		{"upper-case hex", `["x` + escapeAll(canary, true) + `x"]`, `["x[redacted:fx/env/CANARY]x"]`},
		{"mixed", `["` + escapeAll("Sup3r", true) + `\/Secr3t-canary\u003c&\u003E"]`, `["[redacted:fx/env/CANARY]"]`},
		{"after other escapes", `{"t":"a\n\tb\"` + escapeAll("S", false) + `up3r/Secr3t-canary<&>\\"}`, `{"t":"a\n\tb\"[redacted:fx/env/CANARY]\\"}`},
		{"in a key", `{"` + escapeAll(canary, false) + `":1}`, `{"[redacted:fx/env/CANARY]":1}`},
		{"surrogate pairs", `{"p":"` + escapeAll(unicode, false) + `"}`, `{"p":"[redacted:fx/env/UNI]"}`},
		{"utf-8 as is", `{"p":"` + unicode + `"}`, `{"p":"[redacted:fx/env/UNI]"}`},
		{"url-encoded", `{"u":"https://x/?t=` + url.QueryEscape(canary) + `"}`, `{"u":"https://x/?t=[redacted:fx/env/CANARY]"}`},
		{"path-escaped", `{"u":"https://x/` + url.PathEscape(canary) + `"}`, `{"u":"https://x/[redacted:fx/env/CANARY]"}`},
		{"base64", `{"b":"` + b64 + `"}`, `{"b":"[redacted:fx/env/CANARY]=="}`},
		{"base64 url-safe", `{"b":"` + b64url + `"}`, `{"b":"[redacted:fx/env/CANARY]=="}`},
		{"base64 with escaped slash", `{"b":"` + strings.ReplaceAll(b64, "/", `\/`) + `"}`, `{"b":"[redacted:fx/env/CANARY]=="}`},
		{"json in a string", `{"text":` + jsonString(string(nested)) + `}`, `{"text":"{\"token\":\"[redacted:fx/env/CANARY]\"}"}`},
		{"escapes in json in a string", `{"text":` + jsonString(string(nestedEsc)) + `}`, `{"text":"{\"token\":\"[redacted:fx/env/CANARY]\"}"}`},
		{"escaped backslash starting an escape", `{"t":"\u005cu0053up3r/Secr3t-canary<&>"}`, `{"t":"[redacted:fx/env/CANARY]"}`},
		{"a number", `{"n":` + number + `,"m":1}`, `{"n":"[redacted:fx/env/NUM]","m":1}`},
		{"inside a longer number", `[1` + number + `9]`, `["[redacted:fx/env/NUM]"]`},
		{"split across strings is out of reach", `["Sup3r/Secr3t","-canary<&>"]`, `["Sup3r/Secr3t","-canary<&>"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(r.JSON([]byte(tc.in)))
			if got != tc.want {
				t.Errorf("JSON(%s)\n got %s\nwant %s", tc.in, got, tc.want)
			}
			if json.Valid([]byte(tc.in)) && !json.Valid([]byte(got)) {
				t.Errorf("the result is not valid JSON: %s", got)
			}
			if !strings.Contains(tc.name, "out of reach") {
				for _, v := range []string{canary, unicode, number} {
					if leaks(got, v, maxJSONDepth) {
						t.Errorf("%q can still be read from %s", v, got)
					}
				}
			}
		})
	}
}

// jsonString is s as a JSON string, quotes included.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestRedactorJSONMessages checks the places a child can put a value in MCP messages:
// a result, an error, a tool description, a log notification, resource contents and
// prompt messages, each with the value escaped.
func TestRedactorJSONMessages(t *testing.T) {
	const canary = "canary-7f3a9c1e5b2d"
	r := NewRedactor()
	r.Add("fx/env/CANARY", canary)
	spelled := escapeAll(canary[:3], false) + canary[3:]
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + spelled + `"}]}}`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"bad token ` + spelled + `","data":{"t":"` + spelled + `"}}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"t","description":"uses ` + spelled + `","inputSchema":{"type":"object","properties":{"x":{"default":"` + spelled + `"}}}}]}}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"fx","data":"started with ` + spelled + `"}}`,
		`{"jsonrpc":"2.0","id":4,"result":{"contents":[{"uri":"file:///` + spelled + `","text":"` + spelled + `","blob":"` + base64.StdEncoding.EncodeToString([]byte(canary)) + `"}]}}`,
		`{"jsonrpc":"2.0","id":5,"result":{"messages":[{"role":"user","content":{"type":"text","text":"` + spelled + `"}}]}}`,
	} {
		got := r.JSON([]byte(msg))
		if !json.Valid(got) {
			t.Errorf("not valid JSON: %s", got)
		}
		if leaks(string(got), canary, maxJSONDepth) || !strings.Contains(string(got), "[redacted:fx/env/CANARY]") {
			t.Errorf("JSON(%s) = %s", msg, got)
		}
	}
}

func TestRedactorJSONNoMatch(t *testing.T) {
	r := NewRedactor()
	in := []byte(`{"a":"line\nline\t\"q\" \\ \u00e9"}`)
	if got := r.JSON(in); &got[0] != &in[0] {
		t.Error("JSON copied with no secrets known")
	}
	r.Add("k", "secret-value-123")
	for _, in := range [][]byte{
		in,
		benchResult(),
		[]byte(`{"a":"\u0041\u0042 not it","b":"secret-value-12"}`), // an escape that may hide, but no value
	} {
		if got := r.JSON(in); &got[0] != &in[0] {
			t.Errorf("JSON copied when nothing matched: %s", in)
		}
	}
	if n := testing.AllocsPerRun(100, func() { r.JSON(in) }); n != 0 {
		t.Errorf("JSON allocates %.0f times when nothing matches", n)
	}
	notJSON := []byte(`{"a":"secret-value-123`)
	if got := string(r.JSON(notJSON)); got != `{"a":"[redacted:k]` {
		t.Errorf("unterminated string: %s", got)
	}
}

// FuzzRedactorJSON checks on any input that a valid message stays valid and that the
// value cannot be read back from it.
func FuzzRedactorJSON(f *testing.F) {
	const secret = "Sup3r/Secr3t"
	for _, s := range []string{
		`{"a":"Sup3r/Secr3t"}`, `["\u0053up3r\/Secr3t"]`, `{"t":"{\"x\":\"\\u0053up3r\"}"}`,
		`[1,2,"x\ny"]`, `"Sup3r\/Secr3t`, `{"U3VwM3IvU2VjcjN0":true}`,
	} {
		f.Add(s)
	}
	r := NewRedactor()
	r.Add("s", secret)
	f.Fuzz(func(t *testing.T, in string) {
		got := r.JSON([]byte(in))
		if !json.Valid([]byte(in)) {
			return
		}
		if !json.Valid(got) {
			t.Fatalf("JSON(%q) = %q is not valid", in, got)
		}
		var v any
		json.Unmarshal(got, &v)
		if s, ok := v.(string); ok && strings.Contains(s, secret) && strings.Count(in, `"`) == 2 {
			t.Fatalf("JSON(%q) = %q still holds the value", in, got)
		}
	})
}

func BenchmarkRedactJSONNoMatch(b *testing.B) {
	r, in := benchRedactor(), benchResult()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if out := r.JSON(in); len(out) != len(in) {
			b.Fatal("changed")
		}
	}
}

func BenchmarkRedactJSONMatch(b *testing.B) {
	r, in := benchRedactor(), benchResult()
	in = append(in[:2048:2048], append([]byte("sk-3-a8f5f167f44f4964e6c998dee827110c"), in[2048:]...)...)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		r.JSON(in)
	}
}

func BenchmarkRedactJSONEscapedMatch(b *testing.B) {
	r, in := benchRedactor(), benchResult()
	in = append(in[:2048:2048], append([]byte(`\u0073k-3-a8f5f167f44f4964e6c998dee827110c`), in[2048:]...)...)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		r.JSON(in)
	}
}

func TestRedactorJSONOnText(t *testing.T) {
	r := NewRedactor()
	r.Add("k", "abc/def_ghi")
	r.Add("n", "12345678")
	for _, tc := range []struct{ in, want string }{
		{"bad token abc/def_ghi, try again", "bad token [redacted:k], try again"},
		{"code 12345678 failed", "code [redacted:n] failed"},
		{`it's 5" long: abc/def_ghi`, `it's 5" long: [redacted:k]`},
	} {
		if got := string(r.JSON([]byte(tc.in))); got != tc.want {
			t.Errorf("JSON(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestRedactorJSONRandomSpellings spells a value with a random mix of escapes per
// character, inside random text, nested in up to two levels of JSON text in strings,
// and checks that it is never readable afterwards and the message stays valid.
func TestRedactorJSONRandomSpellings(t *testing.T) {
	const secret = "S3cr/et-\"quoted\"-é-𝄞-<&>"
	r := NewRedactor()
	r.Add("s", secret)
	rng := rand.New(rand.NewPCG(7, 11))
	spell := func() string {
		var b strings.Builder
		for _, c := range secret {
			switch {
			case c == '"' && rng.IntN(2) == 0:
				b.WriteString(`\u0022`)
			case c == '/' && rng.IntN(2) == 0:
				b.WriteString(`\/`)
			case rng.IntN(3) == 0:
				b.WriteString(escapeAll(string(c), rng.IntN(2) == 0))
			default:
				b.WriteString(jsonQuote(string(c)))
			}
		}
		return b.String()
	}
	fillers := []string{"", "x", `\n`, `\\`, `\"`, "text ", `\u00e9`}
	for i := range 500 {
		doc := `{"a":"` + fillers[rng.IntN(len(fillers))] + spell() + fillers[rng.IntN(len(fillers))] + `","n":1}`
		for range rng.IntN(3) {
			doc = `{"text":` + jsonString(doc) + `}`
		}
		if !json.Valid([]byte(doc)) {
			t.Fatalf("test bug: %s", doc)
		}
		got := r.JSON([]byte(doc))
		if !json.Valid(got) {
			t.Fatalf("case %d: not valid JSON: %s", i, got)
		}
		if leaks(string(got), secret, maxJSONDepth) {
			t.Fatalf("case %d: the value can be read from %s (input %s)", i, got, doc)
		}
	}
}
