package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
)

// TestMain makes the test binary a stdio child when NEXUS_TEST_UPSTREAM_CHILD is
// set: it answers "echo" with its params, "big" with a result over any small
// bound, logs each method it sees on stderr, and exits on "exit".
func TestMain(m *testing.M) {
	if os.Getenv("NEXUS_TEST_UPSTREAM_CHILD") != "" {
		child()
		return
	}
	os.Exit(m.Run())
}

func child() {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &req) != nil {
			continue
		}
		fmt.Fprintln(os.Stderr, "saw", req.Method)
		switch req.Method {
		case "echo":
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"params":%s}}`+"\n", req.ID, req.Params)
		case "big":
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"text":%q}}`+"\n", req.ID, strings.Repeat("x", 4096))
		case "exit":
			os.Exit(3)
		case "notify":
			fmt.Println(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":{"n":12345678901234567891}}}`)
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", req.ID)
		case "ask":
			// A request of the child's own, with an id no float64 holds;
			// the answer to it is what the child answers with.
			fmt.Println(`{"jsonrpc":"2.0","id":9007199254740993,"method":"roots/list","params":{"x":1}}`)
			if !in.Scan() {
				return
			}
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"answer":%s}}`+"\n", req.ID, in.Bytes())
		}
	}
}

func startChild(t *testing.T) *Process {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "NEXUS_TEST_UPSTREAM_CHILD=1")
	p := NewProcess(cmd, Options{Name: "kid", Logger: slog.New(slog.DiscardHandler), MaxMessage: 1024})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func request(id, method string) Request {
	return Request{ID: jsonrpc.StringID(id), Method: method, Params: json.RawMessage(`{"n":1}`)}
}

// TestProcessRequests: a stdio child's answers come back to the request they
// answer; a write gate that refuses keeps the request from the child; an
// over-size answer fails its request alone; the child's exit fails what waits.
func TestProcessRequests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := startChild(t)

	resp, err := p.Send(ctx, request("a-1", "echo"), nil)
	if err != nil || string(resp.Result) != `{"params":{"n":1}}` || string(resp.ID) != `"a-1"` {
		t.Fatalf("echo: %+v, %v", resp, err)
	}

	refused := errors.New("the policy changed")
	gated := 0
	for _, tc := range []struct {
		name  string
		gate  func() (func(), error)
		wants error
	}{
		{"a gate that lets it go", func() (func(), error) { gated++; return func() { gated++ }, nil }, nil},
		{"a gate that refuses", func() (func(), error) { return nil, refused }, refused},
	} {
		_, err := p.Send(ctx, request("g-"+tc.name, "echo"), tc.gate)
		if !errors.Is(err, tc.wants) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.wants)
		}
	}
	if gated != 2 {
		t.Errorf("the gate that let the request go was entered and released %d times in all, want 2", gated)
	}

	var tooLarge *TooLargeError
	if _, err := p.Send(ctx, request("b-1", "big"), nil); !errors.As(err, &tooLarge) {
		t.Errorf("an over-size answer: %v, want a TooLargeError", err)
	}
	if resp, err := p.Send(ctx, request("a-2", "echo"), nil); err != nil || string(resp.ID) != `"a-2"` {
		t.Errorf("the request after an over-size answer: %+v, %v", resp, err)
	}

	// The refused request never reached the child: what it saw, in order.
	if _, err := p.Send(ctx, request("x-1", "exit"), nil); !errors.Is(err, transport.ErrTransportClosed) {
		t.Errorf("a request the child exits on: %v, want the transport closed", err)
	}
	want := "saw echo\nsaw echo\nsaw big\nsaw echo\nsaw exit"
	waitUntil(t, func() bool { return p.tail.String() == want }, func() string { return p.tail.String() })
	if _, err := p.Send(ctx, request("a-3", "echo"), nil); !errors.Is(err, transport.ErrTransportClosed) {
		t.Errorf("a request after the exit: %v, want the transport closed", err)
	}
}

func waitUntil(t *testing.T, cond func() bool, got func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("the child's stderr: %q", got())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNotificationParamsKeepTheChildsBytes(t *testing.T) {
	tests := []struct {
		name, params, want string
	}{
		{"numbers no float64 holds", `{"data":{"id":12345678901234567891,"r":1.0,"x":1e400}}`, `{"data":{"id":12345678901234567891,"r":1.0,"x":1e400}}`},
		{"meta kept too", `{"_meta":{"progressToken":9007199254740993},"progress":1}`, `{"_meta":{"progressToken":9007199254740993},"progress":1}`},
		{"members sorted, nested order kept", `{"z":1,"data":{"b":1,"a":2}}`, `{"data":{"b":1,"a":2},"z":1}`},
		{"empty meta dropped", `{"_meta":{},"level":"info"}`, `{"level":"info"}`},
		{"meta that is no object dropped", `{"_meta":"x","level":"info"}`, `{"level":"info"}`},
		{"not an object", `[1,2]`, `{}`},
		{"none", ``, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := notificationParams(json.RawMessage(tt.params)); string(got) != tt.want {
				t.Errorf("params %s reach the gateway as %s, want %s", tt.params, got, tt.want)
			}
		})
	}
}

func TestRequestIDComesBackAsSent(t *testing.T) {
	for _, raw := range []string{`1`, `0`, `-7`, `9007199254740993`, `9223372036854775807`, `"abc"`, `"9007199254740993"`} {
		got, err := json.Marshal(mcpID(json.RawMessage(raw)))
		if err != nil || string(got) != raw {
			t.Errorf("request id %s is answered with id %s (%v)", raw, got, err)
		}
	}
}

// TestProcessReceives: what a child sends unasked reaches the handlers given
// to Receive, a notification's params as the child wrote them and a request
// answered under the very id it came with; with no handler, a request of the
// child's is refused, not left waiting.
func TestProcessReceives(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tests := []struct {
		name    string
		request func(context.Context, *jsonrpc.Message) (json.RawMessage, *jsonrpc.Error)
		want    string
	}{
		{"answered", func(_ context.Context, m *jsonrpc.Message) (json.RawMessage, *jsonrpc.Error) {
			return json.RawMessage(`{"roots":[],"asked":` + string(m.Params) + `}`), nil
		}, `{"answer":{"jsonrpc":"2.0","id":9007199254740993,"result":{"roots":[],"asked":{"x":1}}}}`},
		{"refused", func(context.Context, *jsonrpc.Message) (json.RawMessage, *jsonrpc.Error) {
			return nil, &jsonrpc.Error{Code: -32601, Message: "no"}
		}, `{"answer":{"jsonrpc":"2.0","id":9007199254740993,"error":{"code":-32601,"message":"no"}}}`},
		{"no handler", nil, `{"answer":{"jsonrpc":"2.0","id":9007199254740993,"error":{"code":-32601,"message":"no handler for roots/list"}}}`},
		{"answered pretty-printed", func(context.Context, *jsonrpc.Message) (json.RawMessage, *jsonrpc.Error) {
			return json.RawMessage("{\n  \"roots\": [],\r\n  \"text\": \"a\\nb\"\n}"), nil // as a client may write it
		}, `{"answer":{"jsonrpc":"2.0","id":9007199254740993,"result":{"roots":[],"text":"a\nb"}}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "NEXUS_TEST_UPSTREAM_CHILD=1")
			p := NewProcess(cmd, Options{Name: "kid", Logger: slog.New(slog.DiscardHandler), MaxMessage: 1024})
			notes := make(chan string, 1)
			p.Receive(Handlers{
				Notification: func(method string, params json.RawMessage) { notes <- method + " " + string(params) },
				Request:      tc.request,
			})
			if err := p.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			resp, err := p.Send(ctx, request("n-1", "notify"), nil)
			if err != nil || resp.Error != nil {
				t.Fatalf("notify: %+v, %v", resp, err)
			}
			if got, want := <-notes, `notifications/message {"data":{"n":12345678901234567891},"level":"info"}`; got != want {
				t.Errorf("the notification reached the handler as %s, want %s", got, want)
			}
			resp, err = p.Send(ctx, request("q-1", "ask"), nil)
			if err != nil || string(resp.Result) != tc.want {
				t.Errorf("the child's request was answered with %s (%v), want %s", resp.Result, err, tc.want)
			}
		})
	}
}
