package aggregation

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/policy"
)

// Front transports, as sessions record them.
const (
	frontStdio = "stdio"
	frontHTTP  = "http"
)

// sink is a way to one client: a stdio connection, one HTTP request's response, or an
// HTTP session's standalone stream. Messages reach a sink already redacted.
type sink interface {
	// send delivers a notification or a request to the client; false when it could
	// not be delivered (the stream is gone).
	send(msg []byte) bool
	// reply delivers the response that ends the request the sink belongs to.
	reply(msg []byte)
}

// session is one client: one stdio connection, or one Mcp-Session-Id over HTTP. The
// agent is decided once, at initialize, and every later message of the session is
// handled as that agent. Everything the gateway sends the client leaves through
// outward, the one redaction point.
type session struct {
	g     *Gateway
	id    string
	front string
	// preset is the identity the transport established before initialize (--agent,
	// NEXUS_AGENT, or a bearer token); "" lets initialize use the client's name as a
	// hint (stdio only).
	preset string
	// pin is the agent a stdio connection without a preset speaks as (stdiopin.go).
	pin agentPin
	// credential is the hex SHA-256 of the bearer token an HTTP session was opened
	// with ("" with no token): a reload that no longer maps it to the session's agent
	// ends the session.
	credential string
	out        sink // unsolicited messages: list changes, logs, resource updates
	// client is what the client said it is (initialize, or a modern request's _meta).
	client clientInfo

	ready atomic.Bool // initialize answered; agent and caps are set
	agent string
	caps  clientCaps
	level atomic.Int32 // the client's logging level, or levelUnset
	// modernLevel is the logging level a stdio connection that never
	// initialized set with logging/setLevel, or levelUnset: its modern
	// requests that name no level of their own take it (setModernLevel).
	modernLevel atomic.Int32
	used        atomic.Int64 // unix nanoseconds of the last message, for the idle sweep
	nextID      atomic.Int64
	ctx         context.Context // ends when the session closes
	cancel      context.CancelFunc
	// slots bounds the requests in flight (limits.maxCallsPerSession): one client
	// cannot make the gateway hold more goroutines and answers than that.
	slots chan struct{}

	mu      sync.Mutex
	closed  bool
	calls   map[string]context.CancelCauseFunc // requests in flight, by canonical id
	pending map[string]chan *jsonrpc.Message   // requests sent to the client, by id
	subs    map[string]subKey                  // subscribed resource URI, as the client spells it -> the resource
	seen    seenLists                          // fingerprints of the lists the client was last told of
	// own are the lists the session's own connections listed (ownlists.go).
	own ownState
	// found are the tools nexus__find_tools added to this session's list (search
	// mode with a budget), by canonical name, oldest first.
	found []string

	// era is what the client's protocol era changes (clientera.go): a
	// session opened with initialize, or one 2026-07-28 request.
	era clientEra
}

// clientCaps is what the client declared it can do for servers; declared holds its
// sampling, elicitation and roots as it declared them, which a connection that
// serves this client alone passes on to the child.
type clientCaps struct {
	sampling, elicitation, roots bool
	declared                     mcp.ClientCapabilities
	// tasks is a 2026-07-28 request's declaration of the tasks extension.
	tasks bool
}

// seenLists are the fingerprints of the lists a client was last given (or told of);
// a kind it never listed is never reported changed: its first list will be fresh.
type seenLists struct {
	tools, prompts, resources  [32]byte
	listedTools, listedPrompts bool
	listedResources            bool
}

// newSession makes a session; it is live once added to g.sessions.
func (g *Gateway) newSession(front, preset string, out sink) *session {
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{g: g, id: newSessionID(), front: front, preset: preset, out: out, ctx: ctx, cancel: cancel, era: legacyClient{},
		slots: make(chan struct{}, g.cfg.Load().Limits.CallsPerSession()),
		calls: map[string]context.CancelCauseFunc{}, pending: map[string]chan *jsonrpc.Message{}, subs: map[string]subKey{}}
	s.level.Store(levelUnset)
	s.modernLevel.Store(levelUnset)
	s.touch()
	return s
}

// newSessionID is unguessable: over HTTP the id is all that ties a request to its
// session once the bearer token checked out.
func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *session) touch() { s.used.Store(time.Now().UnixNano()) }

func (s *session) idleSince() time.Time { return time.Unix(0, s.used.Load()) }

// outward is the session's way out: every message to its client passes the
// gateway's outward.
func (s *session) outward(msg []byte) []byte { return s.g.outward(msg) }

// push sends an unsolicited message on the session's own stream.
func (s *session) push(msg []byte) bool { return s.out.send(s.outward(msg)) }

