package aggregation

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nexus-mcp/nexus/internal/jsonrpc"
)

// childRequestWait bounds how long a child's request waits for the client: sampling
// and elicitation may wait on a person, but not forever.
const childRequestWait = 10 * time.Minute

// childRequests answers the requests a child sends its client. Sampling, elicitation
// and roots go to the client of the call they belong to, and only while that call is
// in flight on the child, and only when the call's agent may see the server:
//   - an HTTP child's request that arrives on a call's response stream carries that
//     call's context, so it goes to that call's session;
//   - otherwise (a stdio child's request carries no trace of its call) it goes to the
//     one session with calls in flight on that child;
//   - a connection that serves one client session ("sessions": "client") sends
//     everything to that client, in a call or not (ownerCaller);
//   - anything else is refused with the reason, except roots/list, which is answered
//     with an empty list (a child that asks at start must not fail).
//
// A child has at most limits.maxChildRequests requests waiting on clients at once;
// past it a request is refused at once, so a child's flood holds neither goroutines
// nor the requests' bytes in the gateway for the wait.
func (g *Gateway) childRequests(cn *conn) transport.RequestHandler {
	waiting := make(chan struct{}, g.cfg.Load().Limits.ChildRequests())
	refused := newRateLog(g.log, slog.LevelInfo, "requests from a server refused", time.Second)
	return func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		if req.Method == string(mcp.MethodPing) {
			return transport.NewJSONRPCResultResponse(req.ID, json.RawMessage("{}")), nil
		}
		cn.callers.markAsked() // whatever the client answers, the calls in flight are not shareable
		select {
		case waiting <- struct{}{}:
			defer func() { <-waiting }()
		default:
			refused.add("server", cn.server, "method", req.Method, "reason", "too many waiting on clients")
			return transport.NewJSONRPCErrorResponse(req.ID, jsonrpc.CodeInternal, fmt.Sprintf(
				"Nexus cannot forward %s: server %s has %d requests waiting on clients, at most %d (limits.maxChildRequests)",
				req.Method, cn.server, cap(waiting), cap(waiting)), nil), nil
		}
		return g.forwardChildRequest(ctx, cn, req, refused), nil
	}
}

// forwardChildRequest sends a child's request to the client of its call and returns
// the client's answer, or the refusal (logged on refused).
func (g *Gateway) forwardChildRequest(ctx context.Context, cn *conn, req transport.JSONRPCRequest, refused *rateLog) *transport.JSONRPCResponse {
	if req.Method == string(mcp.MethodListRoots) {
		cn.askedRoots.Store(true)
	}
	c, why := g.callerFor(ctx, cn)
	if c != nil && !c.s.declared(req.Method) {
		c, why = nil, fmt.Sprintf("the client of the call did not declare the capability for %s", req.Method)
	}
	if c == nil {
		if req.Method == string(mcp.MethodListRoots) {
			return transport.NewJSONRPCResultResponse(req.ID, json.RawMessage(`{"roots":[]}`))
		}
		refused.add("server", cn.server, "method", req.Method, "reason", why)
		return transport.NewJSONRPCErrorResponse(req.ID, jsonrpc.CodeInvalidRequest, "Nexus cannot forward "+req.Method+": "+why, nil)
	}
	params, err := json.Marshal(req.Params)
	if err != nil || req.Params == nil {
		params = json.RawMessage("{}")
	}
	ctx, cancel := context.WithTimeout(ctx, childRequestWait)
	defer cancel()
	raw, rpcErr := c.askClient(ctx, req.Method, json.RawMessage(params))
	if rpcErr != nil {
		return transport.NewJSONRPCErrorResponse(req.ID, rpcErr.Code, rpcErr.Message, rpcErr.Data)
	}
	if req.Method == string(mcp.MethodListRoots) {
		cn.roots.toldBy(c.s)
	}
	return transport.NewJSONRPCResultResponse(req.ID, raw)
}

// callerFor finds the call, and so the client, a child's request belongs to: a call
// of a session in flight on this child, whose agent may see the server. A session
// with no call in flight there is never asked: a server it may not see (or that is
// idle) must not reach its client, its model or its roots.
func (g *Gateway) callerFor(ctx context.Context, cn *conn) (*caller, string) {
	if cn.owner != nil {
		return g.ownerCaller(ctx, cn)
	}
	c := callerOf(ctx)
	if c == nil {
		var sessions int
		c, sessions = cn.callers.only()
		switch {
		case sessions > 1:
			return nil, fmt.Sprintf("calls of %d clients are in flight on server %s and its transport does not say which call the request belongs to", sessions, cn.server)
		case c == nil:
			return nil, fmt.Sprintf("no call of a client is in flight on server %s", cn.server)
		}
	}
	if !cn.callers.from(c.s) {
		return nil, fmt.Sprintf("the call the request belongs to is no longer in flight on server %s", cn.server)
	}
	if !g.view(c.s.agent).sees[cn.server] {
		return nil, fmt.Sprintf("the client of the call may not see server %s", cn.server)
	}
	return c, ""
}

// ownerCaller is where a request from a connection that serves one client session
// goes: that client, on the stream of its call the request belongs to (or of its
// latest call in flight, or of the call that opened the connection, while it
// starts), else on the session's own stream: a child may ask its client's roots at
// any time, and that client is known.
func (g *Gateway) ownerCaller(ctx context.Context, cn *conn) (*caller, string) {
	s := cn.owner
	if !g.view(s.agent).sees[cn.server] {
		return nil, fmt.Sprintf("the client of the session may not see server %s", cn.server)
	}
	if c := callerOf(ctx); c != nil && c.s == s {
		return c, ""
	}
	if c, n := cn.callers.only(); n == 1 && c.s == s {
		return c, ""
	}
	if cn.opener != nil && cn.opener.s == s {
		return cn.opener, "" // its stream, or the session's once the call ended
	}
	return &caller{s: s, r: s.out}, ""
}

// declared reports whether the client said it can answer method.
func (s *session) declared(method string) bool {
	switch method {
	case string(mcp.MethodSamplingCreateMessage):
		return s.caps.sampling
	case string(mcp.MethodElicitationCreate):
		return s.caps.elicitation
	case string(mcp.MethodListRoots):
		return s.caps.roots
	}
	return false
}
