package aggregation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/attribute"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/policy"
	"github.com/nexus-mcp/nexus/upstream"
)

var errCallTimeout = errors.New("call timed out")

// callParams are the parts of a tools/call request the chain needs.
type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Meta is the client's _meta: its progress token is routed by Nexus, the rest
	// passes to the child (passthrough.go).
	Meta json.RawMessage `json:"_meta,omitempty"`
	// Task asks for a task-augmented call (tasks.go).
	Task json.RawMessage `json:"task,omitempty"`
	// InputResponses and RequestState are a 2026-07-28 retry's answers to
	// what the server asked: per-caller state, so its answer is never
	// shared.
	InputResponses json.RawMessage `json:"inputResponses,omitempty"`
	RequestState   json.RawMessage `json:"requestState,omitempty"`
}

// callFields are callParams' members, in decodeCallParams' order.
var callFields = []string{"name", "arguments", "_meta", "task", "inputResponses", "requestState"}

// decodeCallParams decodes the params of a tools/call as json.Unmarshal does,
// failing where it fails, but plain params (every call's) in one pass:
// encoding/json's reflection was the largest piece of a memory hit's own work.
// The raw members are params' own bytes.
func decodeCallParams(params json.RawMessage) (callParams, error) {
	var v [6]json.RawMessage
	var name string
	if jsonrpc.Fields(params, callFields, v[:]) && jsonrpc.SetString(&name, v[0]) {
		return callParams{Name: name, Arguments: v[1], Meta: v[2], Task: v[3], InputResponses: v[4], RequestState: v[5]}, nil
	}
	var p callParams // on the heap, for encoding/json: only here
	err := json.Unmarshal(params, &p)
	return p, err
}

// carriesCallerState reports a call made with its caller's answers to an
// earlier round trip.
func (p callParams) carriesCallerState() bool {
	present := func(r json.RawMessage) bool { return len(r) > 0 && string(r) != "null" }
	return present(p.InputResponses) || present(p.RequestState)
}

// retryFields are a retry's inputResponses and requestState, as its child gets
// them; nil for a first request.
func (p callParams) retryFields() map[string]json.RawMessage {
	if !p.carriesCallerState() {
		return nil
	}
	return map[string]json.RawMessage{"inputResponses": p.InputResponses, "requestState": p.RequestState}
}

func (p callParams) progressToken() json.RawMessage {
	var m struct {
		ProgressToken json.RawMessage `json:"progressToken"`
	}
	if len(p.Meta) == 0 || json.Unmarshal(p.Meta, &m) != nil || len(m.ProgressToken) == 0 || string(m.ProgressToken) == "null" {
		return nil
	}
	return m.ProgressToken
}

// caller is who made a call: the session and the stream its answer goes to. Progress
// and the requests a child sends during the call (sampling, elicitation) go there. A
// call from `nexus call` has no caller.
type caller struct {
	s *session
	r sink
}

// session is the caller's session; nil for a call without a client.
func (c *caller) session() *session {
	if c == nil {
		return nil
	}
	return c.s
}

// letGo is said before the call waits (on its child, on memory, on a server
// still starting): a call running on the goroutine that reads its client
// (stdioFront) hands the reading on first.
func (c *caller) letGo() {
	if c == nil {
		return
	}
	if r, ok := c.r.(interface{ letGo() }); ok {
		r.letGo()
	}
}

type callerKey struct{}

// withCaller is the one value a call's context may carry, and only on its way to
// an HTTP child: mcp-go's HTTP transport hands the requests such a child sends on
// a call's response stream (sampling, elicitation) the context of that call, and
// nothing else to tell which call they belong to (childreq.go reads it back with
// callerOf). A stdio child's requests are matched to calls without it.
func withCaller(ctx context.Context, cn *conn, c *caller) context.Context {
	if !cn.Transport.Remote() || c == nil {
		return ctx
	}
	return context.WithValue(ctx, callerKey{}, c)
}

// callerOf is the call a context belongs to, or nil.
func callerOf(ctx context.Context) *caller {
	c, _ := ctx.Value(callerKey{}).(*caller)
	return c
}

