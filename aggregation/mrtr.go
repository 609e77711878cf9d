package aggregation

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/upstream"
)

// This file bridges multi round-trip requests (2026-07-28's InputRequiredResult)
// between the eras, so that a client never needs to know which era a server speaks:
//
//   - modern client, modern child: the child's InputRequiredResult reaches the client
//     (through policy and the redactor, as any result); its requestState is sealed
//     inside one of Nexus's, which names the server, the agent and the request, so
//     that the retry goes to the same child and a tampered or borrowed state is
//     refused;
//   - modern client, legacy child: a request the child sends during the call
//     (sampling, elicitation, roots) becomes an InputRequiredResult; the call waits
//     in this process (a flight), and the client's retry answers the child and
//     takes the call's next step;
//   - legacy client, modern child: the child's input requests go to the client as
//     requests of their own, and the child is asked again with the answers
//     (fulfil); the client sees one call;
//   - legacy with legacy: the child's requests are forwarded as they always were.

// maxInputRounds bounds the rounds of input one legacy client's call may take with
// a modern child: a child that never stops asking must not hold the call forever.
const maxInputRounds = 8

// flightLinger is how long a call that finished while its client was away keeps its
// answer for the retry that will fetch it.
const flightLinger = time.Minute

// Kinds of sealed request state.
const (
	stateFlight = "flight" // a call waiting in this process for its client's input
	stateChild  = "child"  // a modern child's own state, wrapped
)

// requestState is what Nexus's requestState holds, integrity-protected (sealer):
// whose it is and for which request, until when, and what it continues.
type requestState struct {
	Kind    string          `json:"k"`
	Flight  string          `json:"f,omitempty"` // stateFlight: the flight's id
	Server  string          `json:"s,omitempty"` // stateChild, stateTask: the child that made it
	Tool    string          `json:"t,omitempty"` // stateTask: the canonical name of the task's tool
	Child   json.RawMessage `json:"c,omitempty"` // stateChild: the child's own state, if any
	Agent   string          `json:"a"`
	Method  string          `json:"m"`
	Digest  string          `json:"d"` // of the request's salient params (requestDigest)
	Expires int64           `json:"e"` // unix milliseconds
}

// sealer seals and opens request states with an HMAC key: the gateway's own, random
// at start, unless Options.StateKey gives one that replicas share.
type sealer struct{ key []byte }

func newSealer(key []byte) sealer {
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
	}
	return sealer{key: key}
}

