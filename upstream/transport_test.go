package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// sentRequests is a remote transport that records when a request reaches it.
type sentRequests struct {
	transport.Interface // nil: only SendRequest is called
	steps               *[]string
}

func (s *sentRequests) SendRequest(_ context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	*s.steps = append(*s.steps, "sent")
	return &transport.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: req.ID}, nil
}

func TestRemoteSendRunsTheGateFirst(t *testing.T) {
	refused := errors.New("refused by the gate")
	tests := []struct {
		name     string
		gate     func(steps *[]string) func() (func(), error)
		wantErr  error
		wantStep []string
	}{
		{"no gate", func(*[]string) func() (func(), error) { return nil }, nil, []string{"sent"}},
		{"gate lets it", func(steps *[]string) func() (func(), error) {
			return func() (func(), error) {
				*steps = append(*steps, "gate")
				return func() { *steps = append(*steps, "released") }, nil
			}
		}, nil, []string{"gate", "released", "sent"}},
		{"gate refuses", func(steps *[]string) func() (func(), error) {
			return func() (func(), error) {
				*steps = append(*steps, "gate")
				return nil, refused
			}
		}, refused, []string{"gate"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var steps []string
			child := &sentRequests{steps: &steps}
			r := Remote(child)
			if !r.Remote() || r.MCP() != transport.Interface(child) {
				t.Fatal("Remote does not say it is remote, or hides its mcp-go transport")
			}
			req := Request{ID: json.RawMessage("1"), Method: "tools/call"}
			_, err := r.Send(context.Background(), req, tt.gate(&steps))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Send: %v, want %v", err, tt.wantErr)
			}
			if !slices.Equal(steps, tt.wantStep) {
				t.Errorf("steps %v, want %v", steps, tt.wantStep)
			}
		})
	}
}
