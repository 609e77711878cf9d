package aggregation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/policy"
	"github.com/nexus-mcp/nexus/upstream"
)

// method is one request method's step on the path: it runs with the session (and so
// the agent) known, and returns a raw result or an error. r is where the request came
// from: notifications and requests that belong to it (progress, sampling) go there.
type method func(ctx context.Context, s *session, params json.RawMessage, r sink) (json.RawMessage, *RPCError)

// methods is the gateway's dispatch table, built once.
// initializeWait bounds how long initialize waits for children still making their
// first attempt: their instructions and capabilities are part of its answer.
const initializeWait = time.Second

func (g *Gateway) methodTable() map[string]method {
	return map[string]method{
		"initialize": initialize,
		"ping": func(context.Context, *session, json.RawMessage, sink) (json.RawMessage, *RPCError) {
			return json.RawMessage("{}"), nil
		},
		"tools/list": listTools,
		"tools/call": callToolMethod,
		"prompts/list": listMethod(func(v *view) json.RawMessage { return v.prompts },
			func(seen *seenLists, v *view) { seen.prompts, seen.listedPrompts = v.promptsFP, true }),
		"prompts/get": getPrompt,
		"resources/list": listMethod(func(v *view) json.RawMessage { return v.resources },
			func(seen *seenLists, v *view) { seen.resources, seen.listedResources = v.resourcesFP, true }),
		"resources/templates/list": listMethod(func(v *view) json.RawMessage { return v.templates },
			func(seen *seenLists, v *view) { seen.resources, seen.listedResources = v.resourcesFP, true }),
		"resources/read":        readResource,
		"resources/subscribe":   subscribe,
		"resources/unsubscribe": unsubscribe,
		"completion/complete":   complete,
		"logging/setLevel":      setLevel,
		"tasks/get":             taskMethod("tasks/get"),
		"tasks/result":          taskMethod("tasks/result"),
		"tasks/cancel":          taskMethod("tasks/cancel"),
		"tasks/list":            listTasks,
	}
}

