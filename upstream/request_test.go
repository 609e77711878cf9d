package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/oauth"
)

// scripted is a Transport whose Send fails with err, or answers with
// answer, and which records the requests and notifications sent.
type scripted struct {
	answering
	err      error
	answer   *jsonrpc.Message
	remote   bool
	requests []Request
	notified []string
}

func (s *scripted) Send(ctx context.Context, req Request, gate func() (func(), error)) (*jsonrpc.Message, error) {
	s.requests = append(s.requests, req)
	if _, err := encodeRequest(req); err != nil {
		return nil, err // as a Process does
	}
	if gate != nil {
		release, err := gate()
		if err != nil {
			return nil, err
		}
		release()
	}
	if s.err != nil {
		return nil, s.err
	}
	return s.answer, nil
}

func (s *scripted) Notify(_ context.Context, method string, _ any) error {
	s.notified = append(s.notified, method)
	return nil
}

func (s *scripted) Remote() bool { return s.remote }

// refused is a gate's refusal: the request was never written.
type refused struct{}

func (refused) Error() string { return "refused by the gate" }
func (refused) NotSent()      {}

// TestRequestErrors: what a request's failure says, and what it does to its
// connection.
func TestRequestErrors(t *testing.T) {
	cancelled, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("the client gave up"))
	tests := []struct {
		name     string
		ctx      context.Context
		tr       *scripted
		gate     func() (func(), error)
		params   any    // the request's; {} when nil
		is       error  // errors.Is the result
		says     string // in the error
		broken   bool   // a *BrokenError
		lost     bool   // the connection ended
		notified string // the notifications sent
	}{
		{name: "an answer", tr: &scripted{answer: &jsonrpc.Message{Result: json.RawMessage(`{"ok":true}`)}}},
		{name: "the server's error", tr: &scripted{answer: &jsonrpc.Message{Error: &jsonrpc.Error{Code: -32601, Message: "no such method"}}}, says: "no such method"},
		{name: "a remote server forgot the session", tr: &scripted{remote: true, answer: &jsonrpc.Message{Error: &jsonrpc.Error{Code: -32600, Message: "Session not found"}}}, is: ErrSessionLost, lost: true},
		{name: "a local server's same words", tr: &scripted{answer: &jsonrpc.Message{Error: &jsonrpc.Error{Code: -32600, Message: "Session not found"}}}, says: "Session not found"},
		{name: "the session terminated", tr: &scripted{err: transport.ErrSessionTerminated}, is: ErrSessionLost, lost: true},
		{name: "the transport closed", tr: &scripted{err: transport.ErrTransportClosed}, is: ErrGone, lost: true},
		{name: "the caller gave up", ctx: cancelled, tr: &scripted{err: context.Canceled}, says: "the client gave up", notified: "notifications/cancelled"},
		{name: "a login needed", tr: &scripted{err: &oauth.LoginError{Server: "kid"}}, says: "needs login", lost: true},
		{name: "a scope step-up", tr: &scripted{err: &oauth.LoginError{Server: "kid", Scope: "write"}}, says: "needs login"},
		{name: "the gate refused", tr: &scripted{}, gate: func() (func(), error) { return nil, refused{} }, says: "refused by the gate"},
		{name: "params that cannot be encoded", tr: &scripted{}, params: map[string]any{"f": func() {}}, says: "encoding the params"},
		{name: "anything else", tr: &scripted{err: errors.New("connection reset")}, says: "connection reset", broken: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			c := NewConn()
			c.Transport = tc.tr
			params := tc.params
			if params == nil {
				params = map[string]any{}
			}
			raw, err := c.RequestWith(ctx, "tools/call", params, Outgoing{BeforeWrite: tc.gate})
			switch {
			case tc.is == nil && tc.says == "":
				if err != nil || string(raw) != `{"ok":true}` {
					t.Fatalf("got %s, %v; want the answer", raw, err)
				}
			case tc.is != nil && !errors.Is(err, tc.is), tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)):
				t.Fatalf("error %v, want %v saying %q", err, tc.is, tc.says)
			}
			var broken *BrokenError
			if isBroken := errors.As(err, &broken); isBroken != tc.broken || isBroken && broken.Conn != c {
				t.Errorf("error %v: a BrokenError of the connection %v, want %v", err, isBroken && broken.Conn == c, tc.broken)
			}
			if c.Lost() != tc.lost {
				t.Errorf("the connection lost %v, want %v", c.Lost(), tc.lost)
			}
			if got := strings.Join(tc.tr.notified, " "); got != tc.notified {
				t.Errorf("notified %q, want %q", got, tc.notified)
			}
			if !c.Idle() {
				t.Error("the request is still counted under way")
			}
		})
	}
}