// handle is the one path every client message takes, on both fronts: the session
// (is it initialized? whose is it?), then the method's own step, whose answer leaves
// through outward on r. A request runs by run, holding one of the session's slots;
// a response or a notification is handled at once.
func (s *session) handle(ctx context.Context, m *jsonrpc.Message, r sink, run runner) {
	s.touch()
	switch {
	case m.IsResponse():
		s.answered(m)
		return
	case m.IsNotification():
		s.notified(m)
		return
	}
	if !s.acquire() {
		r.reply(s.outward(s.busy(m.ID)))
		return
	}
	run(func() {
		defer s.release()
		if s.front == frontStdio && mayBeModern(m.Params) {
			// A 2026-07-28 request is served on its own, whether or not this
			// connection also initialized a legacy session.
			if meta := readRequestMeta(m.Params); meta.modern() {
				if resp, _ := s.g.serveModern(ctx, origin{conn: s, front: frontStdio, agent: s.preset}, m, meta, r); resp != nil {
					r.reply(s.outward(resp))
				}
				return
			}
		}
		s.respond(ctx, m, r)
	})
}

// respond runs a request for which the caller holds a slot, and sends its answer.
func (s *session) respond(ctx context.Context, m *jsonrpc.Message, r sink) {
	if resp := s.answer(ctx, m, r); resp != nil {
		r.reply(s.outward(resp))
	}
}

// acquire takes a slot for one request in flight, without waiting: a client past
// its bound is told so at once rather than queued in the gateway's memory.
func (s *session) acquire() bool {
	select {
	case s.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s *session) release() { <-s.slots }

// busy is the answer to a request past the session's bound.
func (s *session) busy(id json.RawMessage) []byte {
	return jsonrpc.ErrorResponse(id, jsonrpc.CodeInternal, "this session already has its maximum of %d requests in flight; wait for one to finish (limits.maxCallsPerSession)", cap(s.slots))
}

// answer runs one request and encodes its response: nil for none (a request
// the stdio client cancelled).
func (s *session) answer(ctx context.Context, m *jsonrpc.Message, r sink) []byte {
	if !s.ready.Load() && m.Method == "logging/setLevel" {
		return s.setModernLevel(m)
	}
	if !s.ready.Load() && m.Method != "initialize" && m.Method != "ping" {
		return jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeInvalidRequest, "%s before initialize: send initialize first", m.Method)
	}
	step, ok := s.g.methods[m.Method]
	if !ok {
		return jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeMethodNotFound, "method %s is not supported by Nexus", quoted(m.Method))
	}
	ctx, done := s.track(ctx, m.ID)
	defer done()
	ctx, sp := s.g.span(ctx, m.Method)
	if sp.IsRecording() {
		sp.SetAttributes(attribute.String("nexus.agent", s.agentName()), attribute.String("nexus.front", s.front))
	}
	result, rpcErr := step(ctx, s, m.Params, r)
	if rpcErr != nil {
		sp.SetStatus(codes.Error, rpcErr.Message)
	}
	sp.End()
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), errClientCancelled) {
		if s.front == frontStdio {
			// The specification: a cancelled request gets no response. An HTTP
			// POST still needs one to end.
			return nil
		}
		if rpcErr == nil {
			rpcErr = &RPCError{Code: jsonrpc.CodeCancelled, Message: "request cancelled by the client"}
		}
	}
	return jsonrpc.Response(m.ID, result, rpcErr)
}

var (
	errClientCancelled = errors.New("cancelled by the client")
	errSessionClosed   = errors.New("the session has ended")
)

// track registers a request in flight so that the client's notifications/cancelled
// cancels it. ctx ends with the session on stdio (it is the session's) and with the
// HTTP request over HTTP.
func (s *session) track(ctx context.Context, id json.RawMessage) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	key := jsonrpc.IDKey(id)
	s.mu.Lock()
	s.calls[key] = cancel
	s.mu.Unlock()
	return ctx, func() {
		s.mu.Lock()
		delete(s.calls, key)
		s.mu.Unlock()
		cancel(nil)
	}
}

// notified handles a notification from the client.
func (s *session) notified(m *jsonrpc.Message) {
	switch m.Method {
	case "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(m.Params, &p) != nil || len(p.RequestID) == 0 {
			return
		}
		s.mu.Lock()
		cancel := s.calls[jsonrpc.IDKey(p.RequestID)]
		s.mu.Unlock()
		if cancel != nil {
			cancel(errClientCancelled)
		}
	case "notifications/roots/list_changed":
		if s.ready.Load() {
			s.g.rootsChanged(s.ctx, s)
		}
	}
	// notifications/initialized and the rest need nothing from the gateway.
}

// request sends a request to the client on via (the stream of the call it belongs
// to, or the session's own) and waits for the client's answer.
func (s *session) request(ctx context.Context, via sink, method string, params any) (json.RawMessage, *RPCError) {
	id := "nexus-" + strconv.FormatInt(s.nextID.Add(1), 10)
	ch := make(chan *jsonrpc.Message, 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: "the client's session has ended"}
	}
	s.pending[id] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
	}()
	// On the call's own stream if it can still carry it, else on the session's.
	msg := s.outward(jsonrpc.Request(jsonrpc.StringID(id), method, params))
	if !via.send(msg) && (via == s.out || !s.out.send(msg)) {
		return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: "the client has no open stream to receive " + method}
	}
	select {
	case m := <-ch:
		if m == nil {
			return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: "the client's session ended before it answered " + method}
		}
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Result, nil
	case <-ctx.Done():
		s.push(jsonrpc.Notification("notifications/cancelled", map[string]any{"requestId": id, "reason": "the server gave up"}))
		return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: fmt.Sprintf("the client did not answer %s in time", method)}
	}
}

