package aggregation

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
)

// This file routes what children send to the sessions it belongs to: progress to the
// caller, log messages to the sessions whose agent may see the server, resource
// updates to subscribers, and list changes to the sessions whose lists changed.

// progressLinger keeps a route open briefly after its call ends: a child may write its
// last progress notification after its response (mcp-go's stdio server does).
const progressLinger = 2 * time.Second

// progressRoutes maps the progress tokens the gateway gives children back to the
// caller and the client's own token. Tokens are random and bound to the server the
// call went to: a child cannot guess another call's token, and a token it was given
// is honoured only from it.
type progressRoutes struct {
	mu     sync.Mutex
	routes map[string]*progressRoute
}

type progressRoute struct {
	server  string
	client  json.RawMessage // the client's token, as the client wrote it
	c       *caller
	expires time.Time // zero while the call runs
}

func (p *progressRoutes) add(server string, clientToken json.RawMessage, c *caller) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	token := "nexus-" + hex.EncodeToString(b[:])
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.routes == nil {
		p.routes = map[string]*progressRoute{}
	}
	p.routes[token] = &progressRoute{server: server, client: clientToken, c: c}
	return token
}

func (p *progressRoutes) release(token string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.routes[token]; r != nil {
		r.expires = time.Now().Add(progressLinger)
	}
}

// deliver forwards a child's progress notification to the caller that owns the token,
// with the client's own token put back.
func (p *progressRoutes) deliver(server string, params json.RawMessage) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(params, &fields) != nil {
		return
	}
	var token string
	_ = json.Unmarshal(fields["progressToken"], &token)
	p.mu.Lock()
	r := p.routes[token]
	p.mu.Unlock()
	if r == nil || r.server != server {
		return
	}
	fields["progressToken"] = r.client
	out, err := json.Marshal(fields)
	if err != nil {
		return
	}
	msg := r.c.s.outward(jsonrpc.Notification("notifications/progress", json.RawMessage(out)))
	if !r.c.r.send(msg) {
		r.c.s.out.send(msg)
	}
}

// sweep drops routes whose calls ended more than progressLinger ago.
func (p *progressRoutes) sweep(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for tok, r := range p.routes {
		if !r.expires.IsZero() && now.After(r.expires) {
			delete(p.routes, tok)
		}
	}
}

// notification routes a notification from a child. It runs on the child's
// notification pump, never on its transport's read loop.
func (g *Gateway) notification(server, method string, params json.RawMessage) {
	switch method {
	case "notifications/progress":
		g.progress.deliver(server, params)
	case "notifications/message":
		g.routeLog(server, params)
	case "notifications/tasks/status":
		g.deliverTaskStatus(server, params)
	case "notifications/resources/updated":
		g.resourceUpdated(subKey{server: server, uri: uriOf(params)}, params)
	default:
		g.log.Debug("notification from child not forwarded", "server", server, "method", method)
	}
}

// sessionNotification routes a notification from a connection that serves one
// client session: its logs and resource updates are that client's alone.
func (g *Gateway) sessionNotification(cn *conn, method string, params json.RawMessage) {
	s := cn.owner
	switch method {
	case "notifications/progress":
		g.progress.deliver(cn.server, params)
	case "notifications/message":
		if msg, lvl, ok := logMessage(cn.server, params); ok && s.wantsLevel(lvl) && g.view(s.agent).sees[cn.server] {
			s.push(msg)
		}
	case "notifications/tasks/status":
		g.deliverTaskStatus(cn.server, params)
	case "notifications/resources/updated":
		g.resourceUpdated(subKey{server: cn.server, uri: uriOf(params), owner: s}, params)
	default:
		g.log.Debug("notification from child not forwarded", "server", cn.server, "agent", s.agent, "method", method)
	}
}

// resourceUpdated sends a child's resources/updated to the sessions subscribed to
// k that may read its server, under the URI each subscribed with.
func (g *Gateway) resourceUpdated(k subKey, params json.RawMessage) {
	var during *caller
	if k.owner == nil {
		during = g.callDuring(k.server)
	}
	for _, sub := range g.subs.subscribers(k) {
		if g.view(sub.s.agent).readable[k.server] {
			out := params
			if sub.uri != k.uri {
				out = setField(params, "uri", sub.uri)
			}
			sub.s.sendDuring(during, jsonrpc.Notification("notifications/resources/updated", out))
		}
	}
}