// toolCall is one tools/call on its way down the chain: each step reads what the
// steps before it found, and the record an observer gets is filled from what
// each step returned, in callTool alone.
type toolCall struct {
	from  *caller // nil for `nexus call`
	agent string  // the session's (identity was decided at initialize)
	p     callParams
	tool  *Tool
	args  json.RawMessage            // normalised (normaliseArguments)
	pol   *policy.Policy             // the policy the call was decided under
	meta  json.RawMessage            // the client's _meta less Nexus's keys, for the child
	input map[string]json.RawMessage // a 2026-07-28 retry's answers and state
}

// sent is what forward learned of the call's trip to its child, for the record.
type sent struct {
	child   time.Duration    // the time spent waiting for the child
	timeout bool             // the child did not answer in time
	revoked *policy.Decision // the write gate's refusal, when the policy changed under the call
}

// callTool is the call chain, top to bottom: identity (the session's agent,
// decided at initialize) -> the tool -> policy -> memory -> child, then
// observation: the finished call goes to the observer (metrics, audit) in one
// piece. It returns the raw result object or a JSON-RPC error.
func (g *Gateway) callTool(ctx context.Context, from *caller, agent string, p callParams) (raw json.RawMessage, rpcErr *RPCError) {
	rec := Call{Start: time.Now(), Method: "tools/call", Agent: agent, Requested: p.Name, Arguments: p.Arguments}
	rec.by(from.session())
	defer func() {
		rec.finish(raw, rpcErr)
		g.observe(&rec)
	}()
	c := &toolCall{from: from, agent: agent, p: p}

	// The tool.
	t, down, rpcErr := g.toolOf(ctx, c)
	if t != nil {
		rec.resolved(t)
	} else if down != nil {
		rec.Server = down.st.Name
	}
	switch {
	case rpcErr != nil:
		return nil, rpcErr
	case t == nil:
		return toolError(down.Error()), nil
	}
	c.tool = t
	if c.args, rpcErr = arguments(t, p.Arguments); rpcErr != nil {
		return nil, rpcErr
	}
	rec.Arguments = c.args

	// Policy, decided before anything is routed.
	c.pol = g.pol.Load()
	d := g.decide(ctx, c.pol, agent, t)
	rec.decided(d)
	if !d.Allowed {
		return toolError(toldTo(from.session(), d).Message()), nil
	}

	// Memory, then the child.
	c.meta, c.input = passMeta(p.Meta), p.retryFields()
	var trip sent
	raw, err := g.remember(ctx, c, func(ctx context.Context) (memory.Answer, error) {
		from.letGo()
		a, s, err := g.forward(ctx, c)
		trip = s
		a.AskedClient = a.AskedClient || p.carriesCallerState()
		return a, err
	})
	rec.Child = trip.child
	switch {
	case trip.revoked != nil:
		rec.decided(*trip.revoked)
	case trip.timeout:
		rec.Outcome = OutcomeTimeout
	}
	if err != nil {
		if errors.As(err, &rpcErr) {
			return nil, rpcErr
		}
		return toolError(fmt.Sprintf("%s: %v", t.Canonical, err)), nil
	}
	return g.view(agent).res.clientURIs(t.Server, raw), nil
}

// toolOf finds the tool a call names. A tool of a server that is down is
// returned with down only when memory may stand in for it (stale-if-error);
// otherwise the tool is nil and down says why it cannot be called.
func (g *Gateway) toolOf(ctx context.Context, c *toolCall) (*Tool, *notRunningError, *RPCError) {
	if t := g.manifestOf(c.from.session()).lookup(c.p.Name); t != nil {
		return t, nil, nil
	}
	// A name the manifest does not know may be a server's still starting,
	// which resolveCall waits for.
	c.from.letGo()
	t, err := g.resolveCall(ctx, g.agentAudience(c.agent), c.p.Name)
	if err == nil {
		return t, nil, nil
	}
	var down *notRunningError
	if !errors.As(err, &down) {
		return nil, nil, err.(*RPCError)
	}
	// A tool of a server that is down goes on through the chain only when
	// memory may stand in for it; its forward finds no connection.
	if t = g.knownTool(c.p.Name); t == nil || g.perClient(t.Server) || !g.mem.ServesStale(t.MemoryTool()) {
		return nil, down, nil
	}
	return t, down, nil
}