// TestDialects: what each era's dialect does to a request, to a legacy
// request it has no method for, and to a notification's params.
func TestDialects(t *testing.T) {
	ok := &jsonrpc.Message{Result: json.RawMessage(`{}`)}

	legacy := NewConn()
	tr := &scripted{answer: ok}
	legacy.Transport = tr
	legacy.Adopt(Era{Version: "2025-11-25"}, "test")
	if legacy.Modern() || !legacy.Dialect().KeepsSession() {
		t.Fatal("a 2025-11-25 connection is not legacy")
	}
	if _, err := legacy.Request(t.Context(), "logging/setLevel", map[string]any{"level": "debug"}); err != nil {
		t.Fatal(err)
	}
	legacy.Dialect().Flush(t.Context())
	var methods []string
	for _, r := range tr.requests {
		methods = append(methods, r.Method)
	}
	if got := strings.Join(methods, " "); got != "logging/setLevel ping ping" {
		t.Errorf("a legacy connection sent %q, want the request and two pings", got)
	}

	modern := NewConn()
	tr = &scripted{answer: ok}
	modern.Transport, modern.Info = tr, mcp.Implementation{Name: "nexus", Version: "9"}
	modern.Declared = mcp.ClientCapabilities{Sampling: &mcp.SamplingCapability{}}
	modern.Adopt(Era{Version: "2026-07-28"}, "test")
	if !modern.Modern() || modern.Dialect().KeepsSession() {
		t.Fatal("a 2026-07-28 connection is not modern")
	}
	if _, err := modern.Request(t.Context(), "logging/setLevel", map[string]any{"level": "debug"}); err != nil {
		t.Fatal(err)
	}
	var invalid *jsonrpc.Error
	if _, err := modern.Request(t.Context(), "logging/setLevel", "not an object"); !errors.As(err, &invalid) || invalid.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("a setLevel whose params do not decode: %v, want invalid params", err)
	}
	if _, err := modern.Request(t.Context(), "tools/list", nil); err != nil {
		t.Fatal(err)
	}
	if len(tr.requests) != 1 || tr.requests[0].Method != "tools/list" {
		t.Fatalf("a modern connection sent %v, want tools/list alone (setLevel is its own)", tr.requests)
	}
	params, _ := tr.requests[0].Params.(json.RawMessage)
	for _, want := range []string{`"io.modelcontextprotocol/logLevel":"debug"`, `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`, `"version":"9"`, `"sampling":{}`} {
		if !strings.Contains(string(params), want) {
			t.Errorf("a modern request's params %s, want %s in _meta", params, want)
		}
	}
	if _, err := modern.Request(t.Context(), "ping", nil); err != nil || tr.requests[len(tr.requests)-1].Method != "server/discover" {
		t.Errorf("a modern ping: %v, sent as %s; want server/discover", err, tr.requests[len(tr.requests)-1].Method)
	}
	if _, err := modern.Request(t.Context(), "tools/list", "not an object"); err == nil || modern.Lost() {
		t.Errorf("params a modern request cannot carry _meta in: %v, the connection lost %v; want an error and the connection alive", err, modern.Lost())
	}
	modern.Level = func() string { return "error" }
	if m := modern.ModernMeta("2026-07-28"); m.LogLevel != "error" {
		t.Errorf("with Level set, a modern request asks for %q, want its session's level", m.LogLevel)
	}

	tagged := json.RawMessage(`{"uri":"a://1","_meta":{"io.modelcontextprotocol/subscriptionId":"s1"}}`)
	if got := string(modern.Dialect().Received(tagged)); got != `{"uri":"a://1"}` {
		t.Errorf("a modern notification's params %s, want the subscription id dropped", got)
	}
	if got := string(legacy.Dialect().Received(tagged)); got != string(tagged) {
		t.Errorf("a legacy notification's params %s, want them as they came", got)
	}
}

// TestDoubt: a broken request leaves a remote connection in doubt, held for a
// ping's verdict, and ends a local one.
func TestDoubt(t *testing.T) {
	local, remote := NewConn(), NewConn()
	local.Transport, remote.Transport = &scripted{}, &scripted{remote: true}
	local.Doubt()
	remote.Doubt()
	if !local.Lost() {
		t.Error("a local connection in doubt lives on")
	}
	if remote.Lost() || remote.Doubts.Held() == nil {
		t.Errorf("a remote connection in doubt: lost %v, held %v; want it alive and held", remote.Lost(), remote.Doubts.Held() != nil)
	}
}