// routeLog sends a child's log message to every session whose agent may see the
// server and whose level lets it through (see sendDuring).
func (g *Gateway) routeLog(server string, params json.RawMessage) {
	msg, lvl, ok := logMessage(server, params)
	if !ok {
		return
	}
	during := g.callDuring(server)
	for _, s := range g.sessions.all() {
		if s.wantsLevel(lvl) && g.view(s.agent).sees[server] {
			s.sendDuring(during, msg)
		}
	}
}

// callDuring is the call in flight on server's shared connection while every
// call in flight there is one session's, nil otherwise.
func (g *Gateway) callDuring(server string) *caller {
	c := g.kids()[server]
	if c == nil {
		return nil
	}
	cn, _ := c.current()
	if cn == nil {
		return nil
	}
	if cl, n := cn.callers.only(); n == 1 && cl.r != nil {
		return cl
	}
	return nil
}

// sendDuring sends s a notification a child sent while during (a call of
// s's, or nil) was in flight: on that call's stream, as the server sends it
// during a call, so an HTTP client need not listen on its session's own stream
// to see it; else on the session's stream.
func (s *session) sendDuring(during *caller, msg []byte) {
	if during != nil && during.s == s && during.r.send(s.outward(msg)) {
		return
	}
	s.push(msg)
}

// logMessage is a child's log message as clients get it, and its level; the
// logger defaults to the server's name.
func logMessage(server string, params json.RawMessage) ([]byte, int, bool) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(params, &fields) != nil {
		return nil, 0, false
	}
	var level string
	_ = json.Unmarshal(fields["level"], &level)
	lvl, ok := levelIndex(level)
	if !ok {
		lvl = levelInfo
	}
	if _, ok := fields["logger"]; !ok {
		fields["logger"], _ = json.Marshal(server)
	}
	out, err := json.Marshal(fields)
	if err != nil {
		return nil, 0, false
	}
	return jsonrpc.Notification("notifications/message", json.RawMessage(out)), lvl, true
}

// wantsLevel reports whether the session's logging level lets a message of lvl through.
func (s *session) wantsLevel(lvl int) bool {
	min := s.level.Load()
	return min == levelUnset || int32(lvl) >= min
}

// Logging levels, in the order of RFC 5424's severities, least severe first.
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

const (
	levelUnset = -1
	levelInfo  = 1
)

// levelWait bounds the forwarding of a logging level to a child: a child that does
// not answer cannot hold up the client's request.
const levelWait = 2 * time.Second

func levelIndex(level string) (int, bool) {
	for i, l := range logLevels {
		if l == level {
			return i, true
		}
	}
	return 0, false
}

// forwardLevel asks every shared child that logs for the most verbose level any
// session set, so each session can be given what it asked for, and the connections
// of s's own ("sessions": "client") for s's level. The fan-out has a deadline.
func (g *Gateway) forwardLevel(ctx context.Context, s *session) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), levelWait)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range g.kids() {
		if cn := c.openConn(s); cn != nil {
			wg.Go(func() { c.followLevel(ctx, s, cn) })
		}
	}
	wg.Go(func() { g.forwardSharedLevel(ctx) })
	wg.Wait()
}

// forwardSharedLevel asks every shared child that logs for the most verbose level
// any session set.
func (g *Gateway) forwardSharedLevel(ctx context.Context) {
	want := int32(len(logLevels))
	for _, s := range g.sessions.all() {
		if l := s.level.Load(); l != levelUnset && l < want {
			want = l
		}
	}
	if want == int32(len(logLevels)) {
		return
	}
	g.setSharedLevel(ctx, want, false)
}

