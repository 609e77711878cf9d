package jsonrpc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestLineReader(t *testing.T) {
	big := `{"jsonrpc":"2.0","method":"tools/call","params":{"x":"` + strings.Repeat("y", 100) + `"},"id":"late"}`
	in := "short\n" + strings.Repeat("x", 100) + "\nafter\n" + big + "\nlast-without-newline"
	lr := &LineReader{r: bufio.NewReaderSize(strings.NewReader(in), 16), limit: 50}
	var got []string
	for {
		line, id, err := lr.Next()
		if errors.Is(err, ErrTooLarge) {
			got = append(got, "<too large "+string(id)+">")
			continue
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.TrimSpace(string(line)))
	}
	want := []string{"short", "<too large >", "after", `<too large "late">`, "last-without-newline"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestIDScanner(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"x"}`, `1`},
		{`{"id" : "a\"b" ,"method":"x"}`, `"a\"b"`},
		{`{"params":{"id":9,"s":"\"id\":8"},"id":-3}`, `-3`},
		{`{"params":["id",{"id":2}],"id":"top"}`, `"top"`},
		{`{"method":"x","params":{"a":"` + strings.Repeat("z", 1000), ``}, // cut before any id
		{`{"id":{"nested":1}}`, ``},                                       // not an id
		{`{"id":null}`, ``},
		{`[{"id":1}]`, ``}, // a batch has no single id
		{`not json "id": 5`, ``},
	}
	for _, tc := range tests {
		for _, chunk := range []int{1, 3, len(tc.in)} { // the answer must not depend on how bytes arrive
			var sc IDScanner
			for i := 0; i < len(tc.in); i += chunk {
				sc.Write([]byte(tc.in[i:min(i+chunk, len(tc.in))]))
			}
			if got := string(sc.ID()); got != tc.want {
				t.Errorf("%.60s (chunks of %d): id %q, want %q", tc.in, chunk, got, tc.want)
			}
		}
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		in        string
		method    string // of the message decoded, when it is one
		errorLine string // the error response, when it is not
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, "ping", ""},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "notifications/initialized", ""},
		{`{"jsonrpc":"2.0","id":7,"method":`, "", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"malformed JSON-RPC message: unexpected end of JSON input"}}`},
		{`{"jsonrpc":"1.0","id":"a","method":"ping"}`, "", `{"jsonrpc":"2.0","id":"a","error":{"code":-32600,"message":"invalid request: \"jsonrpc\" must be \"2.0\""}}`},
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`, "", `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: an id must be a string or a number"}}`},
		{`{"jsonrpc":"2.0","id":4,"method":7}`, "", `{"jsonrpc":"2.0","id":4,"error":{"code":-32600,"message":"invalid request: \"method\" cannot be a number"}}`},
		{`12`, "", `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: a message is a JSON object, not a number"}}`},
		{`{"jsonrpc":"2.0"}`, "", `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: a message needs a method (request or notification) or an id (response)"}}`},
	}
	for _, tc := range tests {
		m, reply := Decode([]byte(tc.in))
		switch {
		case tc.errorLine != "" && string(reply) != tc.errorLine:
			t.Errorf("%s: answer %s, want %s", tc.in, reply, tc.errorLine)
		case tc.errorLine == "" && (m == nil || m.Method != tc.method):
			t.Errorf("%s: decoded %+v (answer %s), want method %q", tc.in, m, reply, tc.method)
		}
	}
}

func TestEncoders(t *testing.T) {
	tests := []struct{ got, want string }{
		{string(Response([]byte(`"r1"`), []byte(`{"content":[]}`), nil)), `{"jsonrpc":"2.0","id":"r1","result":{"content":[]}}`},
		{string(Response(nil, nil, nil)), `{"jsonrpc":"2.0","id":null,"result":{}}`},
		{string(ErrorResponse([]byte(`3`), CodeInvalidParams, "bad %s", "name")), `{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"bad name"}}`},
		{string(Notification("notifications/progress", map[string]any{"progress": 1})), `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`},
		{string(Request(StringID("nexus-1"), "tools/call", []byte("{\n \"name\": \"x\"\n}"))), `{"jsonrpc":"2.0","id":"nexus-1","method":"tools/call","params":{"name":"x"}}`},
		{string(AppendString(nil, "plain")), `"plain"`},
		{string(AppendString(nil, "a\"b<\n")), `"a\"b\u003c\n"`},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got  %s\nwant %s", tc.got, tc.want)
		}
	}
}

// TestResponseSized: a result is copied once into an answer made to measure,
// never into a buffer that must grow (a tools/list of 100 servers is megabytes).
func TestResponseSized(t *testing.T) {
	for _, id := range []string{"", "7", `"a-long-request-id-0123456789"`} {
		result := []byte(`{"tools":[` + strings.Repeat(`{"name":"x"},`, 1000) + `{"name":"y"}]}`)
		got := Response([]byte(id), result, nil)
		if len(got) != cap(got) {
			t.Errorf("id %q: answer of %d bytes in a buffer of %d", id, len(got), cap(got))
		}
	}
}