func (sl sealer) seal(st requestState) string {
	payload, _ := json.Marshal(st)
	mac := hmac.New(sha256.New, sl.key)
	mac.Write(payload)
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// errBadState is why a retry's requestState was refused.
var errBadState = errors.New("the requestState was not made by this gateway for this request")

// open verifies a state and that it belongs to agent's request method with digest.
func (sl sealer) open(s, agent, method, digest string, now time.Time) (requestState, error) {
	var st requestState
	body, sum, ok := strings.Cut(s, ".")
	payload, err1 := base64.RawURLEncoding.DecodeString(body)
	got, err2 := base64.RawURLEncoding.DecodeString(sum)
	if !ok || err1 != nil || err2 != nil {
		return st, errBadState
	}
	mac := hmac.New(sha256.New, sl.key)
	mac.Write(payload)
	if !hmac.Equal(got, mac.Sum(nil)) || json.Unmarshal(payload, &st) != nil {
		return st, fmt.Errorf("%w (it was altered, or made by another Nexus process that does not share its state key)", errBadState)
	}
	switch {
	case st.Agent != agent:
		return st, fmt.Errorf("%w: it belongs to another agent", errBadState)
	case st.Method != method || st.Digest != digest:
		return st, fmt.Errorf("%w: it belongs to another request (a retry repeats the original params)", errBadState)
	case now.UnixMilli() > st.Expires:
		return st, fmt.Errorf("%w: it expired", errBadState)
	}
	return st, nil
}

// requestDigest identifies a request by what a retry must repeat: the tool's or
// prompt's name and its arguments (their JSON made canonical), or the URI.
func requestDigest(method string, params json.RawMessage) string {
	var p struct {
		Name      string          `json:"name"`
		URI       string          `json:"uri"`
		Arguments json.RawMessage `json:"arguments"`
	}
	_ = json.Unmarshal(params, &p)
	h := sha256.New()
	h.Write([]byte(method + "\x00" + p.Name + "\x00" + p.URI + "\x00"))
	if args, err := normaliseArguments(p.Arguments); err == nil {
		h.Write(canonicalJSON(args))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// canonicalJSON re-encodes a JSON value with sorted object keys, so that a retry
// that spells the same arguments in another order matches.
func canonicalJSON(raw json.RawMessage) []byte {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	b, _ := json.Marshal(v) // maps encode with sorted keys
	return b
}

// retryInput is a retry's answers and the state it returns.
type retryInput struct {
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
	RequestState   *string                    `json:"requestState"`
}

// bridged wraps the step of a method that may need the client's input, for a
// modern request: a retry's state is opened (and continues its flight, or goes to
// its child with the child's own state), and the step runs as a flight, so that a
// legacy child's request during it becomes an InputRequiredResult.
func bridged(name string, step method) method {
	return func(ctx context.Context, s *session, params json.RawMessage, r sink) (json.RawMessage, *RPCError) {
		g := s.g
		var in retryInput
		if bytes.Contains(params, []byte(`"requestState"`)) || bytes.Contains(params, []byte(`"inputResponses"`)) {
			if err := json.Unmarshal(params, &in); err != nil {
				return nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s params: inputResponses must be an object of results and requestState a string: %v", name, err)}
			}
		}
		// Only a retry, or a call that asks for input, needs the digest.
		first := params
		digest := sync.OnceValue(func() string { return requestDigest(name, first) })
		var server string // the child a wrapped state goes back to
		if in.RequestState != nil {
			st, err := g.sealer.open(*in.RequestState, s.agent, name, digest(), time.Now())
			if err != nil {
				return nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: err.Error() + "; send the request again without inputResponses and requestState"}
			}
			if st.Kind == stateFlight {
				return g.resume(ctx, s, st.Flight, in.InputResponses, r)
			}
			if owner := g.ownerOf(ctx, s, name, params); owner != st.Server {
				return nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("the requestState continues a request of server %s, which no longer serves it; send the request again without inputResponses and requestState", st.Server)}
			}
			server = st.Server
			params = withFields(params, map[string]json.RawMessage{"requestState": st.Child})
		}
		// A modern child's own InputRequiredResult is sealed for the retry to
		// find the same child again, and its task gets a handle. It may run once
		// the request that started the call has been answered (a flight), so it
		// does not end with that request.
		wctx := context.WithoutCancel(ctx)
		wrap := func(raw json.RawMessage) (json.RawMessage, *RPCError) {
			switch resultTypeOf(raw) {
			case resultTask:
				if name != "tools/call" || !s.caps.tasks {
					return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: "the server answered with a task, which this request did not declare it takes (" + tasksExtension + ")"}
				}
				server, tool := g.callOwner(wctx, s, params)
				return g.sealTask(s, server, tool, raw)
			case resultInputRequired:
			default:
				return raw, nil
			}
			unknown, missing := s.inputNeeds(raw)
			if len(unknown) > 0 {
				return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: fmt.Sprintf("the server asked for input with %s, which is not an input request (sampling/createMessage, elicitation/create or roots/list)", strings.Join(unknown, ", "))}
			}
			if len(missing) > 0 {
				return nil, &RPCError{Code: codeMissingCapability,
					Message: fmt.Sprintf("the server asks for %s, which this request's clientCapabilities do not declare", strings.Join(missing, ", ")),
					Data:    map[string]any{"requiredCapabilities": missing}}
			}
			if server == "" {
				server = g.ownerOf(wctx, s, name, params)
			}
			return g.wrapChildState(s, name, digest(), server, raw), nil
		}
		if !s.caps.sampling && !s.caps.elicitation && !s.caps.roots {
			// A client that declared none of them is never asked anything
			// (forwardChildRequest refuses, or answers roots with none): the call
			// runs here, without a flight.
			raw, rpcErr := step(ctx, s, params, r)
			if rpcErr != nil {
				return nil, rpcErr
			}
			return wrap(raw)
		}
		return g.fly(ctx, s, name, digest, params, r, step, wrap)
	}
}

// inputMethods are the requests an InputRequiredResult may ask a client for, and the
// capability each needs.
var inputMethods = map[string]string{"sampling/createMessage": "sampling", "elicitation/create": "elicitation", "roots/list": "roots"}