// raiseSharedLevel asks every shared legacy child that logs and was not yet
// asked for lvl or a more verbose level for lvl: a modern request carries its
// level in its _meta, which a legacy child never sees.
func (g *Gateway) raiseSharedLevel(ctx context.Context, lvl int32) {
	ctx, cancel := context.WithTimeout(ctx, levelWait)
	defer cancel()
	g.setSharedLevel(ctx, lvl, true)
}

// syncLevel asks a shared legacy child, before a call of cl reaches it, for cl's
// logging level when it was last asked for a less verbose one or none: a child
// that started (or started again) after the level was set, a lazy one among
// them, would otherwise log nothing of the call it serves.
func (g *Gateway) syncLevel(ctx context.Context, cn *conn, cl *caller) {
	s := cl.session()
	if s == nil || !cn.Shared || !cn.Dialect().KeepsSession() || cn.Caps.Logging == nil {
		return
	}
	want := s.level.Load()
	if want == levelUnset {
		return
	}
	if sent := cn.levelSent.Load(); sent != 0 && sent-1 <= want {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, levelWait)
	defer cancel()
	if _, err := cn.Request(ctx, "logging/setLevel", map[string]any{"level": logLevels[want]}); err != nil {
		g.log.Warn("forwarding logging/setLevel failed", "server", cn.server, "err", err)
		return
	}
	cn.levelSent.Store(want + 1)
}

// setSharedLevel asks every shared legacy child that logs for level want; with
// onlyRaise, only those last asked for a less verbose one (or none).
func (g *Gateway) setSharedLevel(ctx context.Context, want int32, onlyRaise bool) {
	var wg sync.WaitGroup
	for _, c := range g.kids() {
		cn, _ := c.current()
		if cn == nil || cn.Caps.Logging == nil || c.config().PerClient() || !cn.Dialect().KeepsSession() {
			continue
		}
		if sent := cn.levelSent.Load(); onlyRaise && sent != 0 && sent-1 <= want {
			continue
		}
		wg.Go(func() {
			if _, err := cn.Request(ctx, "logging/setLevel", map[string]any{"level": logLevels[want]}); err != nil {
				c.log.Warn("forwarding logging/setLevel failed", "err", err)
				return
			}
			cn.levelSent.Store(want + 1)
		})
	}
	wg.Wait()
}

// listsChanged tells each session whose visible lists changed (after a child's
// change, a reload or a policy edit) that they did, once per kind of list.
func (g *Gateway) listsChanged() {
	g.listsMu.Lock() // two passes at once could tell a session of an older list last
	defer g.listsMu.Unlock()
	for _, s := range g.sessions.all() {
		g.tellChanged(s)
	}
}

// sessionListsChanged tells one session whose own connection listed lists of
// its own (ownlists.go) which of its lists changed.
func (g *Gateway) sessionListsChanged(s *session) {
	g.listsMu.Lock()
	defer g.listsMu.Unlock()
	g.tellChanged(s)
}

// tellChanged tells s which of its lists changed since it was last given or told
// of them. The caller holds listsMu.
func (g *Gateway) tellChanged(s *session) {
	v := s.view()
	s.mu.Lock()
	seen := s.seen
	_, toolsFP := s.sessionTools(v)
	s.seen.tools, s.seen.prompts, s.seen.resources = toolsFP, v.promptsFP, v.resourcesFP
	s.mu.Unlock()
	if seen.listedTools && seen.tools != toolsFP {
		s.push(jsonrpc.Notification("notifications/tools/list_changed", nil))
	}
	if seen.listedPrompts && seen.prompts != v.promptsFP {
		s.push(jsonrpc.Notification("notifications/prompts/list_changed", nil))
	}
	if seen.listedResources && seen.resources != v.resourcesFP {
		s.push(jsonrpc.Notification("notifications/resources/list_changed", nil))
	}
}