// supportedVersions are the protocol revisions the front speaks, newest first.
var supportedVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// initialize is the identity step: the agent is decided here, once, for the whole
// session. Over HTTP the bearer token decided it already; on stdio --agent or
// NEXUS_AGENT, else the client's self-reported name as a hint, else anonymous.
//
// The answer carries the children's instructions and, when a child offers tasks, the
// tasks capability: it waits for the children's first attempts as the first lists
// do, so that a client that starts with the gateway is told what its servers say.
func initialize(ctx context.Context, s *session, params json.RawMessage, _ sink) (json.RawMessage, *RPCError) {
	if s.ready.Load() {
		return nil, &RPCError{Code: jsonrpc.CodeInvalidRequest, Message: "the session is already initialized"}
	}
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
		Capabilities    struct {
			Sampling    json.RawMessage `json:"sampling"`
			Elicitation json.RawMessage `json:"elicitation"`
			Roots       json.RawMessage `json:"roots"`
		} `json:"capabilities"`
		ClientInfo clientInfo `json:"clientInfo"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("initialize params: %v", err)}
	}
	declared := func(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }
	s.caps = clientCaps{sampling: declared(p.Capabilities.Sampling), elicitation: declared(p.Capabilities.Elicitation), roots: declared(p.Capabilities.Roots)}
	s.caps.declared = forwardedCaps(p.Capabilities.Sampling, p.Capabilities.Elicitation, p.Capabilities.Roots)
	s.agent, s.client = s.preset, p.ClientInfo
	if s.agent == "" && s.front == frontStdio {
		s.agent = agentHint(p.ClientInfo.Name)
	}
	if s.agent == "" {
		s.agent = policy.Anonymous
	}
	if s.front == frontStdio && s.preset == "" {
		if err := s.pin.hold(s.agent); err != nil {
			return nil, &RPCError{Code: jsonrpc.CodeInvalidRequest, Message: err.Error()}
		}
	}
	version := supportedVersions[0]
	if slices.Contains(supportedVersions, p.ProtocolVersion) {
		version = p.ProtocolVersion
	}
	// The answer holds the children's instructions and whether any offers tasks,
	// so it waits a moment for children still making their first attempt; never
	// longer than initializeWait, so a hung child holds no client up.
	wait, cancel := context.WithTimeout(ctx, initializeWait)
	s.g.lists.await(wait)
	cancel()
	if s.g.started() {
		// The client knows the lists of this moment (it can list them); until the
		// children's first attempts are over its first lists are still to come.
		s.g.listed(s, func(seen *seenLists, v *view) {
			*seen = seenLists{tools: v.toolsFP, prompts: v.promptsFP, resources: v.resourcesFP,
				listedTools: true, listedPrompts: true, listedResources: true}
		})
	}
	s.ready.Store(true)
	s.g.log.Debug("session initialized", "session", s.id, "front", s.front, "agent", s.agent, "client", p.ClientInfo.Name)
	res, _ := json.Marshal(map[string]any{
		"protocolVersion": version,
		"capabilities":    s.g.frontCapabilities(s.agent, false),
		"serverInfo":      map[string]any{"name": "nexus", "version": Version},
		"instructions":    s.g.instructions(),
	})
	return res, nil
}

// forwardedCaps decodes the sampling, elicitation and roots capabilities a client
// declared, as a child serving that client alone is told them. A malformed one is
// not declared: the child must not send what the client cannot read.
func forwardedCaps(sampling, elicitation, roots json.RawMessage) mcp.ClientCapabilities {
	var caps mcp.ClientCapabilities
	decode := func(raw json.RawMessage, into any) bool {
		return len(raw) > 0 && string(raw) != "null" && json.Unmarshal(raw, into) == nil
	}
	var smp mcp.SamplingCapability
	if decode(sampling, &smp) {
		caps.Sampling = &smp
	}
	var eli mcp.ElicitationCapability
	if decode(elicitation, &eli) {
		caps.Elicitation = &eli
	}
	var rts struct {
		ListChanged bool `json:"listChanged,omitempty"`
	}
	if decode(roots, &rts) {
		caps.Roots = &rts
	}
	return caps
}

// listMethod answers a list from the agent's view, whose lists hold only what its
// policy lets it use, and records what the client was given, so that a later
// list_changed goes only to sessions whose lists really changed.
func listMethod(result func(*view) json.RawMessage, record func(*seenLists, *view)) method {
	return func(ctx context.Context, s *session, _ json.RawMessage, _ sink) (json.RawMessage, *RPCError) {
		s.g.lists.await(ctx)
		return result(s.g.listed(s, record)), nil
	}
}

// listed returns the session's view and records, in step with listsChanged, what
// the client is being given.
func (g *Gateway) listed(s *session, record func(*seenLists, *view)) *view {
	g.listsMu.Lock()
	defer g.listsMu.Unlock()
	v := s.view()
	s.mu.Lock()
	record(&s.seen, v)
	s.mu.Unlock()
	return v
}

// callToolMethod is tools/call: the chain in chain.go.
func callToolMethod(ctx context.Context, s *session, params json.RawMessage, r sink) (json.RawMessage, *RPCError) {
	p, err := decodeCallParams(params)
	if err != nil {
		return nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(`tools/call params must be {"name": "<tool>", "arguments": {...}}: %v`, err)}
	}
	c := &caller{s: s, r: r}
	p, raw, rpcErr, handled := s.g.searchCall(ctx, c, s.agent, p)
	if handled {
		return raw, rpcErr
	}
	if len(p.Task) > 0 && string(p.Task) != "null" {
		c.letGo()
		return s.g.callTask(ctx, c, p)
	}
	return s.g.callTool(ctx, c, s.agent, p)
}

// getPrompt is prompts/get: policy on the prompt, then its owner.
func getPrompt(ctx context.Context, s *session, params json.RawMessage, r sink) (json.RawMessage, *RPCError) {
	var p struct {
		Name           string          `json:"name"`
		Arguments      json.RawMessage `json:"arguments,omitempty"`
		Meta           json.RawMessage `json:"_meta,omitempty"`
		InputResponses json.RawMessage `json:"inputResponses,omitempty"`
		RequestState   json.RawMessage `json:"requestState,omitempty"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.Name == "" {
		return nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: `prompts/get params must be {"name": "<prompt>", "arguments": {...}}`}
	}
	pr := s.g.prompt(ctx, s, p.Name)
	if pr == nil {
		return nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown prompt %s (prompts/list shows them)", quoted(p.Name))}
	}
	if d := s.g.decideItem("prompts/get", s.agent, pr.server, pr.name); !d.Allowed {
		return nil, refusal(s, d, "get prompt "+quoted(p.Name))
	}
	out := map[string]any{"name": pr.name}
	if len(p.Arguments) > 0 {
		out["arguments"] = p.Arguments
	}
	// A 2026-07-28 retry's answers and the child's state (mrtr.go) go back to it.
	if len(p.InputResponses) > 0 {
		out["inputResponses"] = p.InputResponses
	}
	if len(p.RequestState) > 0 && string(p.RequestState) != "null" {
		out["requestState"] = p.RequestState
	}
	if meta := passMeta(p.Meta); meta != nil {
		out["_meta"] = meta
	}
	return s.g.childRequest(ctx, &caller{s: s, r: r}, pr.server, "prompts/get", out)
}