// inputNeeds reads an InputRequiredResult's requests once: the methods that are
// none of inputMethods (a server cannot make a client run anything else), and the
// capabilities the others need that the session's client did not declare.
func (s *session) inputNeeds(raw json.RawMessage) (unknown, undeclared []string) {
	var res struct {
		InputRequests map[string]struct {
			Method string `json:"method"`
		} `json:"inputRequests"`
	}
	_ = json.Unmarshal(raw, &res)
	for _, req := range res.InputRequests {
		c, known := inputMethods[req.Method]
		switch {
		case !known && !slices.Contains(unknown, quoted(req.Method)):
			unknown = append(unknown, quoted(req.Method))
		case known && !s.declared(req.Method) && !slices.Contains(undeclared, c):
			undeclared = append(undeclared, c)
		}
	}
	slices.Sort(unknown)
	slices.Sort(undeclared)
	return unknown, undeclared
}

// wrapChildState seals a modern child's InputRequiredResult's state inside Nexus's.
func (g *Gateway) wrapChildState(s *session, method, digest, server string, raw json.RawMessage) json.RawMessage {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return raw
	}
	st := requestState{Kind: stateChild, Server: server, Child: fields["requestState"], Agent: s.agent, Method: method, Digest: digest,
		Expires: time.Now().Add(childRequestWait).UnixMilli()}
	fields["requestState"] = marshal(g.sealer.seal(st))
	return marshal(fields)
}

// callOwner is the server and the canonical name of the tool a tools/call of s names.
func (g *Gateway) callOwner(ctx context.Context, s *session, params json.RawMessage) (server, tool string) {
	var p struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(params, &p)
	if t, err := g.resolveCall(ctx, g.agentAudience(s.agent), p.Name); err == nil {
		return t.Server, t.Canonical
	}
	return "", ""
}

// ownerOf is the server a tools/call, prompts/get or resources/read of s goes to, or "".
func (g *Gateway) ownerOf(ctx context.Context, s *session, method string, params json.RawMessage) string {
	switch method {
	case "tools/call":
		server, _ := g.callOwner(ctx, s, params)
		return server
	case "prompts/get":
		var p struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(params, &p)
		if pr := g.prompt(ctx, s, p.Name); pr != nil {
			return pr.server
		}
	case "resources/read":
		server, _, _ := s.routeResource(uriOf(params))
		return server
	}
	return ""
}

// withFields sets fields of a JSON object (a nil value removes the field).
func withFields(raw json.RawMessage, set map[string]json.RawMessage) json.RawMessage {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || fields == nil {
		fields = map[string]json.RawMessage{}
	}
	for k, v := range set {
		if len(v) == 0 || string(v) == "null" {
			delete(fields, k)
		} else {
			fields[k] = v
		}
	}
	return marshal(fields)
}

// flight is a modern request's call running on its own, so that it can wait for its
// client's input across requests: each of the client's retries attaches to it and
// is answered with its next step, an InputRequiredResult or the call's result.
type flight struct {
	g      *Gateway
	id     string
	agent  string
	method string
	digest func() string // of the request's salient params, made on first use
	cancel context.CancelFunc
	done   chan struct{} // closed when the call finished; result and rpcErr are set
	result json.RawMessage
	rpcErr *RPCError
	wake   chan struct{} // an input request arrived
	// wrap seals the state of an InputRequiredResult the call itself returned (a
	// modern child's), or refuses it when it asks what the client cannot give.
	wrap func(json.RawMessage) (json.RawMessage, *RPCError)

	mu       sync.Mutex
	at       sink // the stream of the request attached now, nil between requests
	attached bool
	asks     map[string]*input // asked and not yet answered, by key
	next     int
	linger   *time.Timer
}

// input is one request of a child waiting for its client's answer.
type input struct {
	method string
	params json.RawMessage
	answer chan json.RawMessage
}

// flights are the calls of this gateway waiting for their clients' input.
type flights struct {
	mu sync.Mutex
	m  map[string]*flight
}

func (fs *flights) put(f *flight) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.m == nil {
		fs.m = map[string]*flight{}
	}
	fs.m[f.id] = f
}

func (fs *flights) get(id string) *flight {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.m[id]
}

func (fs *flights) drop(f *flight) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.m[f.id] == f {
		delete(fs.m, f.id)
	}
}

