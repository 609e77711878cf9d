package aggregation

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/policy"
)

// HTTPOptions configure the streamable HTTP front.
type HTTPOptions struct {
	// IdleTimeout ends sessions that received no request for that long, open stream
	// or not; zero means limits.sessionIdleTimeout (default 1h).
	IdleTimeout time.Duration
	// MaxSessions bounds the live sessions; zero means limits.maxSessions (default
	// 1000). An initialize beyond it is refused with a clear error rather than
	// exhausting the gateway's memory, and each agent gets a fair share of it
	// (limits.maxSessionsPerAgent).
	MaxSessions int
	// RequireToken refuses every request while no agent token is configured, instead
	// of serving everyone as anonymous: for addresses beyond this machine, where a
	// reload that removes the last token must not open the gateway.
	RequireToken bool
	// Pages are more read-only handlers served beside /mcp (e.g. "/metrics", "/"),
	// behind Guard: to authenticated agents, or to anyone when status.public.
	Pages map[string]http.Handler
	// Actions are handlers that change state from the console (console.go), behind
	// GuardAction: POST only, with a token or a login, from this gateway's origin.
	Actions map[string]http.Handler
}

// Timeouts of the HTTP server that the front runs under (NewHTTPServer). A response
// may stream for as long as a call runs, so there is no write timeout; reads are
// bounded, and idle keep-alive connections are closed soon.
const (
	httpReadHeaderTimeout = 10 * time.Second
	httpReadTimeout       = 60 * time.Second
	httpIdleTimeout       = 30 * time.Second
	sseKeepAlive          = 25 * time.Second
)

// NewHTTPServer is an http.Server for the front with the timeouts a server facing
// many clients needs.
func NewHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: httpReadHeaderTimeout, ReadTimeout: httpReadTimeout, IdleTimeout: httpIdleTimeout}
}

