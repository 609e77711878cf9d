package aggregation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
)

// childRequestWait bounds how long a request of a 2026-07-28 flight waits for the
// client (mrtr.go); a legacy child's request waits limits.childRequestTimeout.
const childRequestWait = 10 * time.Minute

// childRequests answers the requests a child sends its client. Sampling, elicitation
// and roots go to the client of the call they belong to, and only while that call is
// in flight on the child, and only when the call's agent may see the server:
//   - an HTTP child's request that arrives on a call's response stream carries that
//     call's context, so it goes to that call's session;
//   - otherwise (a stdio child's request carries no trace of its call) it goes to the
//     one session with calls in flight on that child; while calls of several
//     sessions are in flight there, it waits its turn (awaitCaller);
//   - a connection that serves one client session ("sessions": "client") sends
//     everything to that client, in a call or not (ownerCaller);
//   - anything else is refused with the reason, except roots/list, which is answered
//     with an empty list (a child that asks at start must not fail).
//
// A child has at most limits.maxChildRequests requests waiting on clients at once,
// and at most limits.maxChildRequestsPerClient on one client; past either a request
// is refused at once, so a child's flood holds neither goroutines nor the requests'
// bytes in the gateway for the wait, and one client cannot take every place. Each
// is handled on its own goroutine (mcp-go's transports call the handler on one
// each), so one client's unanswered request holds up no other's.
func (g *Gateway) childRequests(cn *conn) func(context.Context, *jsonrpc.Message) (json.RawMessage, *RPCError) {
	waiting := make(chan struct{}, g.cfg.Load().Limits.ChildRequests())
	logs := childRequestLogs{
		refused:   newRateLog(g.log, slog.LevelInfo, "requests from a server refused", time.Second),
		withdrawn: newRateLog(g.log, slog.LevelWarn, "requests from a server withdrawn from a client that did not answer", time.Second),
		ended:     newRateLog(g.log, slog.LevelInfo, "requests from a server withdrawn: the call they came during ended first", time.Second),
	}
	return func(ctx context.Context, req *jsonrpc.Message) (json.RawMessage, *RPCError) {
		if req.Method == string(mcp.MethodPing) {
			return json.RawMessage("{}"), nil
		}
		upTo := cn.callers.mark()
		// Whatever the answer, the calls in flight since before the child asked,
		// and still in flight as it reads the answer, may be made of it: they
		// are not shareable. One that ended first was not.
		defer cn.callers.markAsked(upTo)
		select {
		case waiting <- struct{}{}:
			defer func() { <-waiting }()
		default:
			logs.refused.add("server", cn.server, "method", req.Method, "reason", "too many waiting on clients")
			return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: fmt.Sprintf(
				"Nexus cannot forward %s: server %s has %d requests waiting on clients, at most %d (limits.maxChildRequests)",
				req.Method, cn.server, cap(waiting), cap(waiting))}
		}
		return g.forwardChildRequest(ctx, cn, req, upTo, logs)
	}
}

// errWithdrawn is why a request a client held was taken back from it: the child is
// answered with its message. callEnded says the calls it came during all ended
// first: a child that asks on a timer, or did not wait for the answer, or a call
// cancelled or timed out; the client is not at fault, and it is no warning.
type errWithdrawn struct {
	msg       string
	callEnded bool
}

func (e *errWithdrawn) Error() string { return e.msg }

// childRequestLogs are where a child's requests that were not answered are
// logged, each at most once a second: refused at once, withdrawn from a client
// that did not answer in time, or withdrawn once the call they came during ended.
type childRequestLogs struct {
	refused, withdrawn, ended *rateLog
}

// errTimedOut ends a request's wait at limits.childRequestTimeout.
var errTimedOut = errors.New("its client did not answer within limits.childRequestTimeout")

