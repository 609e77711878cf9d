package aggregation

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// childRequestWait bounds how long a child's request waits for the client: sampling
// and elicitation may wait on a person, but not forever.
const childRequestWait = 10 * time.Minute

// childRequests answers the requests a child sends its client. Sampling, elicitation
// and roots go to the client of the call they belong to:
//   - an HTTP child's request that arrives on a call's response stream carries that
//     call's context, so it goes to that call's session;
//   - otherwise (a stdio child's request carries no trace of its call) it goes to the
//     one session with calls in flight on that child;
//   - with no call in flight, to the only session when it is a stdio client;
//   - anything else is refused with the reason, except roots/list, which is answered
//     with an empty list (a child that asks at start must not fail).
func (g *Gateway) childRequests(cn *conn) transport.RequestHandler {
	return func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		if req.Method == string(mcp.MethodPing) {
			return transport.NewJSONRPCResultResponse(req.ID, json.RawMessage("{}")), nil
		}
		cn.asked.mark() // whatever the client answers, the calls in flight are not shareable
		c, why := g.callerFor(ctx, cn)
		if c != nil && !c.s.declared(req.Method) {
			c, why = nil, fmt.Sprintf("the client of the call did not declare the capability for %s", req.Method)
		}
		if c == nil {
			if req.Method == string(mcp.MethodListRoots) {
				return transport.NewJSONRPCResultResponse(req.ID, json.RawMessage(`{"roots":[]}`)), nil
			}
			g.log.Info("request from a server refused", "server", cn.server, "method", req.Method, "reason", why)
			return transport.NewJSONRPCErrorResponse(req.ID, codeInvalidRequest, "Nexus cannot forward "+req.Method+": "+why, nil), nil
		}
		params, err := json.Marshal(req.Params)
		if err != nil || req.Params == nil {
			params = json.RawMessage("{}")
		}
		ctx, cancel := context.WithTimeout(ctx, childRequestWait)
		defer cancel()
		raw, rpcErr := c.s.request(ctx, c.r, req.Method, json.RawMessage(params))
		if rpcErr != nil {
			return transport.NewJSONRPCErrorResponse(req.ID, rpcErr.Code, rpcErr.Message, rpcErr.Data), nil
		}
		return transport.NewJSONRPCResultResponse(req.ID, raw), nil
	}
}

// callerFor finds the call, and so the client, a child's request belongs to.
func (g *Gateway) callerFor(ctx context.Context, cn *conn) (*caller, string) {
	if c := callerOf(ctx); c != nil {
		return c, ""
	}
	c, sessions := cn.callers.only()
	if c != nil {
		return c, ""
	}
	if sessions > 1 {
		return nil, fmt.Sprintf("calls of %d clients are in flight on server %s and its transport does not say which call the request belongs to", sessions, cn.server)
	}
	all := g.sessions.all()
	if len(all) == 1 && all[0].front == frontStdio {
		return &caller{s: all[0], r: all[0].out}, ""
	}
	return nil, fmt.Sprintf("no call of a client is in flight on server %s", cn.server)
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