// HTTPHandler serves the gateway over streamable HTTP at /mcp, with sessions of its
// own: POST carries client messages (a session starts with initialize and goes by the
// Mcp-Session-Id it is given), GET opens the session's stream for messages the
// gateway sends unasked, DELETE ends the session.
//
// Agents are identified by bearer tokens whose SHA-256 the config holds
// (agents.NAME.tokenSha256), checked on every request so a reload revokes at once. A
// request without a valid token is refused with 401 before any MCP handling;
// clientInfo is never used for identity over HTTP. With no token configured every
// request is served as the anonymous agent (the caller decides whether that is
// acceptable for the address it listens on). Call it after Start: the idle sweep
// runs until Close.
func (g *Gateway) HTTPHandler(opts HTTPOptions) http.Handler {
	h := &httpFront{g: g, opts: opts}
	if ctx := g.runCtx; ctx != nil {
		g.wg.Go(func() { h.sweep(ctx) })
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	for pattern, page := range opts.Pages {
		mux.Handle(pattern, g.Guard(page))
	}
	for pattern, action := range opts.Actions {
		mux.Handle(pattern, g.GuardAction(action))
	}
	if len(opts.Pages) > 0 {
		mux.Handle(loginPath, g.LoginPage())
	}
	return mux
}

// Guard serves h only to whom may see what the gateway does: a request with a valid
// agent token, a browser logged in with one (its session cookie, login.go), or
// anyone when the config says "status": {"public": true}. A browser that is
// neither is sent to the login form. Whoever
// /mcp serves anonymously (no token configured) is not enough: the page shows
// every server's errors and every agent's rights, which any local process could
// otherwise read. The Host and Origin checks of /mcp apply either way. Only GET and
// HEAD are served: the pages are read-only.
func (g *Gateway) Guard(h http.Handler) http.Handler {
	front := &httpFront{g: g}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.mayReadPages(front, r) {
			if wantsPage(r) && g.allowedOrigin(r) {
				http.Redirect(w, r, loginPath, http.StatusSeeOther)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="nexus"`)
			http.Error(w, `401 unauthorized: send Authorization: Bearer <token> (nexus agent add NAME creates one), log in at /login with one in a browser, or set "status": {"public": true} in the config`, http.StatusUnauthorized)
			return
		}
		if !g.allowedOrigin(r) {
			http.Error(w, "403 forbidden: the Host or Origin of this request is not this gateway's (DNS rebinding protection)", http.StatusForbidden)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "405 method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// mayReadPages reports whether r may read the guarded pages: a bearer token, a
// login session, or status.public.
func (g *Gateway) mayReadPages(front *httpFront, r *http.Request) bool {
	if _, ok := front.tokenAgent(r); ok {
		return true
	}
	if _, ok := g.sessionAgent(r); ok {
		return true
	}
	return g.cfg.Load().Status.Public
}

type httpFront struct {
	g    *Gateway
	opts HTTPOptions
}

// idleTimeout and maxSessions are the options', else the config's limits as of now,
// so that a reload changes them.
func (h *httpFront) idleTimeout() time.Duration {
	if h.opts.IdleTimeout > 0 {
		return h.opts.IdleTimeout
	}
	return h.g.cfg.Load().Limits.IdleTimeout()
}

func (h *httpFront) maxSessions() int {
	if h.opts.MaxSessions > 0 {
		return h.opts.MaxSessions
	}
	return h.g.cfg.Load().Limits.Sessions()
}

// perAgent is an agent's share of the sessions: the bound divided among the agents
// that have a token, with a share left for one more.
func (h *httpFront) perAgent(sessions int) int {
	agents := map[string]bool{}
	for _, a := range *h.g.tokens.Load() {
		agents[a] = true
	}
	return h.g.cfg.Load().Limits.SessionsPerAgent(sessions, len(agents))
}

// credential is the hex SHA-256 of the request's bearer token, or "".
func credential(r *http.Request) string {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return ""
	}
	return TokenHash(token)
}

// TokenHash is how a bearer token is kept in config: hex SHA-256.
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func (h *httpFront) authenticate(r *http.Request) (string, bool) {
	if len(*h.g.tokens.Load()) == 0 {
		return policy.Anonymous, !h.opts.RequireToken
	}
	return h.tokenAgent(r)
}

// tokenAgent is the agent whose bearer token the request carries; false without
// a valid one.
func (h *httpFront) tokenAgent(r *http.Request) (string, bool) {
	tokens := *h.g.tokens.Load()
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return "", false
	}
	agent, ok := tokens[TokenHash(token)]
	return agent, ok
}

func (h *httpFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	agent, ok := h.authenticate(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="nexus"`)
		w.Header().Set("Connection", "close") // an unauthenticated client keeps no connection open
		http.Error(w, "401 unauthorized: send Authorization: Bearer <token> (nexus agent add NAME creates one)", http.StatusUnauthorized)
		return
	}
	if !h.g.allowedOrigin(r) {
		http.Error(w, "403 forbidden: the Host or Origin of this request is not this gateway's (DNS rebinding protection)", http.StatusForbidden)
		return
	}
	if v, modern := modernHeader(r); modern && r.Method != http.MethodPost {
		// The modern era has no session, so no session stream and nothing to end.
		w.Header().Set("Allow", "POST")
		h.refuse(w, http.StatusMethodNotAllowed, jsonrpc.ErrorResponse(nil, jsonrpc.CodeInvalidRequest,
			"%s is not part of protocol version %s, which has no session: POST each request (subscriptions/listen opens a stream)", r.Method, quoted(v)))
		return
	}
	switch r.Method {
	case http.MethodPost:
		h.post(w, r, agent)
	case http.MethodGet:
		if s := h.session(w, r, agent, nil); s != nil {
			s.out.(*httpStream).serve(w, r, s)
		}
	case http.MethodDelete:
		if s := h.session(w, r, agent, nil); s != nil {
			s.close()
			w.WriteHeader(http.StatusOK)
		}
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "405 method not allowed", http.StatusMethodNotAllowed)
	}
}