// forwardChildRequest sends a child's request to the client of its call and returns
// the client's answer, or the refusal (logged on refused). The client holds it at
// most limits.childRequestTimeout, only while the call it belongs to is in flight
// (when the transport does not tie it to a call), and, while another client's
// request to this child waits its turn, at most limits.childRequestTurn: past these
// the child gets an error, and the withdrawal is logged.
func (g *Gateway) forwardChildRequest(ctx context.Context, cn *conn, req *jsonrpc.Message, upTo int, logs childRequestLogs) (json.RawMessage, *RPCError) {
	if req.Method == string(mcp.MethodListRoots) {
		cn.NoteRootsAsked()
	}
	limits := g.cfg.Load().Limits
	wait := limits.ChildRequestWait()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(wait, func() { cancel(errTimedOut) })
	defer timer.Stop()
	tied := cn.Shared && callerOf(ctx) == nil // the transport does not say which call it is of
	c, why := g.awaitCaller(ctx, cn, upTo, req.Method, limits.ChildRequestHold())
	if c != nil && !c.s.declared(req.Method) {
		c, why = nil, fmt.Sprintf("the client of the call did not declare the capability for %s", req.Method)
	}
	if c == nil {
		if req.Method == string(mcp.MethodListRoots) {
			return json.RawMessage(`{"roots":[]}`), nil
		}
		logs.refused.add("server", cn.server, "method", req.Method, "reason", why)
		return nil, &RPCError{Code: jsonrpc.CodeInvalidRequest, Message: "Nexus cannot forward " + req.Method + ": " + why}
	}
	h, ok := cn.holds.take(c.s, limits.ChildRequestsPerClient(), cancel)
	if !ok {
		logs.refused.add("server", cn.server, "method", req.Method, "reason", "too many waiting on one client")
		return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: fmt.Sprintf(
			"Nexus cannot forward %s: the client of the call has %d requests of server %s waiting on it, at most %d (limits.maxChildRequestsPerClient)",
			req.Method, limits.ChildRequestsPerClient(), cn.server, limits.ChildRequestsPerClient())}
	}
	defer cn.holds.drop(h)
	if tied {
		go endWithCall(ctx, cn, c.s, cancel)
	}
	params := req.Params
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage("{}")
	}
	raw, rpcErr := c.askClient(ctx, req.Method, params)
	if rpcErr != nil {
		var gone *errWithdrawn
		why, log := "", logs.withdrawn
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, errTimedOut):
			why = fmt.Sprintf("its client did not answer within %s (limits.childRequestTimeout)", wait)
		case errors.As(cause, &gone):
			why = gone.msg
			if gone.callEnded {
				log = logs.ended
			}
		}
		if why != "" {
			log.add("server", cn.server, "method", req.Method, "agent", c.s.agent, "reason", why)
			return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: "Nexus withdrew " + req.Method + ": " + why}
		}
		return nil, rpcErr
	}
	if req.Method == string(mcp.MethodListRoots) {
		cn.roots.toldBy(c.s)
	}
	return raw, nil
}