func TestLineWriter(t *testing.T) {
	var b strings.Builder
	w := NewLineWriter(&b)
	for _, msg := range []string{`{"a":1}`, "{\n  \"b\": 2\n}"} {
		if err := w.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := b.String(), "{\"a\":1}\n{\"b\":2}\n"; got != want {
		t.Errorf("wrote %q, want %q", got, want)
	}
	failing := NewLineWriter(errWriter{})
	first, second := failing.Write([]byte(`{}`)), failing.Write([]byte(`{}`))
	if first == nil || second == nil {
		t.Error("a failed stream accepted a message")
	}
}

type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

func TestCompact(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"a":1}`, `{"a":1}`},
		{"{\n  \"a\": 1\n}", `{"a":1}`},
		{"{\r\n  \"a\": [1,\r 2]\r\n}", `{"a":[1,2]}`},
		{`{"s":"a\nb"}`, `{"s":"a\nb"}`}, // an escaped newline is no line's end
		{"{ \"a\": 1 }", "{ \"a\": 1 }"}, // on one line already: left as it is
	}
	for _, tt := range tests {
		if got := string(Compact(json.RawMessage(tt.in))); got != tt.want {
			t.Errorf("Compact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// gatedWriter records each Write it is given; while held, a Write waits.
type gatedWriter struct {
	mu      sync.Mutex
	writes  []string
	entered chan struct{} // told of each Write as it begins
	hold    chan struct{} // a Write waits for it to close
	fail    error
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	g.entered <- struct{}{}
	<-g.hold
	g.mu.Lock()
	defer g.mu.Unlock()
	g.writes = append(g.writes, string(p))
	if g.fail != nil {
		return 0, g.fail
	}
	return len(p), nil
}

// TestLineWriterBatches checks that messages written while a write is under
// way leave together, in one write, each whole on its line; and that each of
// their writers learns how the write went.
func TestLineWriterBatches(t *testing.T) {
	tests := []struct {
		name string
		fail error
	}{
		{"written", nil},
		{"failed", io.ErrClosedPipe},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			under := &gatedWriter{entered: make(chan struct{}, 2), hold: make(chan struct{}), fail: tt.fail}
			w := NewLineWriter(under)
			const later = 5
			errs := make(chan error, later+1)
			go func() { errs <- w.Write([]byte(`{"n":0}`)) }()
			// The first message is being written (held); the next ones
			// gather behind it.
			<-under.entered
			for i := 1; i <= later; i++ {
				go func() { errs <- w.Write(fmt.Appendf(nil, "{\n \"n\": %d\n}", i)) }()
			}
			waitFor(t, func() bool { w.mu.Lock(); defer w.mu.Unlock(); return bytes.Count(w.buf, []byte("\n")) == later })
			close(under.hold)
			for range later + 1 {
				if err := <-errs; (err != nil) != (tt.fail != nil) || tt.fail != nil && !errors.Is(err, tt.fail) {
					t.Errorf("Write = %v, want %v", err, tt.fail)
				}
			}
			if tt.fail != nil {
				// The batch behind a failed write fails with it, unwritten:
				// no line goes out after a torn one.
				if len(under.writes) != 1 {
					t.Fatalf("%d writes after a failed one, want none: %q", len(under.writes)-1, under.writes)
				}
				if w.Write([]byte(`{}`)) == nil {
					t.Error("a failed stream accepted a message")
				}
				return
			}
			if len(under.writes) != 2 {
				t.Fatalf("%d writes, want 2 (the first, then the rest together): %q", len(under.writes), under.writes)
			}
			lines := strings.Split(strings.TrimSuffix(under.writes[1], "\n"), "\n")
			if len(lines) != later {
				t.Fatalf("the batch held %d lines, want %d: %q", len(lines), later, under.writes[1])
			}
			for _, l := range lines {
				if !json.Valid([]byte(l)) {
					t.Errorf("line %q is not a whole message", l)
				}
			}
		})
	}
}

// panicking panics at its first Write, after the second writer is waiting.
type panicking struct{ entered, hold chan struct{} }

func (p panicking) Write([]byte) (int, error) {
	p.entered <- struct{}{}
	<-p.hold
	panic("the writer broke")
}

// TestLineWriterPanic: a writer that panics leaves no one waiting for it.
func TestLineWriterPanic(t *testing.T) {
	under := panicking{entered: make(chan struct{}, 1), hold: make(chan struct{})}
	w := NewLineWriter(under)
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		w.Write([]byte(`{"n":0}`))
	}()
	<-under.entered
	second := make(chan error, 1)
	go func() { second <- w.Write([]byte(`{"n":1}`)) }()
	waitFor(t, func() bool { w.mu.Lock(); defer w.mu.Unlock(); return len(w.buf) > 0 })
	close(under.hold)
	if p := <-panicked; p == nil {
		t.Error("the writer's panic was swallowed")
	}
	select {
	case err := <-second:
		if err == nil {
			t.Error("the message behind a panicked write was taken for written")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the message behind a panicked write waits forever")
	}
}

// waitFor waits, a bounded time, until cond holds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 5000 {
		if cond() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the condition never held")
}