// allowedOrigin guards against DNS rebinding and against other web pages: a page
// must not reach a gateway on this machine by pointing a name of its own at
// 127.0.0.1, nor from another origin of this machine (another port, another local
// app). A request that arrived on a loopback address must name a loopback host; an
// Origin it carries must be the front's own (http:// and the Host it was sent to)
// or one the config lists in http.allowedOrigins. Clients that are not browsers
// send no Origin. A request that arrived on a Unix socket (the console a
// gateway publishes for `nexus console`, which proxies a browser's requests to
// it with their Host) is held to the loopback rule too: only this machine
// reaches a socket.
func (g *Gateway) allowedOrigin(r *http.Request) bool {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	onLoopback := false
	switch a := local.(type) {
	case *net.TCPAddr:
		onLoopback = a.IP.IsLoopback()
	case *net.UnixAddr:
		onLoopback = true
	}
	if onLoopback && !loopbackHost(hostOnly(r.Host)) {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if g.cfg.Load().HTTP.OriginAllowed(origin) {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	return u.Scheme == "http" && strings.EqualFold(u.Host, r.Host)
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.Trim(hostport, "[]")
}

func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// session finds the session a request names, or answers the request with why not.
func (h *httpFront) session(w http.ResponseWriter, r *http.Request, agent string, id json.RawMessage) *session {
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		h.refuse(w, http.StatusBadRequest, jsonrpc.ErrorResponse(id, jsonrpc.CodeInvalidRequest, "missing Mcp-Session-Id header: send initialize first"))
		return nil
	}
	s := h.g.sessions.get(sid)
	if s == nil || s.front != frontHTTP {
		h.refuse(w, http.StatusNotFound, jsonrpc.ErrorResponse(id, jsonrpc.CodeInvalidRequest, "unknown or expired session: initialize a new one"))
		return nil
	}
	if s.preset != agent {
		h.refuse(w, http.StatusForbidden, jsonrpc.ErrorResponse(id, jsonrpc.CodeInvalidRequest, "this session belongs to another agent; initialize a session of your own"))
		return nil
	}
	s.touch()
	return s
}

// post handles one POST: a message or a batch, through the session layer.
func (h *httpFront) post(w http.ResponseWriter, r *http.Request, agent string) {
	limit := h.g.cfg.Load().MessageLimit()
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		h.refuse(w, http.StatusBadRequest, jsonrpc.ErrorResponse(nil, jsonrpc.CodeParseError, "reading the request: %v", err))
		return
	}
	if int64(len(body)) > limit {
		var sc jsonrpc.IDScanner
		sc.Write(body)
		_, _ = io.Copy(&sc, io.LimitReader(r.Body, maxScannedBody))
		h.g.log.Warn("refused an over-size message", "limit", limit)
		h.refuse(w, http.StatusRequestEntityTooLarge, tooLarge(sc.ID(), limit))
		return
	}
	body = bytes.TrimSpace(body)
	// A client's traceparent makes its trace the parent of what this request does.
	r = withTrace(r)
	if len(body) > 0 && body[0] == '[' {
		if v, modern := modernHeader(r); modern {
			h.refuse(w, http.StatusBadRequest, jsonrpc.ErrorResponse(nil, jsonrpc.CodeInvalidRequest, "a JSON-RPC batch is not part of protocol version %s: POST each request on its own", quoted(v)))
			return
		}
		if s := h.session(w, r, agent, nil); s != nil {
			rep := newHTTPReply(w, r)
			h.g.serveBatch(r.Context(), s, body, rep, inline)
		}
		return
	}
	m, bad := jsonrpc.Decode(body)
	if bad != nil {
		h.refuse(w, http.StatusBadRequest, bad)
		return
	}
	_, byHeader := modernHeader(r)
	if byHeader || mayBeModern(m.Params) {
		if meta := readRequestMeta(m.Params); byHeader || meta.modern() {
			h.modern(w, r, agent, m, meta)
			return
		}
	}
	if m.Method == "initialize" && r.Header.Get("Mcp-Session-Id") == "" {
		h.initialize(w, r, agent, m)
		return
	}
	s := h.session(w, r, agent, m.ID)
	if s == nil {
		return
	}
	rep := newHTTPReply(w, r)
	if !m.IsRequest() {
		s.handle(r.Context(), m, rep, inline)
		rep.reply(nil) // 202: a notification or a response needs no answer
		return
	}
	s.handle(r.Context(), m, rep, inline)
}

