package aggregation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// JSON-RPC error codes the gateway answers with.
const (
	codeInvalidRequest = -32600
	codeInvalidParams  = -32602
	codeCancelled      = -32800
)

var errCallTimeout = errors.New("call timed out")

// callParams are the parts of a tools/call request the chain needs.
type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Meta      *struct {
		ProgressToken json.RawMessage `json:"progressToken,omitempty"`
	} `json:"_meta,omitempty"`
}

func (p callParams) progressToken() json.RawMessage {
	if p.Meta == nil || len(p.Meta.ProgressToken) == 0 || string(p.Meta.ProgressToken) == "null" {
		return nil
	}
	return p.Meta.ProgressToken
}

// notifyFunc sends a notification to the client that made a call.
type notifyFunc func(method string, params map[string]any)

// callTool is the call chain: identity (agent, decided by the front transport) ->
// policy -> memory -> child. It returns the raw result object or a JSON-RPC error.
func (g *Gateway) callTool(ctx context.Context, agent string, p callParams, notify notifyFunc) (json.RawMessage, *RPCError) {
	t := g.man.Load().lookup(p.Name)
	if t == nil {
		return nil, g.unknownTool(p.Name)
	}
	args, err := normaliseArguments(p.Arguments)
	if err != nil {
		return nil, &RPCError{Code: codeInvalidParams, Message: fmt.Sprintf("%s: %v", t.Canonical, err)}
	}

	d := g.pol.Load().Decide(agent, t.policyTool())
	g.denials.Record(d)
	if !d.Allowed {
		g.log.Info("policy: call refused", "agent", agent, "tool", t.Canonical, "rule", d.Rule, "origin", d.Origin)
		return toolError(d.Message()), nil
	}
	// Allowed calls are the hot path: their audit line is written at debug level.
	g.log.Debug("policy: call allowed", "agent", agent, "tool", t.Canonical, "rule", d.Rule, "origin", d.Origin)

	forward := func(ctx context.Context) (json.RawMessage, error) {
		return g.forward(ctx, t, args, p.progressToken(), notify)
	}
	raw, err := g.remember(ctx, agent, t, args, forward)
	if err != nil {
		var rpcErr *RPCError
		if errors.As(err, &rpcErr) {
			return nil, rpcErr
		}
		return toolError(fmt.Sprintf("%s: %v", t.Canonical, err)), nil
	}
	return raw, nil
}

// remember is the memory step. Results stay the raw bytes the child sent, so
// every content type and field reaches the client; memory only splices its
// report into _meta. A nil memory is off and returns forward's bytes as they are.
func (g *Gateway) remember(ctx context.Context, agent string, t *Tool, args json.RawMessage, forward func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	return g.mem.Call(ctx, agent, t.memoryTool(), args, forward)
}

// forward sends the call to the child that owns the tool.
func (g *Gateway) forward(ctx context.Context, t *Tool, args json.RawMessage, progress json.RawMessage, notify notifyFunc) (json.RawMessage, error) {
	c := g.kids()[t.Server]
	if c == nil {
		return toolError(fmt.Sprintf("server %s was removed from the config", t.Server)), nil
	}
	cn, _ := c.current()
	if cn == nil {
		st := c.status()
		return toolError(fmt.Sprintf("server %s is not connected (%s); its tools come back when it does (nexus list-servers shows its state)", t.Server, st.State)), nil
	}
	timeout := c.config().CallTimeout()
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errCallTimeout)
	defer cancel()

	params := map[string]any{"name": t.Name, "arguments": args}
	if progress != nil && notify != nil {
		token := g.progress.add(progress, notify)
		defer g.progress.release(token)
		params["_meta"] = map[string]any{"progressToken": token}
	}
	defer cn.callers.add(ctx)()
	raw, err := cn.request(ctx, string(mcp.MethodToolsCall), params)
	var rpcErr *RPCError
	switch {
	case err == nil:
		return g.redact(compact(raw)), nil
	case errors.As(err, &rpcErr):
		msg := string(g.redact([]byte(rpcErr.Message)))
		if data, err := json.Marshal(rpcErr.Data); err == nil && rpcErr.Data != nil {
			var clean any
			if json.Unmarshal(g.redact(data), &clean) == nil {
				return nil, &RPCError{Code: rpcErr.Code, Message: msg, Data: clean}
			}
		}
		return nil, &RPCError{Code: rpcErr.Code, Message: msg}
	case errors.Is(err, errCallTimeout):
		return toolError(fmt.Sprintf("server %s did not answer %s within %s; raise servers.%s.timeout if it needs longer", t.Server, t.Canonical, timeout, t.Server)), nil
	case errors.Is(err, errChildGone):
		return toolError(fmt.Sprintf("server %s exited during the call to %s; Nexus is restarting it", t.Server, t.Canonical)), nil
	case ctx.Err() != nil:
		return nil, &RPCError{Code: codeCancelled, Message: "request cancelled"}
	default:
		cn.markDone() // a remote child that fails at the transport level is reconnected
		return g.redact(toolError(fmt.Sprintf("calling %s on server %s failed: %v", t.Canonical, t.Server, err))), nil
	}
}

// unknownTool is the -32602 answer to a name no server offers, with the closest names.
func (g *Gateway) unknownTool(name string) *RPCError {
	msg := fmt.Sprintf("unknown tool %q", name)
	if near := g.man.Load().suggest(name); len(near) > 0 {
		msg += "; did you mean " + quoteJoin(near) + "?"
	}
	return &RPCError{Code: codeInvalidParams, Message: msg + " (nexus list-tools shows every tool)"}
}

func quoteJoin(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// normaliseArguments turns absent or null arguments into {} (TypeScript servers reject
// null) and refuses anything that is not an object.
func normaliseArguments(raw json.RawMessage) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return json.RawMessage("{}"), nil
	}
	if trimmed[0] != '{' {
		return nil, errors.New("arguments must be a JSON object")
	}
	return trimmed, nil
}

// toolError is a CallToolResult with isError set: the way MCP tells the model that a
// call failed in a way it can read and act on.
func toolError(msg string) json.RawMessage {
	raw, _ := json.Marshal(map[string]any{
		"content": []any{map[string]any{"type": "text", "text": msg}},
		"isError": true,
	})
	return raw
}

// compact makes a result fit on one stdio line.
func compact(raw json.RawMessage) json.RawMessage {
	if bytes.IndexByte(raw, '\n') < 0 {
		return raw
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}
