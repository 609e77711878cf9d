package aggregation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/policy"
)

// This file serves the modern era (2026-07-28): each request on its own, with no
// session. It takes the same path as a legacy request, with the request standing in
// for the session: the front (stdio.go, http.go) hands it here, its _meta says who
// the client is and what it can do, the agent comes from the transport (the bearer
// token; on stdio --agent, NEXUS_AGENT or the clientInfo hint), and the method's
// step is the legacy one, given a session that lives as long as the request
// (requestSession). Its answer gets the modern era's result fields (era.go), and a
// child's requests during a call become an InputRequiredResult (mrtr.go).

// modernMethodTable is the dispatch table of the modern era: the methods that stayed,
// with the three that may need the client's input bridged (mrtr.go), and
// server/discover, subscriptions/listen and the tasks extension's methods
// (tasks_ext.go). initialize, ping, logging/setLevel and resources/(un)subscribe
// are gone from this era, and so are the legacy tasks methods.
func (g *Gateway) modernMethodTable() map[string]method {
	t := map[string]method{
		"server/discover":      discover,
		"subscriptions/listen": listen,
		"tasks/get":            extTaskMethod("tasks/get"),
		"tasks/update":         extTaskMethod("tasks/update"),
		"tasks/cancel":         extTaskMethod("tasks/cancel"),
	}
	for _, name := range []string{"tools/list", "prompts/list", "resources/list", "resources/templates/list", "completion/complete"} {
		t[name] = g.methods[name]
	}
	for _, name := range []string{"tools/call", "prompts/get", "resources/read"} {
		t[name] = bridged(name, g.methods[name])
	}
	return t
}

// errNoReply is a step's way of saying the request gets no response: a listen the
// client itself ended.
var errNoReply = &RPCError{Code: jsonrpc.CodeInternal, Message: "no reply"}

// origin is where a modern request came from, as its transport established it.
type origin struct {
	// conn is the stdio connection the request came on (its cancellations and
	// in-flight bound apply), nil over HTTP.
	conn  *session
	front string
	// agent is the agent the transport established: the bearer token's; on stdio
	// --agent or NEXUS_AGENT, "" when neither named one.
	agent string
	// credential is the hex SHA-256 of the request's bearer token ("" without).
	credential string
	// headers are the HTTP request's headers (nil on stdio): a tools/call's
	// Mcp-Param headers are checked against its arguments (params.go).
	headers http.Header
}