// answered delivers a client's response to the request waiting for it.
func (s *session) answered(m *jsonrpc.Message) {
	var id string
	if json.Unmarshal(m.ID, &id) != nil {
		return
	}
	s.mu.Lock()
	ch := s.pending[id]
	delete(s.pending, id)
	s.mu.Unlock()
	if ch != nil {
		ch <- m
	}
}

// close ends the session: its calls are cancelled (over HTTP they run under their
// requests' contexts, not the session's), its stream ends, requests waiting on the
// client fail, and its subscriptions are dropped.
func (s *session) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	for _, cancel := range s.calls {
		cancel(errSessionClosed)
	}
	pending := s.pending
	s.pending = map[string]chan *jsonrpc.Message{}
	subs := s.subs
	s.subs = map[string]subKey{}
	s.mu.Unlock()
	// Gone from the registry before its stream ends: a request that arrives once
	// the client saw the stream end finds no session (404), never a closing one.
	s.g.sessions.remove(s)
	s.cancel()
	for _, c := range s.g.kids() {
		c.closeSession(s)
	}
	for _, ch := range pending {
		ch <- nil
	}
	for uri, k := range subs {
		s.g.subs.remove(s.g, s, k, uri)
	}
	s.g.tasks.dropSession(s)
}

// isClosed reports whether the session ended.
func (s *session) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// logLevel is the logging level the session's client set, as a modern child
// of its own is asked for it; "" for none.
func (s *session) logLevel() string {
	if l := s.level.Load(); l != levelUnset && int(l) < len(logLevels) {
		return logLevels[l]
	}
	return ""
}

// agentName is the session's agent; anonymous before initialize.
func (s *session) agentName() string {
	if !s.ready.Load() {
		return policy.Anonymous
	}
	return s.agent
}

// sessionSet holds the live sessions of a gateway.
type sessionSet struct {
	mu sync.Mutex
	m  map[string]*session
}

func (ss *sessionSet) add(s *session) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.put(s)
}

func (ss *sessionSet) put(s *session) {
	if ss.m == nil {
		ss.m = map[string]*session{}
	}
	ss.m[s.id] = s
}

// admit adds an HTTP session within the bounds: at most total HTTP sessions, and at
// most perAgent of its agent's. An agent at its share gives up its oldest idle
// session (none of its requests in flight) for the new one, so one agent's flood
// of initialize ends its own sessions, never another agent's; evicted is that
// session, for the caller to close. Counting and adding under one lock keeps a
// burst of initialize from overshooting.
func (ss *sessionSet) admit(s *session, total, perAgent int) (evicted *session, err error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	n, mine := 0, 0
	for _, o := range ss.m {
		if o.front != frontHTTP || !o.era.lasting() {
			continue
		}
		n++
		if o.preset != s.preset {
			continue
		}
		mine++
		if len(o.slots) == 0 && (evicted == nil || o.idleSince().Before(evicted.idleSince())) {
			evicted = o
		}
	}
	if mine < perAgent {
		evicted = nil
	} else if evicted == nil {
		return nil, fmt.Errorf("agent %s holds its maximum of %d sessions, all busy; close idle sessions (DELETE /mcp) or raise limits.maxSessionsPerAgent", s.preset, perAgent)
	}
	if evicted == nil && n >= total {
		return nil, fmt.Errorf("the gateway is serving its maximum of %d sessions; close idle sessions (DELETE /mcp), retry later or raise limits.maxSessions", total)
	}
	if evicted != nil {
		delete(ss.m, evicted.id)
	}
	ss.put(s)
	return evicted, nil
}

func (ss *sessionSet) remove(s *session) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.m[s.id] == s {
		delete(ss.m, s.id)
	}
}

func (ss *sessionSet) get(id string) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.m[id]
}

// all returns the live sessions that finished initialize.
func (ss *sessionSet) all() []*session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	out := make([]*session, 0, len(ss.m))
	for _, s := range ss.m {
		if s.ready.Load() {
			out = append(out, s)
		}
	}
	return out
}

func (ss *sessionSet) count(front string) int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	n := 0
	for _, s := range ss.m {
		if s.front == front {
			n++
		}
	}
	return n
}

// snapshot returns every live session, initialized or not.
func (ss *sessionSet) snapshot() []*session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	out := make([]*session, 0, len(ss.m))
	for _, s := range ss.m {
		out = append(out, s)
	}
	return out
}

// setModernLevel answers logging/setLevel on a stdio connection that never
// initialized: a client of the 2026-07-28 era (which removed the method) that
// sends it anyway is answered as servers of both eras answer it, and its later
// requests that carry no logLevel of their own are given that level.
func (s *session) setModernLevel(m *jsonrpc.Message) []byte {
	lvl, rpcErr := levelParam(m.Params)
	if rpcErr != nil {
		return jsonrpc.Response(m.ID, nil, rpcErr)
	}
	s.modernLevel.Store(lvl)
	return jsonrpc.Response(m.ID, json.RawMessage("{}"), nil)
}