// maxScannedBody bounds how much of an over-size body is read to find its id.
const maxScannedBody = 64 << 20

// initialize starts a session: the bearer token's agent is its identity for good.
func (h *httpFront) initialize(w http.ResponseWriter, r *http.Request, agent string, m *jsonrpc.Message) {
	s := h.g.newSession(frontHTTP, agent, newHTTPStream())
	s.credential = credential(r)
	if len(*h.g.tokens.Load()) == 0 {
		s.credential = "" // anonymous: whatever the client sent, no token was asked for
	}
	total := h.maxSessions()
	evicted, err := h.g.sessions.admit(s, total, h.perAgent(total))
	if err != nil {
		h.g.log.Warn("refused a new session", "agent", agent, "reason", err)
		h.refuse(w, http.StatusServiceUnavailable, jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeInternal, "%s", err))
		return
	}
	if evicted != nil {
		h.g.log.Info("ended an agent's oldest idle session: it holds its share of sessions", "agent", agent, "session", evicted.id)
		evicted.close()
	}
	var answer []byte
	s.handle(r.Context(), m, replyFunc(func(b []byte) { answer = b }), inline)
	if !s.ready.Load() {
		s.close()
		writeJSON(w, http.StatusBadRequest, answer) // through outward: the session's sink had it
		return
	}
	w.Header().Set("Mcp-Session-Id", s.id)
	writeJSON(w, http.StatusOK, answer) // likewise
}

// replyFunc is a sink that keeps the reply and sends nothing else.
type replyFunc func([]byte)

func (f replyFunc) send([]byte) bool { return false }
func (f replyFunc) reply(b []byte)   { f(b) }

// sweep ends sessions that received no request for longer than the idle timeout.
// An open stream does not keep a session alive (it would, forever, at no cost to
// its client); a request in flight does, since its answer is still to come. The
// stream of an expired session ends with it.
func (h *httpFront) sweep(ctx context.Context) {
	every := func() time.Duration { return min(max(h.idleTimeout()/4, 10*time.Millisecond), time.Minute) }
	t := time.NewTimer(every())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			idle := h.idleTimeout()
			for _, s := range h.g.sessions.snapshot() {
				if s.front == frontHTTP && s.era.lasting() && len(s.slots) == 0 && now.Sub(s.idleSince()) > idle {
					h.g.log.Debug("session expired", "session", s.id, "agent", s.agentName())
					s.close()
				}
			}
			t.Reset(every())
		}
	}
}

// endRevokedSessions ends, with their streams, the HTTP sessions whose bearer token
// no longer stands for their agent (removed or changed by a reload), and the
// anonymous ones once a token is required. Their next request would be refused
// anyway; their open streams must not go on receiving what the agent may see.
func (g *Gateway) endRevokedSessions() {
	tokens := *g.tokens.Load()
	for _, s := range g.sessions.snapshot() {
		if s.front != frontHTTP {
			continue
		}
		valid := len(tokens) == 0 && s.credential == ""
		if s.credential != "" {
			valid = tokens[s.credential] == s.preset
		}
		switch {
		case valid:
		case !s.era.lasting():
			g.log.Info("ended a stream: its token was revoked", "agent", s.preset)
			s.cancel() // a listen stream ends with its request's session
		default:
			g.log.Info("ended a session: its token was revoked", "session", s.id, "agent", s.preset)
			s.close()
		}
	}
}

// httpReply is the sink of one POST: the response goes back as a JSON body, unless
// something must reach the client before it (progress, a sampling request) and the
// client accepts an event stream; then the response becomes that stream. A call
// answered at once costs one plain JSON response.
type httpReply struct {
	mu        sync.Mutex
	w         http.ResponseWriter
	canStream bool
	streaming bool
	done      bool
}

func newHTTPReply(w http.ResponseWriter, r *http.Request) *httpReply {
	_, flushes := w.(http.Flusher)
	return &httpReply{w: w, canStream: flushes && strings.Contains(r.Header.Get("Accept"), "text/event-stream")}
}