// fly runs step as a flight and returns its first answer: the result, or an
// InputRequiredResult when a legacy child asked the client something first. The
// call runs under a context of its own (bounded by the child's call timeout, as any
// call), so that it outlives the request that started it.
func (g *Gateway) fly(ctx context.Context, s *session, method string, digest func() string, params json.RawMessage, r sink, step method, wrap func(json.RawMessage) (json.RawMessage, *RPCError)) (json.RawMessage, *RPCError) {
	f := &flight{g: g, id: newSessionID(), agent: s.agent, method: method, digest: digest, wrap: wrap,
		done: make(chan struct{}), wake: make(chan struct{}, 1), asks: map[string]*input{}, at: r, attached: true}
	callCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f.cancel = cancel
	if q := s.scope(); q != nil {
		q.flight = f // the child's requests during the call go to the flight
	}
	go func() {
		defer cancel()
		f.result, f.rpcErr = step(callCtx, s, params, f)
		if f.rpcErr == nil {
			f.result, f.rpcErr = f.wrap(f.result)
		}
		close(f.done)
	}()
	return f.wait(ctx)
}

// resume attaches a retry to its flight: the answers go to the child's waiting
// requests, and the retry is answered with the call's next step.
func (g *Gateway) resume(ctx context.Context, s *session, id string, answers map[string]json.RawMessage, r sink) (json.RawMessage, *RPCError) {
	f := g.flights.get(id)
	if f == nil {
		return nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: "the call this requestState continues has ended, or waits in another Nexus process (a retry must reach the process that answered the request); send the request again without inputResponses and requestState"}
	}
	f.mu.Lock()
	if f.attached {
		f.mu.Unlock()
		return nil, &RPCError{Code: jsonrpc.CodeInvalidRequest, Message: "another retry of this call is already waiting for it"}
	}
	f.attached, f.at = true, r
	if f.linger != nil {
		f.linger.Stop()
	}
	for key, answer := range answers {
		if in := f.asks[key]; in != nil {
			delete(f.asks, key)
			in.answer <- answer
		}
	}
	f.mu.Unlock()
	return f.wait(ctx)
}

// wait answers the request attached to f with the call's result, or with an
// InputRequiredResult for the input requests still unanswered; the flight then
// waits for the next retry. A client that goes away (its stream closed, or
// cancelled) before the first answer cancels the call.
func (f *flight) wait(ctx context.Context) (json.RawMessage, *RPCError) {
	for {
		f.mu.Lock()
		pending := len(f.asks)
		f.mu.Unlock()
		if pending > 0 {
			return f.park(), nil
		}
		select {
		case <-f.done:
			f.g.flights.drop(f)
			return f.result, f.rpcErr
		case <-f.wake:
		case <-ctx.Done():
			f.mu.Lock()
			first := f.next == 0
			f.attached, f.at = false, nil
			f.mu.Unlock()
			if first {
				f.cancel()
			} else {
				f.parkFor()
			}
			return nil, &RPCError{Code: jsonrpc.CodeCancelled, Message: "request cancelled by the client"}
		}
	}
}

// park detaches the current request with an InputRequiredResult that asks for every
// input still unanswered, and keeps the flight for the retry.
func (f *flight) park() json.RawMessage {
	f.mu.Lock()
	requests := make(map[string]any, len(f.asks))
	for key, in := range f.asks {
		requests[key] = map[string]any{"method": in.method, "params": in.params}
	}
	f.attached, f.at = false, nil
	f.mu.Unlock()
	f.g.flights.put(f)
	f.parkFor()
	st := requestState{Kind: stateFlight, Flight: f.id, Agent: f.agent, Method: f.method, Digest: f.digest(),
		Expires: time.Now().Add(childRequestWait).UnixMilli()}
	res, _ := json.Marshal(map[string]any{"resultType": resultInputRequired, "inputRequests": requests, "requestState": f.g.sealer.seal(st)})
	return res
}

// parkFor drops the flight, and cancels its call, if no retry attaches to it in
// time: the input requests wait as long as a legacy client's would
// (childRequestWait); a finished call's answer waits flightLinger.
func (f *flight) parkFor() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.linger != nil {
		f.linger.Stop()
	}
	wait := childRequestWait
	select {
	case <-f.done:
		wait = flightLinger
	default:
	}
	f.linger = time.AfterFunc(wait, func() {
		f.mu.Lock()
		attached := f.attached
		f.mu.Unlock()
		if !attached {
			f.g.flights.drop(f)
			f.cancel()
		}
	})
}

// ask is a child's request during the flight's call: it waits for the client's
// answer, which a retry brings.
func (f *flight) ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *RPCError) {
	in := &input{method: method, params: params, answer: make(chan json.RawMessage, 1)}
	f.mu.Lock()
	f.next++
	key := strings.ReplaceAll(method, "/", "-") + "-" + strconv.Itoa(f.next)
	f.asks[key] = in
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
	select {
	case answer := <-in.answer:
		return answer, nil
	case <-ctx.Done():
		f.mu.Lock()
		delete(f.asks, key)
		f.mu.Unlock()
		return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: fmt.Sprintf("the client did not answer %s in time", method)}
	}
}