// decide is the policy step: the decision, logged, counted and traced.
func (g *Gateway) decide(ctx context.Context, pol *policy.Policy, agent string, t *Tool) policy.Decision {
	_, sp := g.span(ctx, "policy")
	d := pol.Decide(agent, t.policyTool())
	if sp.IsRecording() {
		sp.SetAttributes(attribute.String("nexus.agent", agent), attribute.String("nexus.tool", t.Canonical), attribute.Bool("nexus.allowed", d.Allowed), attribute.String("nexus.rule", d.Rule), attribute.String("nexus.origin", d.Origin))
	}
	sp.End()
	g.denials.Record(d)
	if !d.Allowed {
		g.log.Info("policy: call refused", "agent", agent, "tool", t.Canonical, "rule", d.Rule, "origin", d.Origin)
	} else if g.log.Enabled(ctx, slog.LevelDebug) {
		// Allowed calls are the hot path: their audit line is written at
		// debug level, and its arguments are not even boxed below it.
		g.log.Debug("policy: call allowed", "agent", agent, "tool", t.Canonical, "rule", d.Rule, "origin", d.Origin)
	}
	return d
}

// remember is the memory step. Results stay the raw bytes the child sent, so
// every content type and field reaches the client; memory only splices its
// report into _meta. A hit is answered on the goroutine that read the call; a
// miss lets the front's reading go before it waits. Memory off (nil) forwards,
// and so does a "client" server's call: its answers come from one client's own
// session of the server (its state, its roots) and are never anyone else's,
// nor that client's later, once the state moved on.
func (g *Gateway) remember(ctx context.Context, c *toolCall, forward memory.Forward) (json.RawMessage, error) {
	if g.perClient(c.tool.Server) {
		a, err := forward(ctx)
		return a.Result, err
	}
	ctx, sp := g.span(ctx, "memory")
	defer sp.End()
	q := g.mem.QueryWithMeta(c.agent, c.tool.MemoryTool(), c.args, c.meta)
	if c.from != nil && c.from.s != nil {
		q.Session(c.from.s.id) // no similarity hit on the session's own rewording
	}
	if g.mem.LookupWaits() {
		c.from.letGo()
	}
	raw, hit := q.Hit(ctx)
	var err error
	if !hit {
		c.from.letGo() // an identical call in flight, an embedder, the child: it may wait
		raw, err = q.Call(ctx, forward)
	}
	if q.Verifies() {
		// memory.verify: a sample of answers from memory is asked of the
		// child too, after the answer, on a copy of the call that has no
		// caller: nothing of it reaches the client.
		detached := *c
		detached.from = nil
		q.VerifyLater(ctx, func(ctx context.Context) (memory.Answer, error) {
			a, _, err := g.forward(ctx, &detached)
			return a, err
		})
	}
	if sp.IsRecording() {
		sp.SetAttributes(attribute.String("nexus.memory", cacheStatus(raw)))
	}
	return raw, err
}

// forward is the child step: it sends the call to the child that owns the tool,
// on the connection the caller's session uses, and waits for its answer, within
// the server's timeout. A child that forgot its session (it restarted) is sent
// the call once more, on the session that replaces it.
func (g *Gateway) forward(ctx context.Context, c *toolCall) (a memory.Answer, trip sent, err error) {
	t := c.tool
	ctx, sp := g.span(ctx, "child")
	if sp.IsRecording() {
		sp.SetAttributes(attribute.String("nexus.server", t.Server), attribute.String("nexus.tool", t.Name))
	}
	start := time.Now()
	defer func() {
		trip.child = time.Since(start)
		endSpan(sp, trip.outcome(a, err))
	}()
	ch := g.kids()[t.Server]
	if ch == nil {
		return failed(memory.NotSent, fmt.Sprintf("server %s was removed from the config", t.Server)), trip, nil
	}
	timeout := ch.config().CallTimeout()
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errCallTimeout)
	defer cancel()
	cn, err := ch.connFor(ctx, c.from)
	if err != nil {
		return failed(memory.NotSent, err.Error()), trip, nil
	}
	a, err = g.send(ctx, cn, c, timeout, &trip)
	if errors.Is(err, upstream.ErrSessionLost) {
		if next := ch.connForAgain(ctx, c.from, cn); next != nil {
			a, err = g.send(ctx, next, c, timeout, &trip)
		}
		if errors.Is(err, upstream.ErrSessionLost) {
			return failed(memory.NotSent, fmt.Sprintf("server %s forgot its session and no new one answered the call to %s in time (%v); nexus list-servers --live shows it", t.Server, t.Canonical, err)), trip, nil
		}
	}
	return a, trip, err
}

