package upstream

import (
	"context"

	"github.com/mark3labs/mcp-go/client/transport"
)

// Transport is a connection to a child server, whatever carries it: a stdio
// Process, or one of mcp-go's client transports for a remote server (Remote).
// The gateway sends its requests through Send and asks Remote what kind of
// connection it has, never the transport's type.
type Transport interface {
	// Send sends req and waits for the answer. beforeWrite, when not nil, is
	// the request's write gate: it runs before the request leaves and may
	// refuse it; the release it returns runs once the request is on its way.
	Send(ctx context.Context, req transport.JSONRPCRequest, beforeWrite func() (func(), error)) (*transport.JSONRPCResponse, error)
	// Remote reports a connection over the network. Such a connection has a
	// session the server may forget, is known to be alive by pings rather
	// than by a process's exit, and hands the requests its server sends
	// during a call the context of that call. A Process is none of these: its
	// exit is its end, and its requests carry nothing that names a call.
	Remote() bool
	// MCP is the transport as mcp-go's client drives it (the handshake), with
	// its optional interfaces (transport.HTTPConnection...) intact.
	MCP() transport.Interface
}

// Remote is the Transport of a remote child over one of mcp-go's client
// transports (SSE, streamable HTTP).
func Remote(t transport.Interface) Transport { return remote{t} }

type remote struct{ t transport.Interface }

// Send runs the write gate just before handing the request over: mcp-go's
// transports write it themselves.
func (r remote) Send(ctx context.Context, req transport.JSONRPCRequest, beforeWrite func() (func(), error)) (*transport.JSONRPCResponse, error) {
	if beforeWrite != nil {
		release, err := beforeWrite()
		if err != nil {
			return nil, err
		}
		release()
	}
	return r.t.SendRequest(ctx, req)
}

func (remote) Remote() bool               { return true }
func (r remote) MCP() transport.Interface { return r.t }

// Remote reports false: a Process is a local child (see Transport).
func (*Process) Remote() bool { return false }

// MCP is the process itself, which is also an mcp-go transport.
func (p *Process) MCP() transport.Interface { return p }

var _ Transport = (*Process)(nil)
