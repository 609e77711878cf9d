package secrets

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestRedactor(t *testing.T) {
	r := NewRedactor()
	r.Add("gh", "ghp_abcdef")
	r.Add("short", "abc")                // too short: ignored
	r.Add("json", "p\"w\\d<&>\n")        // has JSON-escaped forms
	r.Add("long", "ghp_abcdef_and_more") // contains gh's value
	r.Add("over1", "XXXXyyyy")           // overlaps over2 in "XXXXyyyyZZZZ"
	r.Add("over2", "yyyyZZZZ")
	r.Add("dup", "ghp_abcdef") // already known: keeps the first name

	for _, tc := range []struct{ in, want string }{
		{"nothing here", "nothing here"},
		{"token ghp_abcdef.", "token [redacted:gh]."},
		{"ghp_abcdefghp_abcdef ghp_abcdef", "[redacted:gh][redacted:gh] [redacted:gh]"},
		{"abc abc", "abc abc"},
		{"x ghp_abcdef_and_more y", "x [redacted:long] y"},
		{"raw p\"w\\d<&>\n end", "raw [redacted:json] end"},
		{`{"v":"p\"w\\d\u003c\u0026\u003e\n"}`, `{"v":"[redacted:json]"}`},
		{`{"v":"p\"w\\d<&>\n"}`, `{"v":"[redacted:json]"}`},
		{"XXXXyyyyZZZZ!", "[redacted:over1]!"}, // union of both, no fragment left
		{"ZZZZ yyyy", "ZZZZ yyyy"},
	} {
		if got := r.String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := string(r.Bytes([]byte(tc.in))); got != tc.want {
			t.Errorf("Bytes(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}

	// Many occurrences in a large input.
	in := strings.Repeat("a ghp_abcdef b\n", 1000)
	if got, want := r.String(in), strings.Repeat("a [redacted:gh] b\n", 1000); got != want {
		t.Errorf("many occurrences: got %d bytes, want %d", len(got), len(want))
	}
}

func TestRedactorNoCopy(t *testing.T) {
	r := NewRedactor()
	b := []byte("hello world")
	if got := r.Bytes(b); &got[0] != &b[0] {
		t.Error("Bytes copied with no secrets known")
	}
	r.Add("k", "secret-value")
	if got := r.Bytes(b); &got[0] != &b[0] {
		t.Error("Bytes copied when nothing matched")
	}
	in := []byte("a secret-value")
	out := r.Bytes(in)
	if string(in) != "a secret-value" || string(out) != "a [redacted:k]" {
		t.Errorf("Bytes changed its input or missed: in %q out %q", in, out)
	}
}

func TestRedactorConcurrent(t *testing.T) {
	r := NewRedactor()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			v := fmt.Sprintf("secret-%d-value", i)
			r.Add(fmt.Sprint("s", i), v)
			if got := r.String("x " + v); got != fmt.Sprintf("x [redacted:s%d]", i) {
				t.Errorf("got %q", got)
			}
		})
	}
	wg.Wait()
}

func TestRedactorWriter(t *testing.T) {
	const secret = "tok-1234567890"
	r := NewRedactor()
	r.Add("t", secret)
	r.Add("pem", "-----BEGIN KEY-----\nAAAA\nBBBB\n-----END KEY-----")

	for _, tc := range []struct {
		name   string
		writes []string
		want   string
	}{
		{"whole", []string{"a " + secret + " b\n"}, "a [redacted:t] b\n"},
		{"split", []string{"a tok-12345", "67890 b\n"}, "a [redacted:t] b\n"},
		{"byte by byte", strings.Split("x "+secret+" y\nz", ""), "x [redacted:t] y\nz"},
		{"partial line flushed", []string{"no newline " + secret}, "no newline [redacted:t]"},
		{"multi-line secret split", []string{"key: -----BEGIN KEY-----\nAAAA\n", "BBBB\n-----END KEY-----\nok\n"}, "key: [redacted:pem]\nok\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			w := r.Writer(&out)
			for _, s := range tc.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
				if strings.Contains(out.String(), "tok-") || strings.Contains(out.String(), "AAAA") {
					t.Fatalf("a fragment of a secret leaked: %q", out.String())
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("got %q, want %q", out.String(), tc.want)
			}
		})
	}

	t.Run("lines pass at once", func(t *testing.T) {
		var out bytes.Buffer
		w := r.Writer(&out)
		w.Write([]byte("one\ntwo"))
		if out.String() != "one\n" {
			t.Errorf("after a write ending mid-line, passed on %q, want the complete line", out.String())
		}
	})

	t.Run("long line bound", func(t *testing.T) {
		var out bytes.Buffer
		w := r.Writer(&out)
		long := strings.Repeat("x", maxPending+100)
		w.Write([]byte(long + "tok-12345"))
		if out.Len() == 0 || out.Len() > len(long) {
			t.Fatalf("passed on %d bytes of a %d-byte line", out.Len(), len(long)+9)
		}
		w.Write([]byte("67890\n"))
		if !strings.HasSuffix(out.String(), "x[redacted:t]\n") {
			t.Errorf("secret across the size bound: tail %q", out.String()[out.Len()-20:])
		}
	})
}