// serveModern runs one modern request. It returns the response, for its front to
// send through outward, and the JSON-RPC error code it carries (0 for a result)
// for the HTTP status; a nil response sends nothing.
func (g *Gateway) serveModern(ctx context.Context, from origin, m *jsonrpc.Message, meta clientMeta, r sink) ([]byte, int) {
	if meta.err != nil {
		return jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeInvalidParams, "%s: %v", m.Method, meta.err), jsonrpc.CodeInvalidParams
	}
	if rpcErr := meta.check(); rpcErr != nil {
		return jsonrpc.Response(m.ID, nil, rpcErr), rpcErr.Code
	}
	step, ok := g.modern[m.Method]
	if !ok {
		why := fmt.Sprintf("method %s is not supported by Nexus", quoted(m.Method))
		if _, legacy := g.methods[m.Method]; legacy {
			why = fmt.Sprintf("method %s is not part of protocol version %s; Nexus answers it in a session opened with initialize", quoted(m.Method), meta.version)
		}
		return jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeMethodNotFound, "%s", why), jsonrpc.CodeMethodNotFound
	}
	front, agent := from.front, from.agent
	if agent == "" {
		agent = agentHint(meta.clientName)
	}
	if agent == "" {
		agent = policy.Anonymous
	}
	if from.conn != nil && from.agent == "" {
		if err := from.conn.pin.hold(agent); err != nil {
			return jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeInvalidRequest, "%s", err), jsonrpc.CodeInvalidRequest
		}
	}
	if from.headers != nil && m.Method == "tools/call" && g.lists.current().paramHeaders {
		if rpcErr := g.checkCallHeaders(ctx, agent, m.Params, from.headers); rpcErr != nil {
			return jsonrpc.Response(m.ID, nil, rpcErr), rpcErr.Code
		}
	}
	if from.conn != nil {
		var done func()
		ctx, done = from.conn.track(ctx, m.ID)
		defer done()
	}
	if from.conn != nil && !meta.hasLevel {
		if lvl := from.conn.modernLevel.Load(); lvl != levelUnset {
			meta.level, meta.hasLevel = logLevels[lvl], true // set on the connection (setModernLevel)
		}
	}
	s := g.requestSession(front, agent, m.ID, meta, r)
	s.credential = from.credential
	defer s.end()
	if lvl := s.level.Load(); lvl != levelUnset {
		g.raiseSharedLevel(ctx, lvl)
	}
	ctx, sp := g.span(ctx, m.Method)
	if sp.IsRecording() {
		sp.SetAttributes(attribute.String("nexus.agent", agent), attribute.String("nexus.front", front), attribute.String("nexus.protocol", meta.version))
	}
	result, rpcErr := step(ctx, s, meta.params, r)
	if rpcErr != nil {
		sp.SetStatus(codes.Error, rpcErr.Message)
	}
	sp.End()
	switch {
	case rpcErr == errNoReply:
		return nil, 0
	case ctx.Err() != nil && errors.Is(context.Cause(ctx), errClientCancelled):
		return nil, 0 // the client cancelled it: nothing more is sent for it
	case rpcErr != nil:
		if rpcErr.Code == codeNotFound {
			// 2026-07-28 answers an unknown resource with invalid params.
			rpcErr = &RPCError{Code: jsonrpc.CodeInvalidParams, Message: rpcErr.Message, Data: rpcErr.Data}
		}
		return jsonrpc.Response(m.ID, nil, rpcErr), rpcErr.Code
	}
	return jsonrpc.Response(m.ID, modernResult(m.Method, result, g.scope(m.Method)), nil), 0
}

// checkCallHeaders checks a tools/call's Mcp-Param headers against the arguments,
// for the tool the call names (one Nexus cannot name yet is answered by the chain).
// It runs only while some tool of the manifest mirrors arguments into headers.
func (g *Gateway) checkCallHeaders(ctx context.Context, agent string, params json.RawMessage, hd http.Header) *RPCError {
	var p callParams
	if json.Unmarshal(params, &p) != nil {
		return nil // the chain answers malformed params
	}
	t, err := g.resolveCall(ctx, g.agentAudience(agent), p.Name)
	if err != nil {
		return nil
	}
	return checkParamHeaders(t.paramHeaders, p.Arguments, hd)
}

// requestSession is the session a modern request is served in: it lives as long as
// the request, holds the agent and the capabilities and log level the request
// declared, and is known to no one else. A request that asked for log messages is
// added to the gateway's sessions while it runs, with only its own stream as the
// way to it (logSink), so the logs of the servers it reaches come to it.
func (g *Gateway) requestSession(front, agent string, id json.RawMessage, meta clientMeta, r sink) *session {
	s := g.newSession(front, agent, discard{})
	s.era, s.agent, s.caps = &requestScope{id: id}, agent, meta.capabilities()
	s.client = clientInfo{meta.clientName, meta.clientVer}
	if lvl, ok := levelIndex(meta.level); ok && meta.hasLevel {
		s.level.Store(int32(lvl))
		s.out = logSink{r}
		g.sessions.add(s)
	}
	s.ready.Store(true)
	return s
}

// end ends a request's session: it leaves the gateway's sessions and its context
// ends. Unlike close, it leaves the tasks and the upstreams of its agent alone.
func (s *session) end() {
	s.g.sessions.remove(s)
	s.cancel()
}

// discard is the stream of a request's session that asked for nothing unsolicited.
type discard struct{}

func (discard) send([]byte) bool { return false }
func (discard) reply([]byte)     {}