// outcome is how the trip ended, for the child step's span.
func (s sent) outcome(a memory.Answer, err error) Outcome {
	switch {
	case s.revoked != nil:
		return OutcomeRefused
	case s.timeout:
		return OutcomeTimeout
	}
	return answerOutcome(err != nil, a.Result)
}

// failed is the answer to a call the child did not answer: the gateway's
// isError result saying why, and what became of the request.
func failed(outcome memory.Outcome, msg string) memory.Answer {
	return memory.Answer{Result: toolError(msg), Outcome: outcome, Failure: msg}
}

// send writes the call to the child's connection cn, counted among cn's calls in
// flight, and waits for its answer. The policy is checked once more just before
// the request is written (gate.go).
func (g *Gateway) send(ctx context.Context, cn *conn, c *toolCall, timeout time.Duration, trip *sent) (memory.Answer, error) {
	t := c.tool
	var token string
	ctx = withCaller(ctx, cn, c.from)
	if c.from != nil {
		if progress := c.p.progressToken(); progress != nil {
			token = g.progress.add(t.Server, progress, c.from)
			defer g.progress.release(token)
		}
	}
	g.syncRoots(ctx, cn, c.from)
	g.syncLevel(ctx, cn, c.from)
	fl, remove := cn.callers.add(c.from)
	defer remove()
	params := callRequest(t.Name, c.args, c.meta, token)
	if c.input != nil {
		params = withFields(params, c.input)
	}
	out := upstream.Outgoing{BeforeWrite: g.writeGate(ctx, c)}
	// trailing: the caller's stream ends with the answer, and the request may
	// be followed by notifications (progress, logs) that a legacy child can
	// write after its answer; CatchUp lets them in first.
	trailing := false
	if s := c.from.session(); s != nil {
		out.Extensions = s.era.extensions(s.caps)
		trailing = s.era.streamEndsWithAnswer(s.front) && (token != "" || s.level.Load() != levelUnset && cn.Caps.Logging != nil)
	}
	raw, asked, err := g.requestInput(ctx, cn, c.from, "tools/call", params, out)
	cn.CatchUp(ctx, err == nil && trailing) // the notifications before the answer go first
	asked = asked || fl.asked.Load()
	if err == nil {
		g.eraRefusal(t.Server, raw)
	}
	if err == nil {
		// An answer made with the client's input, one asking for it, or a
		// task, is that caller's: memory neither stores nor shares it.
		asked = asked || c.input != nil || resultTypeOf(raw) != resultComplete
		return memory.Answer{Result: g.fromChild(raw), AskedClient: asked}, nil
	}
	if errors.Is(err, upstream.ErrSessionLost) {
		return memory.Answer{Outcome: memory.NotSent}, err // forward sends it again
	}
	var revoked *errRevoked
	if errors.As(err, &revoked) {
		trip.revoked = &revoked.decision
		return memory.Answer{Result: toolError(toldTo(c.from.session(), revoked.decision).Message()), Outcome: memory.Refused}, nil
	}
	// From here the request may have reached the child: the outcome is
	// unknown unless the child answered with an error of its own.
	if errors.Is(err, errCallTimeout) {
		trip.timeout = true
		return failed(memory.Unknown, fmt.Sprintf("server %s did not answer %s within %s; raise servers.%s.timeout if it needs longer", t.Server, t.Canonical, timeout, t.Server)), nil
	}
	if errors.Is(err, upstream.ErrGone) {
		return failed(memory.Unknown, fmt.Sprintf("server %s exited during the call to %s; Nexus is restarting it", t.Server, t.Canonical)), nil
	}
	var own *RPCError
	outcome := memory.Unknown
	if errors.As(err, &own) {
		outcome = memory.Answered // the child's own JSON-RPC error
	}
	rpcErr := g.childError(ctx, t.Server, t.Canonical, err)
	if own == nil && rpcErr.Code == jsonrpc.CodeInternal && ctx.Err() == nil {
		// A transport failure reads better as a tool error the model can act on;
		// the child's own error, whatever its code, reaches the client as it was.
		return failed(outcome, rpcErr.Message), nil
	}
	return memory.Answer{Outcome: outcome, Failure: rpcErr.Message}, rpcErr
}

