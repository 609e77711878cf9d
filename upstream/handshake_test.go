package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
)

// answering is a Transport whose server answers each request with the next of
// its answers: a response's JSON, "closed" (the connection ended) or "silent"
// (no answer until the request's context ends). It records what was sent.
type answering struct {
	answers []string
	sent    []Request
}

func (a *answering) Send(ctx context.Context, req Request, _ func() (func(), error)) (*jsonrpc.Message, error) {
	a.sent = append(a.sent, req)
	next := a.answers[0]
	a.answers = a.answers[1:]
	switch next {
	case "closed":
		return nil, transport.ErrTransportClosed
	case "silent":
		<-ctx.Done()
		return nil, ctx.Err()
	}
	m := new(jsonrpc.Message)
	if err := json.Unmarshal([]byte(next), m); err != nil {
		panic(err)
	}
	return m, nil
}

func (*answering) Start(context.Context) error               { return nil }
func (*answering) Notify(context.Context, string, any) error { return nil }
func (*answering) Receive(Handlers)                          {}
func (*answering) Remote() bool                              { return false }
func (*answering) MCP() transport.Interface                  { return nil }
func (*answering) Close() error                              { return nil }

func TestDiscover(t *testing.T) {
	const found = `{"result":{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"},"instructions":"be kind"}}`
	unsupported := func(versions string) string {
		return `{"error":{"code":-32022,"message":"unsupported","data":{"supported":` + versions + `}}}`
	}
	tests := []struct {
		name      string
		answers   []string
		bound     time.Duration
		version   string // the era found
		versions  string // the versions asked, in order
		err       string // in the error, "" for none
		notModern bool
	}{
		{"answers", []string{found}, 0, "2026-07-28", "2026-07-28", "", false},
		{"names another modern version", []string{unsupported(`["2027-01-01","2026-07-28"]`), found}, 0, "2026-07-28", "2099-01-01 2026-07-28", "", false},
		{"names legacy versions only", []string{unsupported(`["2025-11-25"]`)}, 0, "", "2099-01-01", "unsupported", true},
		{"names none Nexus speaks", []string{unsupported(`["1999-01-01"]`)}, 0, "", "2099-01-01", "none of which Nexus speaks", false},
		{"a legacy server's error", []string{`{"error":{"code":-32601,"message":"Method not found"}}`}, 0, "", "2026-07-28", "Method not found", true},
		{"a modern server's refusal", []string{`{"error":{"code":-32021,"message":"needs sampling"}}`}, 0, "", "2026-07-28", "kid refused server/discover: needs sampling", false},
		{"a result that does not decode", []string{`{"result":{"capabilities":7}}`}, 0, "", "2026-07-28", "does not decode", true},
		{"silence past the bound", []string{"silent"}, 10 * time.Millisecond, "", "2026-07-28", "no answer to server/discover within 10ms", true},
		{"the connection ended", []string{"closed"}, 0, "", "2026-07-28", "transport closed", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := &answering{answers: tc.answers}
			n := 0
			id := func() json.RawMessage { n++; return jsonrpc.StringID("d-" + strconv.Itoa(n)) }
			first, _, _ := strings.Cut(tc.versions, " ") // the version asked first
			m := ModernMeta{Version: first, Client: mcp.Implementation{Name: "nexus", Version: "1"}}
			e, err := Discover(context.Background(), tr, "kid", m, tc.bound, id)
			var asked []string
			for _, req := range tr.sent {
				var p struct {
					Meta map[string]string `json:"_meta"`
				}
				_ = json.Unmarshal(req.Params.(json.RawMessage), &p)
				asked = append(asked, p.Meta["io.modelcontextprotocol/protocolVersion"])
				if req.Method != "server/discover" || req.Header.Get("Mcp-Method") != "server/discover" {
					t.Errorf("sent %s with headers %v", req.Method, req.Header)
				}
			}
			if strings.Join(asked, " ") != tc.versions {
				t.Errorf("asked at %v, want %s", asked, tc.versions)
			}
			if e.Version != tc.version || tc.version != "" && e.Instructions != "be kind" {
				t.Errorf("found %+v, want version %q", e, tc.version)
			}
			if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want one saying %q", err, tc.err)
			}
			if nm := (*NotModernError)(nil); errors.As(err, &nm) != tc.notModern {
				t.Errorf("error %v: a NotModernError %v, want %v", err, !tc.notModern, tc.notModern)
			}
		})
	}
}

// handshaking is a Transport whose mcp-go face answers initialize as a legacy
// server at version, or refuses it when refuse is set, and whose Send answers
// as answering does. sent records every method, on either face, in order.
type handshaking struct {
	answering
	version string
	refuse  bool
	sent    []string
	caps    json.RawMessage
}

func (h *handshaking) MCP() transport.Interface { return handshakeMCP{h} }

func (h *handshaking) Send(ctx context.Context, req Request, gate func() (func(), error)) (*jsonrpc.Message, error) {
	h.sent = append(h.sent, req.Method)
	return h.answering.Send(ctx, req, gate)
}

type handshakeMCP struct{ h *handshaking }

func (m handshakeMCP) SendRequest(_ context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	m.h.sent = append(m.h.sent, req.Method)
	b, _ := json.Marshal(req.Params)
	var p struct {
		Capabilities json.RawMessage `json:"capabilities"`
	}
	_ = json.Unmarshal(b, &p)
	m.h.caps = p.Capabilities
	if m.h.refuse {
		return &transport.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: req.ID, Error: &mcp.JSONRPCErrorDetails{Code: -32601, Message: "Method not found"}}, nil
	}
	result := `{"protocolVersion":"` + m.h.version + `","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"s","version":"1"},"instructions":"hello"}`
	return &transport.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: req.ID, Result: json.RawMessage(result)}, nil
}

func (m handshakeMCP) SendNotification(_ context.Context, n mcp.JSONRPCNotification) error {
	m.h.sent = append(m.h.sent, n.Method)
	return nil
}

func (handshakeMCP) Start(context.Context) error                          { return nil }
func (handshakeMCP) SetNotificationHandler(func(mcp.JSONRPCNotification)) {}
func (handshakeMCP) Close() error                                         { return nil }
func (handshakeMCP) GetSessionId() string                                 { return "" }

// TestInitialize: the legacy handshake is initialize then
// notifications/initialized, declaring the capabilities given, and finds the
// version the server chose; a version mcp-go cannot speak is refused.
func TestInitialize(t *testing.T) {
	caps := mcp.ClientCapabilities{Sampling: &mcp.SamplingCapability{}}
	tests := []struct {
		name, version string
		ok            bool
	}{
		{"the latest legacy version", "2025-11-25", true},
		{"an older one", "2025-03-26", true},
		{"one no revision has", "1999-01-01", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := &handshaking{version: tc.version}
			e, err := Initialize(context.Background(), tr, "2025-11-25", mcp.Implementation{Name: "nexus", Version: "1"}, caps)
			if !tc.ok {
				if err == nil {
					t.Errorf("a server at %s was taken: %+v", tc.version, e)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if e.Version != tc.version || e.Modern() || e.Instructions != "hello" || e.Caps.Tools == nil || !e.Caps.Tools.ListChanged {
				t.Errorf("found %+v", e)
			}
			if strings.Join(tr.sent, " ") != "initialize notifications/initialized" {
				t.Errorf("sent %v", tr.sent)
			}
			if !strings.Contains(string(tr.caps), `"sampling":{}`) {
				t.Errorf("declared %s, want sampling", tr.caps)
			}
		})
	}
}