// listsSettled runs once the children's first attempts are over: from then on, every
// session is told when its lists change. A session that started before is not told
// of the first servers joining; its first lists waited for them.
func (g *Gateway) listsSettled() {
	g.listsMu.Lock()
	defer g.listsMu.Unlock()
	for _, s := range g.sessions.all() {
		v := s.view()
		s.mu.Lock()
		// A kind the client already listed keeps what it was given: listsChanged
		// compares with that.
		if !s.seen.listedTools {
			_, fp := s.sessionTools(v)
			s.seen.tools, s.seen.listedTools = fp, true
		}
		if !s.seen.listedPrompts {
			s.seen.prompts, s.seen.listedPrompts = v.promptsFP, true
		}
		if !s.seen.listedResources {
			s.seen.resources, s.seen.listedResources = v.resourcesFP, true
		}
		s.mu.Unlock()
	}
}

// rootsChanged passes a client's roots/list_changed on to the children that may
// have asked for its roots: the connections of s's own, and every shared child,
// whose answers may come from the roots of the client of each call. A shared
// child that asked for roots has its remembered answers marked stale: they may
// have been made with the old roots. (Memory never holds answers of "client"
// servers.)
func (g *Gateway) rootsChanged(ctx context.Context, s *session) {
	for _, c := range g.kids() {
		if c.config().PerClient() {
			if cn := c.openConn(s); cn != nil {
				cn.Dialect().Notify("notifications/roots/list_changed")
			}
			continue
		}
		if cn, _ := c.current(); cn != nil {
			if cn.AskedRoots() {
				g.forget(ctx, c.name)
			}
			cn.roots.forget()
			cn.Dialect().Notify("notifications/roots/list_changed")
		}
	}
}

// subscriptions counts the sessions subscribed to each resource of each server: the
// child is asked to subscribe when the first session does and to unsubscribe when
// the last one leaves. Each session is kept with the URIs it subscribed with (its
// own, or a namespaced form: a client may use both), which its updates carry.
type subscriptions struct {
	mu sync.Mutex
	m  map[subKey]map[*session]map[string]bool
}

// subKey is a resource as its server knows it; owner is the session whose own
// connection subscribed ("sessions": "client"), nil for a shared server.
type subKey struct {
	server, uri string
	owner       *session
}