func TestRedacting(t *testing.T) {
	ctx := context.Background()
	store := NewFake()
	store.Set(ctx, "gh/TOKEN", "ghp_redact_me")
	r := NewRedactor()
	v, used, err := Expand(ctx, "Bearer ${keyring:gh/TOKEN}", Redacting(store, r), nil)
	if err != nil || len(used) != 1 {
		t.Fatal(v, used, err)
	}
	if got := r.String("child said " + v); got != "child said Bearer [redacted:gh/TOKEN]" {
		t.Errorf("a resolved secret was not registered for redaction: %q", got)
	}
	rs := Redacting(store, r)
	rs.Set(ctx, "new/KEY", "fresh-value")
	if got := r.String("fresh-value"); got != "[redacted:new/KEY]" {
		t.Errorf("a value just set was not registered: %q", got)
	}
}

// benchResult is a 4 KiB tool result without secrets.
func benchResult() []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < 4096; i++ {
		fmt.Fprintf(&b, `{"line":%d,"text":"the quick brown fox jumps over the lazy dog"},`, i)
	}
	return b.Bytes()[:4096]
}

func benchRedactor() *Redactor {
	r := NewRedactor()
	for i := range 10 {
		r.Add(fmt.Sprint("server/KEY", i), fmt.Sprintf("sk-%d-a8f5f167f44f4964e6c998dee827110c", i))
	}
	return r
}

func BenchmarkRedactNoMatch(b *testing.B) {
	r, in := benchRedactor(), benchResult()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if out := r.Bytes(in); len(out) != len(in) {
			b.Fatal("changed")
		}
	}
}

func BenchmarkRedactMatch(b *testing.B) {
	r, in := benchRedactor(), benchResult()
	in = append(in[:2048:2048], append([]byte("sk-3-a8f5f167f44f4964e6c998dee827110c"), in[2048:]...)...)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		r.Bytes(in)
	}
}

// TestRedactorQuotedForms: a value holding a quote, a backslash, a control
// character or non-ASCII text reaches logs quoted, and often quoted twice (slog's
// text handler quoting a %q-quoted line, or a child's JSON log line); each of
// those spellings is replaced whole.
func TestRedactorQuotedForms(t *testing.T) {
	const value = "pa\"ss\\w\x01rd-é-7f3a"
	r := NewRedactor()
	r.Add("k", value)
	jsonQuote := func(s string) string {
		b, _ := json.Marshal(s)
		return string(b)
	}
	for _, tc := range []struct{ name, in string }{
		{"as is", value},
		{"JSON", jsonQuote(value)},
		{"Go %q", fmt.Sprintf("%q", value)},
		{"Go %+q", fmt.Sprintf("%+q", value)},
		{"%q of %q (slog quoting a quoted line)", strconv.Quote(strconv.Quote(value))},
		{"%q of JSON (a child's JSON log line, logged)", strconv.Quote(jsonQuote(value))},
		{"JSON of %q", jsonQuote(strconv.Quote(value))},
		{"JSON of JSON", jsonQuote(jsonQuote(value))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := "line=" + tc.in + " end"
			got := r.String(in)
			if !strings.Contains(got, "[redacted:k]") || strings.Contains(got, "7f3a") {
				t.Errorf("String(%s) = %s: the value is not replaced whole", in, got)
			}
		})
	}
}