// readResource is resources/read: policy on the owner's resources, then the owner,
// asked for the URI it knows. URIs in the contents are given back as the client
// must spell them.
func readResource(ctx context.Context, s *session, params json.RawMessage, r sink) (json.RawMessage, *RPCError) {
	server, uri, rpcErr := s.resourceServer(ctx, params, "read")
	if rpcErr != nil {
		return nil, rpcErr
	}
	if uri != uriOf(params) {
		params = setField(params, "uri", uri)
	}
	raw, rpcErr := s.g.childRequest(ctx, &caller{s: s, r: r}, server, "resources/read", forwardParams(params))
	if rpcErr != nil {
		return nil, rpcErr
	}
	return s.view().res.clientURIs(server, raw), nil
}

// subscribe forwards resources/subscribe to the owner the first time any session
// subscribes to a URI; updates then reach only the sessions that subscribed, under
// the URI each subscribed with.
func subscribe(ctx context.Context, s *session, params json.RawMessage, _ sink) (json.RawMessage, *RPCError) {
	server, uri, rpcErr := s.resourceServer(ctx, params, "subscribe to")
	if rpcErr != nil {
		return nil, rpcErr
	}
	k := subKey{server: server, uri: uri}
	c := s.g.kids()[server]
	if c == nil {
		return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: fmt.Sprintf("server %s is no longer in the config", server)}
	}
	if caps, known := c.knownCaps(); known && (caps.Resources == nil || !caps.Resources.Subscribe) {
		// As the server answers it: it offers no subscriptions.
		return nil, &RPCError{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("server %s does not offer resource subscriptions (resources/subscribe)", server)}
	}
	if c.config().PerClient() {
		k.owner = s
	}
	if err := s.g.subs.add(ctx, s.g, s, k, uriOf(params)); err != nil {
		return nil, err
	}
	return json.RawMessage("{}"), nil
}

func unsubscribe(ctx context.Context, s *session, params json.RawMessage, _ sink) (json.RawMessage, *RPCError) {
	uri := uriOf(params)
	if uri == "" {
		return nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: `resources/unsubscribe params must be {"uri": "<uri>"}`}
	}
	s.mu.Lock()
	k, ok := s.subs[uri]
	s.mu.Unlock()
	if ok {
		s.g.subs.remove(s.g, s, k, uri)
	}
	return json.RawMessage("{}"), nil
}

func uriOf(params json.RawMessage) string {
	var p struct {
		URI string `json:"uri"`
	}
	_ = json.Unmarshal(params, &p)
	return p.URI
}

// resourceServer finds the owner of the URI in params, and the URI the owner knows,
// and applies the policy. A URI several servers could own is refused with its
// namespaced forms: guessing would send the request to a server the client did not
// mean.
func (s *session) resourceServer(ctx context.Context, params json.RawMessage, verb string) (server, uri string, _ *RPCError) {
	asked := uriOf(params)
	if asked == "" {
		return "", "", &RPCError{Code: jsonrpc.CodeInvalidParams, Message: `params must be {"uri": "<uri>"}`}
	}
	s.g.lists.await(ctx) // the owners are known once their first lists are in
	// A server still making its first attempt may be the owner: wait for it, up
	// to the bound of a tools/call.
	s.g.manifestFor(ctx, func(m *manifest) bool { return listsURI(m, asked) })
	server, uri, candidates := s.routeResource(asked)
	if candidates != nil {
		return "", "", &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("resource %s is served by several servers; name one: %s", quoted(asked), quoteJoin(candidates)),
			Data: map[string]any{"uri": asked, "candidates": candidates}}
	}
	if server == "" {
		return "", "", &RPCError{Code: codeNotFound, Message: fmt.Sprintf("resource %s not found: no server lists it or a template that matches it", quoted(asked)), Data: map[string]any{"uri": asked}}
	}
	method := "resources/read"
	if verb != "read" {
		method = "resources/subscribe"
	}
	if d := s.g.decideItem(method, s.agent, server, ""); !d.Allowed {
		return "", "", refusal(s, d, verb+" resource "+quoted(asked))
	}
	return server, uri, nil
}