func (h *httpReply) send(msg []byte) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done || !h.canStream {
		return false
	}
	if !h.streaming {
		h.streaming = true
		h.w.Header().Set("Content-Type", "text/event-stream")
		h.w.Header().Set("Cache-Control", "no-cache")
		h.w.WriteHeader(http.StatusOK)
	}
	return writeEvent(h.w, msg) == nil
}

func (h *httpReply) reply(msg []byte) { h.replyStatus(msg, http.StatusOK) }

// replyStatus is reply with the HTTP status of a JSON answer (the modern era's
// errors have their own); an answer on a stream that already began keeps its 200.
func (h *httpReply) replyStatus(msg []byte, status int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return
	}
	h.done = true
	switch {
	case h.streaming:
		if msg != nil {
			_ = writeEvent(h.w, msg)
		}
	case msg == nil:
		h.w.WriteHeader(http.StatusAccepted)
	default:
		writeJSON(h.w, status, msg)
	}
}

// keepAlive writes an SSE comment on a stream that began, so that an idle stream
// (a listen) is not closed by a proxy or a client's timeout; false once it broke.
func (h *httpReply) keepAlive() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done || !h.streaming {
		return !h.done
	}
	if _, err := io.WriteString(h.w, ": keep-alive\n\n"); err != nil {
		return false
	}
	h.w.(http.Flusher).Flush()
	return true
}

func writeEvent(w http.ResponseWriter, msg []byte) error {
	if _, err := fmt.Fprintf(w, "event: message\ndata: %s\n\n", jsonrpc.Compact(msg)); err != nil {
		return err
	}
	w.(http.Flusher).Flush()
	return nil
}

// refuse answers a request that no session answers (it has none yet, or it was
// refused before reaching one) with body, through the gateway's outward like
// everything else a client is sent.
func (h *httpFront) refuse(w http.ResponseWriter, status int, body []byte) {
	writeJSON(w, status, h.g.outward(body))
}

// writeJSON writes a JSON body that already went through outward.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// httpStream is an HTTP session's own stream (GET /mcp): list changes, logs and
// resource updates. Messages wait in a bounded queue while no stream is open, so a
// client that reconnects gets what it missed; past the bound the oldest are dropped.
type httpStream struct {
	mu      sync.Mutex
	queue   [][]byte
	dropped int
	open    bool
	wake    chan struct{}
}

// maxQueued bounds what waits for a session's stream.
const maxQueued = 512

func newHTTPStream() *httpStream { return &httpStream{wake: make(chan struct{}, 1)} }

func (st *httpStream) send(msg []byte) bool {
	st.mu.Lock()
	if len(st.queue) >= maxQueued {
		st.queue = st.queue[1:]
		st.dropped++
	}
	st.queue = append(st.queue, msg)
	st.mu.Unlock()
	select {
	case st.wake <- struct{}{}:
	default:
	}
	return true
}

func (st *httpStream) reply([]byte) {}

var errStreamOpen = errors.New("the session's stream is already open")

// serve streams queued and new messages until the client goes or the session ends.
func (st *httpStream) serve(w http.ResponseWriter, r *http.Request, s *session) {
	st.mu.Lock()
	if st.open {
		st.mu.Unlock()
		http.Error(w, "409 conflict: "+errStreamOpen.Error(), http.StatusConflict)
		return
	}
	st.open = true
	st.mu.Unlock()
	defer func() {
		st.mu.Lock()
		st.open = false
		st.mu.Unlock()
	}()
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	keepAlive := time.NewTicker(sseKeepAlive)
	defer keepAlive.Stop()
	for {
		st.mu.Lock()
		queue, dropped := st.queue, st.dropped
		st.queue, st.dropped = nil, 0
		st.mu.Unlock()
		if dropped > 0 {
			s.g.log.Warn("messages to a session were dropped while its stream was closed", "session", s.id, "dropped", dropped)
		}
		for _, msg := range queue {
			if writeEvent(w, msg) != nil {
				return
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		case <-keepAlive.C:
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return
			}
			flusher.Flush()
		case <-st.wake:
		}
	}
}