// fromChild is a child's result as Nexus keeps and passes it: on one line, with
// secret values redacted (the child side's one redaction: memory stores what
// this returns) and Nexus's own _meta keys dropped, which only Nexus may set.
func (g *Gateway) fromChild(raw json.RawMessage) json.RawMessage {
	return dropOwnMeta(g.redact(jsonrpc.Compact(raw)))
}

// callRequest encodes the params of a tools/call to a child by hand: the arguments
// are the client's bytes, copied, never decoded and re-encoded. meta is the client's
// _meta less Nexus's own keys (a JSON object, or nil); progressToken is Nexus's.
func callRequest(name string, args, meta json.RawMessage, progressToken string) json.RawMessage {
	b := make([]byte, 0, len(args)+len(name)+len(meta)+len(progressToken)+64)
	b = append(b, `{"name":`...)
	b = jsonrpc.AppendString(b, name)
	b = append(b, `,"arguments":`...)
	b = append(b, args...)
	var members []byte // the client's _meta members, without their braces
	if len(meta) > 2 {
		members = meta[1 : len(meta)-1]
	}
	if progressToken != "" || len(members) > 0 {
		b = append(b, `,"_meta":{`...)
		if progressToken != "" {
			b = append(b, `"progressToken":`...)
			b = jsonrpc.AppendString(b, progressToken)
			if len(members) > 0 {
				b = append(b, ',')
			}
		}
		b = append(b, members...)
		b = append(b, '}')
	}
	return append(b, '}')
}

// childError turns what a child request failed with into the error a client gets:
// the child's own JSON-RPC error keeps its code; everything passes the redactor.
func (g *Gateway) childError(ctx context.Context, server, what string, err error) *RPCError {
	var rpcErr *RPCError
	switch {
	case errors.As(err, &rpcErr):
		out := &RPCError{Code: rpcErr.Code, Message: string(g.redact([]byte(rpcErr.Message)))}
		if data, err := json.Marshal(rpcErr.Data); err == nil && rpcErr.Data != nil {
			var clean any
			if json.Unmarshal(g.redact(data), &clean) == nil {
				out.Data = clean
			}
		}
		return out
	case errors.Is(err, errCallTimeout):
		return &RPCError{Code: jsonrpc.CodeInternal, Message: fmt.Sprintf("server %s did not answer %s in time; raise servers.%s.timeout if it needs longer", server, what, server)}
	case errors.Is(err, upstream.ErrGone):
		return &RPCError{Code: jsonrpc.CodeInternal, Message: fmt.Sprintf("server %s exited during %s; Nexus is restarting it", server, what)}
	case errors.As(err, new(*upstream.TooLargeError)):
		return &RPCError{Code: jsonrpc.CodeInternal, Message: err.Error()}
	case errors.Is(err, upstream.ErrSessionLost):
		return &RPCError{Code: jsonrpc.CodeInternal, Message: fmt.Sprintf("server %s forgot its session and no new one answered %s in time; nexus list-servers --live shows it", server, what)}
	case ctx.Err() != nil:
		return &RPCError{Code: jsonrpc.CodeCancelled, Message: "request cancelled: " + context.Cause(ctx).Error()}
	}
	// A remote child's connection that a request broke on is pinged, and
	// reconnected unless it answers. A client session's own connection has no
	// ping loop, so it is never held for one.
	if broken := (*upstream.BrokenError)(nil); errors.As(err, &broken) && broken.Conn.Shared {
		broken.Conn.Doubt()
	}
	return &RPCError{Code: jsonrpc.CodeInternal, Message: string(g.redact([]byte(fmt.Sprintf("%s on server %s failed: %v", what, server, err))))}
}

// perClient reports whether the server gets one upstream session per client
// session ("sessions": "client").
func (g *Gateway) perClient(server string) bool {
	c := g.kids()[server]
	return c != nil && c.config().PerClient()
}

