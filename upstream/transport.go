package upstream

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/internal/jsonwalk"
)

// Transport is a connection to a child server, whatever carries it: a stdio
// Process, or one of mcp-go's client transports for a remote server (Remote).
// It speaks Nexus's own JSON-RPC vocabulary (internal/jsonrpc): ids and
// params stay JSON text, a child's error is a *jsonrpc.Error. mcp-go's types
// are met only inside Remote, which converts at its edge, and through MCP,
// which mcp-go's client drives for the handshake alone.
type Transport interface {
	// Start starts the process, or opens the connection.
	Start(ctx context.Context) error
	// Send sends req and waits for the answer: a response, whose Result or
	// Error is the child's. beforeWrite, when not nil, is the request's write
	// gate: it runs before the request leaves and may refuse it; the release
	// it returns runs once the request is on its way.
	Send(ctx context.Context, req Request, beforeWrite func() (func(), error)) (*jsonrpc.Message, error)
	// Notify sends the child a notification.
	Notify(ctx context.Context, method string, params any) error
	// Receive hands what the child sends unasked to h. It is called once,
	// before Start, so that nothing the child says as it starts is lost.
	Receive(h Handlers)
	// Remote reports a connection over the network. Such a connection has a
	// session the server may forget, is known to be alive by pings rather
	// than by a process's exit, and hands the requests its server sends
	// during a call the context of that call. A Process is none of these: its
	// exit is its end, and its requests carry nothing that names a call.
	Remote() bool
	// MCP is the transport as mcp-go's client drives it for the handshake,
	// with its optional interfaces (transport.HTTPConnection...) intact.
	MCP() transport.Interface
	// Close ends the connection (a process, gracefully).
	Close() error
}

// unsent is an error met before a request was written (its params could not
// be encoded): nothing reached the server, and nothing is wrong with the
// connection (NotSent).
type unsent struct{ err error }

func (e unsent) Error() string { return e.err.Error() }
func (e unsent) Unwrap() error { return e.err }
func (unsent) NotSent()        {}

// Request is a request to a child.
type Request struct {
	ID     json.RawMessage // JSON text: Nexus's ids are strings
	Method string
	// Params are JSON text (json.RawMessage, copied as they are) or a value
	// to encode; nil sends none.
	Params any
	// Header holds headers of the request's own for a remote child (a modern
	// HTTP request's Mcp-Method and Mcp-Param headers); a Process has none.
	Header http.Header
}

// Handlers receive what a child sends unasked.
type Handlers struct {
	// Notification receives a notification, its params a JSON object (see
	// notificationParams). It runs on the transport's reader: it must not
	// block.
	Notification func(method string, params json.RawMessage)
	// Request answers a request of the child's (sampling, elicitation,
	// roots): the result, or the error the child is answered with. ctx is, on
	// a remote connection, that of the call the request came during.
	Request func(ctx context.Context, req *jsonrpc.Message) (json.RawMessage, *jsonrpc.Error)
	// Lost is told, once, why the connection ended.
	Lost func(error)
}

// notificationParams are a notification's params as they reach the gateway:
// an object whose members are the child's own bytes (numbers past what a
// float64 holds stay as written), keys in sorted order, its _meta kept only
// when it is an object with members. Params that are not an object become {}.
func notificationParams(raw json.RawMessage) json.RawMessage {
	fields, err := jsonwalk.Members(raw)
	if len(raw) == 0 || err != nil {
		return json.RawMessage("{}")
	}
	if meta, ok := fields["_meta"]; ok {
		if m, err := jsonwalk.Members(meta); err != nil || len(m) == 0 {
			delete(fields, "_meta")
		} else {
			fields["_meta"] = jsonwalk.Object(m)
		}
	}
	return jsonwalk.Object(fields)
}

// Remote is the Transport of a remote child over one of mcp-go's client
// transports (SSE, streamable HTTP).
func Remote(t transport.Interface) Transport { return remote{t} }

type remote struct{ t transport.Interface }

func (r remote) Start(ctx context.Context) error { return r.t.Start(ctx) }
func (r remote) Close() error                    { return r.t.Close() }
func (remote) Remote() bool                      { return true }
func (r remote) MCP() transport.Interface        { return r.t }

// Send runs the write gate just before handing the request over: mcp-go's
// transports write it themselves.
func (r remote) Send(ctx context.Context, req Request, beforeWrite func() (func(), error)) (*jsonrpc.Message, error) {
	if beforeWrite != nil {
		release, err := beforeWrite()
		if err != nil {
			return nil, err
		}
		release()
	}
	resp, err := r.t.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcpID(req.ID), Method: req.Method, Params: req.Params, Header: req.Header})
	if err != nil {
		return nil, err
	}
	m := &jsonrpc.Message{JSONRPC: "2.0", ID: req.ID, Result: resp.Result}
	if e := resp.Error; e != nil {
		m.Result, m.Error = nil, &jsonrpc.Error{Code: e.Code, Message: e.Message, Data: e.Data}
	}
	return m, nil
}

func (r remote) Notify(ctx context.Context, method string, params any) error {
	n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: method}}
	if params != nil {
		raw, err := json.Marshal(params)
		if err != nil {
			return err
		}
		fields, err := jsonwalk.Members(raw)
		if err != nil {
			return err
		}
		n.Params.AdditionalFields = make(map[string]any, len(fields))
		for k, v := range fields {
			n.Params.AdditionalFields[k] = v
		}
	}
	return r.t.SendNotification(ctx, n)
}

// Receive sets the mcp-go transport's handlers, converting at the edge.
func (r remote) Receive(h Handlers) {
	if h.Notification != nil {
		r.t.SetNotificationHandler(func(n mcp.JSONRPCNotification) {
			raw, err := json.Marshal(n.Params)
			if err != nil {
				raw = nil
			}
			h.Notification(n.Method, notificationParams(raw))
		})
	}
	if bi, ok := r.t.(transport.BidirectionalInterface); ok && h.Request != nil {
		bi.SetRequestHandler(func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
			id, err := json.Marshal(req.ID)
			if err != nil {
				return nil, err
			}
			m := &jsonrpc.Message{JSONRPC: "2.0", ID: id, Method: req.Method}
			if req.Params != nil {
				if m.Params, err = json.Marshal(req.Params); err != nil {
					return nil, err
				}
			}
			result, rpcErr := h.Request(ctx, m)
			if rpcErr != nil {
				return transport.NewJSONRPCErrorResponse(req.ID, rpcErr.Code, rpcErr.Message, rpcErr.Data), nil
			}
			return transport.NewJSONRPCResultResponse(req.ID, result), nil
		})
	}
	if lost, ok := r.t.(interface{ SetConnectionLostHandler(func(error)) }); ok && h.Lost != nil {
		lost.SetConnectionLostHandler(h.Lost)
	}
}

// mcpID is a request id as mcp-go holds ids. An integer is read as one, not
// through a float64 as mcp-go reads it: an id past 2^53 would go out as another.
func mcpID(raw json.RawMessage) mcp.RequestId {
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return mcp.NewRequestId(n)
	}
	var id mcp.RequestId
	_ = json.Unmarshal(raw, &id)
	return id
}