// routeResource routes a client's URI by the names the agent was given; a URI of
// a server the agent may not read is found among every server's, for policy to
// refuse by name.
func (s *session) routeResource(uri string) (server, childURI string, candidates []string) {
	m, v := s.lists()
	if server, childURI, candidates = v.res.route(uri); server != "" || candidates != nil {
		return server, childURI, candidates
	}
	server, childURI, candidates = m.res.route(uri)
	if candidates != nil {
		server, childURI, _ = splitNamespaced(candidates[0]) // none is readable: refused below
	}
	return server, childURI, nil
}

// complete is completion/complete: the reference names a prompt (by its wire name)
// or a resource template; policy applies as for the prompt or the resources.
func complete(ctx context.Context, s *session, params json.RawMessage, r sink) (json.RawMessage, *RPCError) {
	var p map[string]json.RawMessage
	var ref struct {
		Type string `json:"type"`
		Name string `json:"name"`
		URI  string `json:"uri"`
	}
	if json.Unmarshal(params, &p) != nil || json.Unmarshal(p["ref"], &ref) != nil {
		return nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: `completion/complete params must hold "ref" and "argument"`}
	}
	var server string
	switch ref.Type {
	case "ref/prompt":
		pr := s.g.prompt(ctx, s, ref.Name)
		if pr == nil {
			return nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown prompt %s", quoted(ref.Name))}
		}
		if d := s.g.decideItem("completion/complete", s.agent, pr.server, pr.name); !d.Allowed {
			return nil, refusal(s, d, "complete prompt "+quoted(ref.Name))
		}
		server = pr.server
		p["ref"], _ = json.Marshal(map[string]string{"type": ref.Type, "name": pr.name})
	case "ref/resource":
		s.g.manifestFor(ctx, func(m *manifest) bool {
			_, _, ok := m.res.templateOwner(ref.URI)
			return ok || listsURI(m, ref.URI)
		})
		var uri string
		var ok bool
		m, v := s.lists()
		if server, uri, ok = v.res.templateOwner(ref.URI); !ok {
			server, uri, ok = m.res.templateOwner(ref.URI)
		}
		if !ok {
			if server, uri, _ = s.routeResource(ref.URI); server == "" {
				return nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown resource template %s", quoted(ref.URI))}
			}
		}
		if d := s.g.decideItem("completion/complete", s.agent, server, ""); !d.Allowed {
			return nil, refusal(s, d, "complete resource "+quoted(ref.URI))
		}
		if uri != ref.URI {
			p["ref"], _ = json.Marshal(map[string]string{"type": ref.Type, "uri": uri})
		}
	default:
		return nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(`unknown ref type %s: use "ref/prompt" or "ref/resource"`, quoted(ref.Type))}
	}
	raw, _ := json.Marshal(p)
	return s.g.childRequest(ctx, &caller{s: s, r: r}, server, "completion/complete", forwardParams(raw))
}

// setLevel records the session's logging level (log messages below it are not sent
// to it) and asks the children for the most verbose level any session wants.
func setLevel(ctx context.Context, s *session, params json.RawMessage, _ sink) (json.RawMessage, *RPCError) {
	lvl, rpcErr := levelParam(params)
	if rpcErr != nil {
		return nil, rpcErr
	}
	s.level.Store(lvl)
	s.g.forwardLevel(ctx, s)
	return json.RawMessage("{}"), nil
}

// levelParam is the level logging/setLevel's params name, or the -32602
// error that refuses it.
func levelParam(params json.RawMessage) (int32, *RPCError) {
	var p struct {
		Level string `json:"level"`
	}
	_ = json.Unmarshal(params, &p)
	lvl, ok := levelIndex(p.Level)
	if !ok {
		return 0, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown logging level %s: use one of %s", quoted(p.Level), strings.Join(logLevels, ", "))}
	}
	return int32(lvl), nil
}