// logSink passes to a request's stream the log messages pushed to its session,
// and nothing else: a modern request's stream carries only what relates to it.
type logSink struct{ r sink }

func (l logSink) send(msg []byte) bool {
	if methodOf(msg) != "notifications/message" {
		return false
	}
	return l.r.send(msg)
}

func (l logSink) reply([]byte) {}

// methodOf is the method of an encoded message, or "".
func methodOf(msg []byte) string {
	var m struct {
		Method string `json:"method"`
	}
	_ = json.Unmarshal(msg, &m)
	return m.Method
}

// scope is the cacheScope of a method's result: a list, or the discovery
// that holds the servers' instructions, is the same for every caller only when the
// config gives no agent rules or a toolset of its own; a read is private unless the
// child says otherwise (modernResult keeps a child's own private scope).
func (g *Gateway) scope(method string) string {
	if method == "resources/read" {
		return scopePrivate
	}
	cfg := g.cfg.Load()
	if len(cfg.Policy.Agents) == 0 && len(cfg.Agents) == 0 {
		return scopePublic
	}
	return scopePrivate
}

// discover is server/discover: what Nexus speaks and offers, the same capabilities
// an initialize answer holds.
func discover(ctx context.Context, s *session, _ json.RawMessage, _ sink) (json.RawMessage, *RPCError) {
	s.g.lists.await(ctx)
	res, _ := json.Marshal(map[string]any{
		"supportedVersions": allVersions(),
		"capabilities":      s.g.frontCapabilities(s.agent, true),
		"instructions":      s.g.instructions(),
	})
	return res, nil
}

// frontCapabilities are the capabilities the front declares to agent: tools,
// and what at least one server the agent may use declared (a server not yet
// heard from counts as declaring everything: a client told less would never
// ask, and both fronts then say the same whichever answered first). In the modern era resources.subscribe means subscriptions/listen takes
// resource subscriptions.
func (g *Gateway) frontCapabilities(agent string, modern bool) map[string]any {
	caps := map[string]any{"tools": map[string]any{"listChanged": true}}
	var prompts, resources, subscribe, completions, logging, tasks, cancelTasks, taskCalls bool
	pol := g.pol.Load()
	for name, c := range g.kids() {
		if !pol.DecideItem(agent, name, "").Allowed {
			continue
		}
		cc, known := c.knownCaps()
		prompts = prompts || !known || cc.Prompts != nil
		resources = resources || !known || cc.Resources != nil
		subscribe = subscribe || !known || cc.Resources != nil && cc.Resources.Subscribe
		completions = completions || !known || cc.Completions != nil
		logging = logging || !known || cc.Logging != nil
		_, bridged := cc.Extensions[tasksExtension] // a legacy client's tasks are bridged to it (tasks_bridge.go)
		tasks = tasks || !known || bridged || cc.Tasks != nil
		cancelTasks = cancelTasks || !known || bridged || cc.Tasks != nil && cc.Tasks.Cancel != nil
		taskCalls = taskCalls || !known || bridged || cc.Tasks != nil && cc.Tasks.Requests != nil && cc.Tasks.Requests.Tools != nil && cc.Tasks.Requests.Tools.Call != nil
	}
	if prompts {
		caps["prompts"] = map[string]any{"listChanged": true}
	}
	if resources {
		caps["resources"] = map[string]any{"listChanged": true, "subscribe": subscribe}
	}
	if completions {
		caps["completions"] = map[string]any{}
	}
	if logging {
		caps["logging"] = map[string]any{}
	}
	if tasks && !modern {
		// The legacy tasks capability: tasks/list is Nexus's own (tasks.go).
		tc := map[string]any{"list": map[string]any{}}
		if cancelTasks {
			tc["cancel"] = map[string]any{}
		}
		if taskCalls {
			tc["requests"] = map[string]any{"tools": map[string]any{"call": map[string]any{}}}
		}
		caps["tasks"] = tc
	}
	if modern && g.offersTasks() {
		caps["extensions"] = map[string]any{tasksExtension: map[string]any{}}
	}
	return caps
}