// endWithCall withdraws a request from s's client (cancel) once no call of s is in
// flight on cn any more: the call it was sent for has ended, and a request that
// nothing could tie to a call must not outlive every call it could belong to.
func endWithCall(ctx context.Context, cn *conn, s *session, cancel context.CancelCauseFunc) {
	for {
		changed := cn.callers.watch()
		if !cn.callers.from(s) {
			cancel(&errWithdrawn{msg: fmt.Sprintf("the call it belongs to ended on server %s", cn.server), callEnded: true})
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// awaitCaller is callerFor, waiting while the request cannot be tied to a call
// because calls of several sessions are in flight on cn: a stdio child's request
// says nothing of its call, and guessing could send one client's prompt to another
// client's model. It waits until the calls of one session remain, and meanwhile
// withdraws each request a client of those calls has held for turn: a client that
// keeps a request unanswered cannot keep its call, and so the child, from the
// others. It waits twice turn (once for a holder's turn to end, once for its call
// to end), or a turn after its last withdrawal when that is later (a loaded
// machine may take a while to end the call), and then is refused; one that another's refusal may free waits
// a turn more, so that of several requests waiting on each other's calls one is
// refused and the others go. roots/list does not wait: it is answered with an empty
// list at once, as a child asking outside any call is.
func (g *Gateway) awaitCaller(ctx context.Context, cn *conn, mark int, method string, turn time.Duration) (*caller, string) {
	start := time.Now()
	deadline := start.Add(2 * turn)
	for {
		changed := cn.callers.watch()
		c, why, sessions := g.callerFor(ctx, cn, mark)
		if sessions < 2 || method == string(mcp.MethodListRoots) {
			return c, why
		}
		now := time.Now()
		next, withdrew := cn.holds.withdrawOlder(turn, now, cn, &errWithdrawn{msg: fmt.Sprintf(
			"its client held it for %s while another client's request to server %s waited its turn (limits.childRequestTurn)", turn, cn.server)})
		if withdrew && deadline.Before(now.Add(turn)) {
			deadline = now.Add(turn) // the holder's call now has a turn to end
		}
		if !now.Before(deadline) {
			if gave := cn.holds.gaveUpSince(start); !gave.IsZero() && now.Before(gave.Add(turn)) {
				deadline = gave.Add(turn) // another's refusal may end a call: wait for it
				continue
			}
			cn.holds.giveUp(now)
			return nil, fmt.Sprintf("%s; it waited %s for the calls of one client to remain (limits.childRequestTurn)", why, now.Sub(start).Round(time.Millisecond))
		}
		if wake := deadline.Sub(now); next <= 0 || wake < next {
			next = wake
		}
		t := time.NewTimer(next)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, why
		}
		t.Stop()
	}
}

// callerFor finds the call, and so the client, a child's request belongs to: a call
// of a session in flight on this child, whose agent may see the server. A session
// with no call in flight there is never asked: a server it may not see (or that is
// idle) must not reach its client, its model or its roots. sessions is how many
// sessions have calls in flight when that is why the call is unknown (at least 2).
// Only calls up to mark count (callers.mark, taken as the request arrived): one
// that started later cannot be the request's, and a client that calls again and
// again cannot keep another's request from being tied to its call.
func (g *Gateway) callerFor(ctx context.Context, cn *conn, mark int) (c *caller, why string, sessions int) {
	if cn.owner != nil {
		c, why = g.ownerCaller(ctx, cn)
		return c, why, 0
	}
	c = callerOf(ctx)
	if c == nil {
		c, sessions = cn.callers.onlyUpTo(mark) // a call that started after the request is not its
		switch {
		case sessions > 1:
			return nil, fmt.Sprintf("calls of %d clients are in flight on server %s and its transport does not say which call the request belongs to", sessions, cn.server), sessions
		case c == nil:
			return nil, fmt.Sprintf("no call of a client is in flight on server %s", cn.server), 0
		}
	}
	if !cn.callers.from(c.s) {
		return nil, fmt.Sprintf("the call the request belongs to is no longer in flight on server %s", cn.server), 0
	}
	if !g.view(c.s.agent).sees[cn.server] {
		return nil, fmt.Sprintf("the client of the call may not see server %s", cn.server), 0
	}
	return c, "", 0
}

// holds are a connection's requests waiting on clients: for how many one client
// holds, and for how long one holds a request while another waits its turn.
type holds struct {
	mu sync.Mutex
	m  map[*hold]struct{}
	// gaveUp is when a request that waited its turn was last refused.
	gaveUp time.Time
}

// hold is one request a client holds.
type hold struct {
	s      *session
	since  time.Time
	cancel context.CancelCauseFunc // withdraws it
}

// take registers a request s's client holds, unless it already holds most.
func (hs *holds) take(s *session, most int, cancel context.CancelCauseFunc) (*hold, bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	n := 0
	for h := range hs.m {
		if h.s == s {
			n++
		}
	}
	if n >= most {
		return nil, false
	}
	if hs.m == nil {
		hs.m = map[*hold]struct{}{}
	}
	h := &hold{s: s, since: time.Now(), cancel: cancel}
	hs.m[h] = struct{}{}
	return h, true
}

func (hs *holds) drop(h *hold) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	delete(hs.m, h)
}

// giveUp records that a request that waited its turn was refused at t.
func (hs *holds) giveUp(t time.Time) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.gaveUp = t
}

// gaveUpSince is when a request that waited its turn was last refused, if after
// t; else the zero time.
func (hs *holds) gaveUpSince(t time.Time) time.Time {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.gaveUp.After(t) {
		return hs.gaveUp
	}
	return time.Time{}
}

// withdrawOlder withdraws, with why, each request held for turn or longer by the
// client of a session with a call in flight on cn, and returns how long until the
// next such request has been held for turn (0: none is held), and whether it
// withdrew any.
func (hs *holds) withdrawOlder(turn time.Duration, now time.Time, cn *conn, why error) (next time.Duration, withdrew bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for h := range hs.m {
		if !cn.callers.from(h.s) {
			continue
		}
		if left := turn - now.Sub(h.since); left > 0 {
			if next == 0 || left < next {
				next = left
			}
			continue
		}
		h.cancel(why)
		delete(hs.m, h)
		withdrew = true
	}
	return next, withdrew
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