// decideItem decides a prompt (name != "") or the resources of server for agent, for
// method. A refusal is observed like a refused tool call; an allowed request is a
// read and is not.
func (g *Gateway) decideItem(method, agent, server, name string) policy.Decision {
	d := g.pol.Load().DecideItem(agent, server, name)
	g.denials.Record(d)
	if !d.Allowed {
		g.log.Info("policy: request refused", "agent", agent, "item", d.Tool, "rule", d.Rule, "origin", d.Origin)
		rec := &Call{Start: time.Now(), Method: method, Agent: agent, Tool: d.Tool, Server: server, Requested: d.Tool}
		rec.decided(d)
		g.observe(rec)
	}
	return d
}

// refusal is the error the client of s gets for a denied prompt or resource: it
// names the agent, what was refused, the rule (toldTo) and how to grant it. The
// request never reaches the child.
func refusal(s *session, d policy.Decision, what string) *RPCError {
	d = toldTo(s, d)
	origin := d.Origin
	if d.Source != "" {
		origin += " in " + d.Source
	}
	msg := fmt.Sprintf("agent %q may not %s: denied by %s (%s)", d.Agent, what, origin, d.Rule)
	if h := d.Hint(); h != "" {
		msg += ". To grant it: " + h
	}
	return &RPCError{Code: jsonrpc.CodeInvalidParams, Message: msg}
}

// prompt finds a prompt by its wire name; a name that may belong to a server still
// making its first attempt waits for it, as a tools/call does.
func (g *Gateway) prompt(ctx context.Context, s *session, name string) *prompt {
	if pr := g.manifestOf(s).byPrompt[name]; pr != nil {
		return pr
	}
	if g.awaitFirstAttempts(ctx, g.possibleOwners(name)) {
		g.lists.rebuild(ctx)
	}
	return g.lists.current().byPrompt[name]
}

// manifestFor returns the manifest, once has says it holds what a request names,
// or once every server still making its first attempt made it (each waited for up
// to its call timeout, as a tools/call does): a resource of a server that starts
// slowly is read, not "not found".
func (g *Gateway) manifestFor(ctx context.Context, has func(*manifest) bool) *manifest {
	if m := g.lists.current(); has(m) {
		return m
	}
	if g.awaitFirstAttempts(ctx, slices.Collect(maps.Values(g.kids()))) {
		g.lists.rebuild(ctx)
	}
	return g.lists.current()
}

// listsURI reports whether a server lists uri, or a template that matches it.
func listsURI(m *manifest, uri string) bool {
	server, _, candidates := m.res.route(uri)
	return server != "" || candidates != nil
}

// childRequest sends one request to a server, as the request of cl (nil: no
// client), and returns its raw, redacted answer, or the child's error with its
// code. It waits for a server that is connecting or restarting, as a tools/call
// does, and a request the server refused for its session (it restarted) is sent
// once more on the new session. A "client" server gets it on cl's session's own
// connection.
func (g *Gateway) childRequest(ctx context.Context, cl *caller, server, method string, params any) (json.RawMessage, *RPCError) {
	c := g.kids()[server]
	if c == nil {
		return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: fmt.Sprintf("server %s is no longer in the config", server)}
	}
	ctx, cancel := context.WithTimeoutCause(ctx, c.config().CallTimeout(), errCallTimeout)
	defer cancel()
	cn, err := c.connFor(ctx, cl)
	if err != nil {
		return nil, connError(err)
	}
	raw, _, err := g.requestInput(ctx, cn, cl, method, params, upstream.Outgoing{})
	if errors.Is(err, upstream.ErrSessionLost) {
		if next := c.connForAgain(ctx, cl, cn); next != nil {
			cn = next
			raw, _, err = g.requestInput(ctx, cn, cl, method, params, upstream.Outgoing{})
		}
	}
	cn.CatchUp(ctx, false) // the notifications before the answer go first
	if err != nil {
		return nil, g.childError(ctx, server, method, err)
	}
	return g.fromChild(raw), nil
}

// connError is the error of a request for which connFor found no connection.
func connError(err error) *RPCError {
	return &RPCError{Code: jsonrpc.CodeInternal, Message: err.Error()}
}