// send passes what the call sends meanwhile (progress) to the request attached now.
func (f *flight) send(msg []byte) bool {
	f.mu.Lock()
	at := f.at
	f.mu.Unlock()
	return at != nil && at.send(msg)
}

func (f *flight) reply([]byte) {}

// fulfil answers a modern child's InputRequiredResult for a caller that cannot take
// one (a legacy client, or none): each input request goes to the client as a request
// of its own, when it declared the capability, and the answers return as the
// retry's inputResponses, with the child's requestState. A request the client
// cannot answer is left out: the child may ask again or answer without it.
func (g *Gateway) fulfil(ctx context.Context, c *caller, server string, raw json.RawMessage) (map[string]json.RawMessage, *RPCError) {
	var res struct {
		InputRequests map[string]struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		} `json:"inputRequests"`
		RequestState json.RawMessage `json:"requestState"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: fmt.Sprintf("server %s sent an InputRequiredResult Nexus cannot read: %v", server, err)}
	}
	set := map[string]json.RawMessage{"requestState": res.RequestState}
	answers := map[string]json.RawMessage{}
	var cannot []string
	for key, req := range res.InputRequests {
		if c == nil || c.s == nil || !c.s.declared(req.Method) {
			if req.Method == "roots/list" {
				answers[key] = json.RawMessage(`{"roots":[]}`)
			} else if !slices.Contains(cannot, req.Method) {
				cannot = append(cannot, req.Method)
			}
			continue
		}
		if !g.view(c.s.agent).sees[server] {
			continue
		}
		params := req.Params
		if len(params) == 0 {
			params = json.RawMessage("{}")
		}
		wait, cancel := context.WithTimeout(ctx, childRequestWait)
		answer, rpcErr := c.s.request(wait, c.r, req.Method, params)
		cancel()
		if rpcErr != nil {
			g.log.Info("the client did not answer a server's input request", "server", server, "method", req.Method, "err", rpcErr.Message)
			continue
		}
		answers[key] = answer
	}
	if len(answers) == 0 && len(cannot) > 0 {
		// Nothing the child asked can be answered: asking it again would only
		// bring the same question back.
		slices.Sort(cannot)
		return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: fmt.Sprintf("server %s asked for input the client cannot give (%s; the client did not declare the capability)", server, strings.Join(cannot, ", "))}
	}
	set["inputResponses"] = marshal(answers)
	return set, nil
}

// requestInput sends a request to a child and returns its answer; when the child
// asks for input its caller cannot be given as an InputRequiredResult (needsInput),
// the caller is asked (fulfil) and the child asked again, up to maxInputRounds
// times. asked reports that it was. The caller catches up with the child's
// notifications (conn.CatchUp) before each question; after the answer, that is
// the caller's own step.
func (g *Gateway) requestInput(ctx context.Context, cn *conn, c *caller, method string, params any, out upstream.Outgoing) (raw json.RawMessage, asked bool, err error) {
	raw, err = cn.RequestWith(ctx, method, params, out)
	for round := 0; err == nil && needsInput(c, raw); round++ {
		cn.CatchUp(ctx, false)
		if round == maxInputRounds {
			return nil, true, &RPCError{Code: jsonrpc.CodeInternal, Message: fmt.Sprintf("server %s asked for input %d times in one %s; Nexus stopped asking the client", cn.server, maxInputRounds, method)}
		}
		set, rpcErr := g.fulfil(ctx, c, cn.server, raw)
		if rpcErr != nil {
			return nil, true, rpcErr
		}
		asked = true
		raw, err = cn.RequestWith(ctx, method, withFields(marshal(params), set), out)
	}
	return raw, asked, err
}

// needsInput reports a result the caller must be asked for input for: an
// InputRequiredResult, for a caller of the legacy era (or none).
func needsInput(c *caller, raw json.RawMessage) bool {
	return (c == nil || c.s == nil || !c.s.era.takesInputRequired()) && resultTypeOf(raw) == resultInputRequired
}

// askClient is how a child's request during a call reaches the call's client, as
// its era has it (clientEra.ask).
func (c *caller) askClient(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *RPCError) {
	return c.s.era.ask(ctx, c.s, c.r, method, params)
}