// unknownTool is the -32602 answer to a name no server offers, with the closest
// names of the tools the audience may call.
func (g *Gateway) unknownTool(a audience, name string) *RPCError {
	msg := "unknown tool " + quoted(name)
	if near := g.lists.current().suggest(a, name); len(near) > 0 {
		msg += "; did you mean " + quoteJoin(near) + "?"
	}
	return &RPCError{Code: jsonrpc.CodeInvalidParams, Message: msg + " (nexus list-tools shows every tool)"}
}

func quoteJoin(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// resolved records the tool a call resolved to.
func (rec *Call) resolved(t *Tool) {
	pt := t.policyTool()
	rec.Tool, rec.Server, rec.ReadOnly = t.Canonical, t.Server, pt.ReadOnly && !pt.Destructive
}

// arguments are a call's arguments, normalised (see normaliseArguments), or the
// -32602 error that refuses them.
func arguments(t *Tool, raw json.RawMessage) (json.RawMessage, *RPCError) {
	args, err := normaliseArguments(raw)
	if err != nil {
		return nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: %v", t.Canonical, err)}
	}
	return args, nil
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
	if err := checkText(trimmed); err != nil {
		return nil, err
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

// Call runs one tools/call through the chain, as a client's call would: for `nexus
// call` and for embedding. name is a wire or canonical name. The error, when the call
// did not produce a result, is an *RPCError. Requests the child sends back during the
// call (sampling, elicitation) are refused: there is no client to ask.
func (g *Gateway) Call(ctx context.Context, agent, name string, args json.RawMessage) (json.RawMessage, error) {
	p, raw, rpcErr, handled := g.searchCall(ctx, nil, agent, callParams{Name: name, Arguments: args})
	if !handled {
		raw, rpcErr = g.callTool(ctx, nil, agent, p)
	}
	if rpcErr != nil {
		return nil, rpcErr
	}
	return raw, nil
}

// Resolve finds the tool a client's name refers to (wire or canonical, exactly); an
// unknown name gives the same *RPCError a call would, with the closest names, and a
// tool of a server that is not running says so.
func (g *Gateway) Resolve(ctx context.Context, name string) (*Tool, error) {
	return g.resolveTool(ctx, operator(), name)
}

// resolveCall finds the tool of a client's call. Beyond the names resolveTool knows,
// it accepts a child's own name for its tool when exactly one tool of that name is
// one the audience may call: an MCP App, rendered by the client, calls its
// server's tools by the names that server gave them. Policy then decides on the
// tool's canonical name, as for any call.
func (g *Gateway) resolveCall(ctx context.Context, a audience, name string) (*Tool, error) {
	if g.lists.current().lookup(name) == nil {
		g.lists.await(ctx) // a child's names are known once its first lists are in
		if t, err := g.lists.current().bareTool(a, name); t != nil {
			return t, nil
		} else if err != nil {
			return nil, err
		}
	}
	return g.resolveTool(ctx, a, name)
}

// resolveTool finds a tool by name. A name that may belong to a server still making
// its first attempt waits for that server (up to its call timeout): a client that
// calls at once after starting the gateway gets the tool, not "unknown tool". A
// tool of a server that gave up makes it try once more, and waits for that try.
func (g *Gateway) resolveTool(ctx context.Context, a audience, name string) (*Tool, error) {
	if t := g.lists.current().lookup(name); t != nil {
		return t, nil
	}
	owners := g.possibleOwners(name)
	stale := g.awaitFirstAttempts(ctx, owners) // the manifest may lag behind what the owners know
	for _, c := range owners {
		// A server that gave up tries once more; one restarting (or retrying
		// its start) is waited for: either way up to its call timeout, as the
		// call would wait for its answer.
		switch st := c.status().State; {
		case (st == StateFailed || st == StateNeedsLogin) && mayOwn(c, name),
			(st == StateRestarting || st == StateRetrying) && c.knownTool(name) != nil:
			wait, cancel := context.WithTimeout(ctx, c.config().CallTimeout())
			c.connected(wait)
			cancel()
			stale = true
		}
		// The child may know the tool before the manifest does (rebuilds are
		// debounced).
		if _, tools := c.current(); slices.ContainsFunc(tools, func(t *Tool) bool { return t.Wire == name || t.Canonical == name }) {
			stale = true
		}
	}
	if stale {
		g.lists.rebuild(ctx)
		if t := g.lists.current().lookup(name); t != nil {
			return t, nil
		}
	}
	for _, c := range owners {
		if st := c.status(); st.State != StateReady {
			return nil, &notRunningError{st}
		}
	}
	if err := g.heldTool(name); err != nil {
		return nil, err
	}
	return nil, g.unknownTool(a, name)
}

// awaitFirstAttempts waits for those of kids still making their first attempt,
// each up to its call timeout from now, the bound a tools/call waits. It reports
// whether it waited: the manifest may then lag behind them.
func (g *Gateway) awaitFirstAttempts(ctx context.Context, kids []*child) bool {
	start := time.Now()
	waited := false
	for _, c := range kids {
		select {
		case <-c.life.Settled():
			continue
		default:
		}
		waited = true
		wait, cancel := context.WithDeadline(ctx, start.Add(c.config().CallTimeout()))
		select {
		case <-c.life.Settled():
		case <-wait.Done():
		}
		cancel()
	}
	return waited
}

// mayOwn reports whether name is one of c's tools for sure: it carries c's name or
// prefix, or c had it while it was up. A failed server with bare names is not
// restarted by every unknown name.
func mayOwn(c *child, name string) bool {
	cfg := c.config()
	if p := cfg.WirePrefix(); strings.HasPrefix(name, cfg.Name+".") || p != "" && (strings.HasPrefix(name, p+"__") || strings.HasPrefix(name, p+".")) {
		return true
	}
	return c.knownTool(name) != nil
}

// knownTool is the tool a name referred to while its server was last up, or
// nil: what memory may stand in for while the server is down.
func (g *Gateway) knownTool(name string) *Tool {
	for _, c := range g.possibleOwners(name) {
		if t := c.knownTool(name); t != nil {
			return t
		}
	}
	return nil
}

// possibleOwners are the children a tool name may belong to (see OwnersOf).
func (g *Gateway) possibleOwners(name string) []*child {
	kids := g.kids()
	var out []*child
	for _, s := range OwnersOf(g.cfg.Load(), name) {
		if c := kids[s]; c != nil {
			out = append(out, c)
		}
	}
	return out
}

// OwnersOf names the enabled servers of cfg a tool name may belong to: by the server
// part of a canonical name, or by the wire prefix. A server that exposes bare names
// may own any name.
func OwnersOf(cfg *config.Config, name string) []string {
	var out []string
	for _, s := range cfg.EnabledServers() {
		prefix := s.WirePrefix()
		if strings.HasPrefix(name, s.Name+".") || prefix == "" ||
			strings.HasPrefix(name, prefix+"__") || strings.HasPrefix(name, prefix+".") {
			out = append(out, s.Name)
		}
	}
	return out
}

// notRunningError answers a call to a tool of a configured server that is not
// running, with what it is doing instead.
type notRunningError struct{ st Status }

func (e *notRunningError) Error() string {
	if e.st.State == StateNeedsLogin {
		return fmt.Sprintf("server %s: %s; its tools come back after the login", e.st.Name, e.st.Error)
	}
	return fmt.Sprintf("server %s is not running (%s); its tools come back when it connects (nexus list-servers --live shows it)", e.st.Name, e.st.Describe())
}

// sdkEraRefusals are how the SDKs word their refusal (mcp-go, the official Go
// SDK, the TypeScript SDK v2).
var sdkEraRefusals = [][]byte{[]byte("server-initiated requests are not supported"), []byte("cannot be sent while serving a request"), []byte("Server-to-client requests are not available")}

// eraRefusal logs, once a minute, what to do when a child pinned to
// the modern era answers a call with its SDK's refusal of its own requests to
// the client (sampling, elicitation, roots), which it makes only in a session.
func (g *Gateway) eraRefusal(server string, raw json.RawMessage) {
	c := g.kids()[server]
	if c == nil || !mcp.IsModernProtocol(c.config().ProtocolVersion) {
		return
	}
	if !bytes.Contains(raw, []byte("2026-07-28")) || !slices.ContainsFunc(sdkEraRefusals, func(p []byte) bool { return bytes.Contains(raw, p) }) {
		return
	}
	g.eraRefusals.add("server", server, "fix", fmt.Sprintf("servers.%s.protocolVersion pins %s, where this server refuses its own requests to the client (sampling, elicitation, roots); remove the setting and Nexus keeps a session with it", server, c.config().ProtocolVersion))
}