// add subscribes s to k, which the client calls uri.
func (sb *subscriptions) add(ctx context.Context, g *Gateway, s *session, k subKey, uri string) *RPCError {
	sb.mu.Lock()
	first := len(sb.m[k]) == 0
	sb.mu.Unlock()
	if first {
		if _, err := g.childRequest(ctx, &caller{s: s, r: s.out}, k.server, "resources/subscribe", map[string]any{"uri": k.uri}); err != nil {
			return err
		}
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.m == nil {
		sb.m = map[subKey]map[*session]map[string]bool{}
	}
	if sb.m[k] == nil {
		sb.m[k] = map[*session]map[string]bool{}
	}
	if sb.m[k][s] == nil {
		sb.m[k][s] = map[string]bool{}
	}
	sb.m[k][s][uri] = true
	s.mu.Lock()
	s.subs[uri] = k
	s.mu.Unlock()
	return nil
}

// remove ends the subscription of s to k, which the client calls uri.
func (sb *subscriptions) remove(g *Gateway, s *session, k subKey, uri string) {
	sb.mu.Lock()
	delete(sb.m[k][s], uri)
	if len(sb.m[k][s]) == 0 {
		delete(sb.m[k], s)
	}
	last := len(sb.m[k]) == 0
	if last {
		delete(sb.m, k)
	}
	sb.mu.Unlock()
	s.mu.Lock()
	delete(s.subs, uri)
	s.mu.Unlock()
	if last {
		if k.owner != nil {
			g.unsubscribeOwn(k)
			return
		}
		g.unsubscribeShared(k)
	}
}

// unsubscribeShared unsubscribes at a shared child's live connection. A child
// that is not running (idle, restarting) holds no subscription, and is not
// started for one; a gateway that closes ends its children and their
// subscriptions with them, without waiting on each.
func (g *Gateway) unsubscribeShared(k subKey) {
	c := g.kids()[k.server]
	if c == nil || g.closing.Load() {
		return
	}
	cn, _ := c.current()
	if cn == nil || cn.Lost() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cn.Request(ctx, "resources/unsubscribe", map[string]any{"uri": k.uri}); err != nil {
		g.log.Debug("unsubscribing at the child failed", "server", k.server, "uri", k.uri, "err", err)
	}
}

// unsubscribeOwn unsubscribes at a session's own connection, if it is still open:
// one that closed (the session ended) took its subscriptions with it.
func (g *Gateway) unsubscribeOwn(k subKey) {
	c := g.kids()[k.server]
	if c == nil {
		return
	}
	cn := c.openConn(k.owner)
	if cn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cn.Request(ctx, "resources/unsubscribe", map[string]any{"uri": k.uri}); err != nil {
		g.log.Debug("unsubscribing at the child failed", "server", k.server, "uri", k.uri, "err", err)
	}
}

// subscriber is a session subscribed to a resource, under one URI it knows it by.
type subscriber struct {
	s   *session
	uri string
}

// subscribers are the sessions subscribed to k, once per URI each knows k by.
func (sb *subscriptions) subscribers(k subKey) []subscriber {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	var out []subscriber
	for s, uris := range sb.m[k] {
		for u := range uris {
			out = append(out, subscriber{s, u})
		}
	}
	return out
}

// callers tracks the calls in flight on one child connection: so that a request the
// child sends back during a call can find the session that made it even when the
// transport (stdio) carries no trace of the call, and so that memory knows which
// answers were made while the child asked a client something. Calls from `nexus
// call` are tracked too, with no caller.
type callers struct {
	mu    sync.Mutex
	next  int
	calls map[int]*inflight
	// changed is closed, and replaced, when a call starts or ends (see watch).
	changed chan struct{}
}

// inflight is one call in flight on a connection.
type inflight struct {
	c *caller // nil for a call with no client
	// asked is set when the child is answered a request it sent while the call
	// was in flight, before the call's own answer: that answer may be made of the
	// client's input. A child's request carries no reliable trace of its call, so
	// every call in flight from before the request to its answer is marked; a call
	// that ended before the answer could not have used it.
	asked atomic.Bool
}

// add registers a call; remove must follow.
func (cs *callers) add(c *caller) (f *inflight, remove func()) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.calls == nil {
		cs.calls = map[int]*inflight{}
	}
	cs.next++
	id := cs.next
	f = &inflight{c: c}
	cs.calls[id] = f
	cs.tell()
	return f, func() {
		cs.mu.Lock()
		delete(cs.calls, id)
		cs.tell()
		cs.mu.Unlock()
	}
}

// watch returns a channel closed at the next call that starts or ends: read what
// is in flight after calling it, and wait on it for a change.
func (cs *callers) watch() <-chan struct{} {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.changed == nil {
		cs.changed = make(chan struct{})
	}
	return cs.changed
}

// tell wakes the watchers; cs.mu is held.
func (cs *callers) tell() {
	if cs.changed != nil {
		close(cs.changed)
		cs.changed = nil
	}
}

// markAsked records that the child is being answered a request it sent when the
// newest call was upTo (mark): the calls up to it still in flight may be made of
// the answer.
func (cs *callers) markAsked(upTo int) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for id, f := range cs.calls {
		if id <= upTo {
			f.asked.Store(true)
		}
	}
}

// from reports whether a call of session s is in flight.
func (cs *callers) from(s *session) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, f := range cs.calls {
		if f.c != nil && f.c.s == s {
			return true
		}
	}
	return false
}

// only returns the latest call in flight when every call in flight comes from one
// session (its client is the only one that can answer), and how many sessions have
// calls in flight.
func (cs *callers) only() (*caller, int) { return cs.onlyUpTo(math.MaxInt) }

// mark is the newest call now: a request the child sends now belongs to a call
// up to it, never to one that starts later.
func (cs *callers) mark() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.next
}

// onlyUpTo is only among the calls up to mark (see mark).
func (cs *callers) onlyUpTo(mark int) (*caller, int) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var latest *caller
	best := -1
	sessions := map[*session]bool{}
	for id, f := range cs.calls {
		if f.c == nil || id > mark {
			continue
		}
		sessions[f.c.s] = true
		if id > best {
			best, latest = id, f.c
		}
	}
	if len(sessions) != 1 {
		return nil, len(sessions)
	}
	return latest, 1
}
