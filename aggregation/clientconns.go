package aggregation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nexus-mcp/nexus/upstream"
)

// This file holds the upstream sessions of a server with "sessions": "client": one
// connection (for a stdio server, one process) per client session, so that what one
// client does to a stateful server (a browser page, a shell, a resource it created,
// its log level, its subscriptions, its roots) is never seen by another.
//
// The child's own supervised connection (its Life) stays: it is the "template"
// the manifest is listed from, declared what a shared child is (so it lists the tools
// a server offers only to clients that can sample or have roots), and the connection
// of calls that have no client (`nexus call`). A client
// session's connection is opened on its first request to the server, declared
// exactly that client's capabilities, and closed when the client's session closes
// (or the child stops). One that exits is opened afresh on the next request: the
// server's state for that client is then lost, as it would be with a direct
// connection.

// A server's connections are shared among agents. Each agent may hold its
// share of them (servers.X.maxSessionsPerAgent, by default maxSessions divided
// among the agents that have a token, with a share left for one more), and a
// connection that is idle (no request in flight) is ended when another needs
// its place: otherwise one agent that opens maxSessions sessions, calls once in
// each and walks away locks every other agent out until its sessions time out.
// An ended connection is opened afresh on its client's next request, its state
// lost, as after a restart.

// sessionConn is the connection of session s to the child, opened on first use
// within the server's maxSessions (upstream.Pool). opener is the call that
// needs it (nil when none): what the child asks while it starts (its roots,
// commonly) goes to that call's stream. It waits for an opening under way, up
// to ctx.
func (c *child) sessionConn(ctx context.Context, s *session, opener *caller) (*conn, error) {
	cn, err := c.ups.Get(ctx, s, func() upstream.Opening[*conn] {
		cfg := c.config()
		return upstream.Opening[*conn]{
			Agent: s.agent, Share: cfg.SessionShare(tokenAgents(s.g)), Limit: cfg.SessionLimit(),
			Session: s.ctx, Ended: s.isClosed,
			Open: func(ctx context.Context) (*conn, error) {
				cn, _, err := c.connect(ctx, s, opener)
				if err != nil {
					c.log.Warn("opening an upstream session failed", "agent", s.agent, "err", err, "stderr", cn.StderrTail())
					return nil, fmt.Errorf("opening server %s for this client session: %w", c.name, err)
				}
				c.awaitRoots(ctx, s, cn)
				return cn, nil
			},
			Opened: func(ctx context.Context, cn *conn) {
				c.log.Debug("upstream session opened", "agent", s.agent)
				c.followLevel(ctx, s, cn)
			},
			Closed: func(cn *conn) {
				if s.dropOwn(c.name) {
					c.events.sessionListsChanged(s)
				}
				c.log.Debug("upstream session closed", "agent", s.agent, "reason", cn.ExitReason())
			},
		}
	})
	if err == nil {
		return cn, nil
	}
	var room *upstream.RoomError
	switch {
	case errors.Is(err, upstream.ErrNotOpenYet):
		if errors.Is(context.Cause(ctx), errCallTimeout) {
			return nil, fmt.Errorf("server %s did not finish opening this client's session in time; raise servers.%s.timeout if it needs longer", c.name, c.name)
		}
		return nil, fmt.Errorf("waiting for server %s to open this client's session: %w", c.name, context.Cause(ctx))
	case errors.Is(err, upstream.ErrNotRunning):
		return nil, fmt.Errorf("server %s is not running", c.name)
	case errors.Is(err, upstream.ErrSessionEnded):
		return nil, errSessionClosed
	case errors.As(err, &room) && !room.Full:
		return nil, fmt.Errorf("agent %s already has its share of %d upstream sessions of server %s, all of them busy, one per client session (servers.%s.maxSessionsPerAgent); close client sessions or raise servers.%s.maxSessionsPerAgent",
			room.Agent, room.Share, c.name, c.name, c.name)
	case room != nil:
		return nil, fmt.Errorf("server %s already has its maximum of %d upstream sessions, all of them busy, one per client session (servers.%s.maxSessions); close client sessions or raise servers.%s.maxSessions",
			c.name, room.Limit, c.name, c.name)
	}
	return nil, err
}

// openConn is the session's connection if one is open now; it never opens one
// (an unsubscribe at a session's end must not start a process).
func (c *child) openConn(s *session) *conn {
	cn, _ := c.ups.Current(s)
	return cn
}

// closeSession frees the session's place among the server's maxSessions at once
// (upstream.Pool.Forget).
func (c *child) closeSession(s *session) { c.ups.Forget(s) }

// followLevel gives a session's new connection the logging level its client set.
func (c *child) followLevel(ctx context.Context, s *session, cn *conn) {
	lvl := s.level.Load()
	if lvl == levelUnset || cn.Caps.Logging == nil || !cn.Dialect().KeepsSession() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, levelWait)
	defer cancel()
	if _, err := cn.Request(ctx, "logging/setLevel", map[string]any{"level": logLevels[lvl]}); err != nil {
		c.log.Warn("forwarding logging/setLevel failed", "agent", s.agent, "err", err)
	}
}

// connFor is the connection a request of caller cl (nil: no client) goes on: the
// child's own, or for a "client" server the caller's session's.
func (c *child) connFor(ctx context.Context, cl *caller) (*conn, error) {
	if c.config().PerClient() && cl != nil && cl.s != nil {
		if !cl.s.era.lasting() {
			return nil, fmt.Errorf(`server %s keeps one upstream session per client session ("sessions": "client"), and a 2026-07-28 request has no session: open a legacy session (initialize) for it, or set servers.%s.sessions to "shared"`, c.name, c.name)
		}
		return c.sessionConn(ctx, cl.s, cl)
	}
	if cn := c.connected(ctx); cn != nil {
		return cn, nil
	}
	if cn, _ := c.current(); cn != nil && !cn.Lost() && cn.Doubts.Held() != nil {
		if errors.Is(context.Cause(ctx), errCallTimeout) {
			return nil, fmt.Errorf("server %s is being checked after a request to it broke, and had not answered a ping when this call's time ran out; nexus list-servers --live shows it", c.name)
		}
		return nil, fmt.Errorf("waiting for server %s to answer a ping after a request to it broke: %w", c.name, context.Cause(ctx))
	}
	return nil, &notRunningError{c.status()}
}

// connForAgain is connFor once old refused a request for its session (an HTTP
// child that restarted): a connection other than old.
func (c *child) connForAgain(ctx context.Context, cl *caller, old *conn) *conn {
	if old.owner != nil {
		old.Lose(upstream.ErrSessionLost)
		cn, err := c.sessionConn(ctx, old.owner, cl)
		if err != nil || cn == old {
			return nil
		}
		return cn
	}
	return c.connectedExcept(ctx, old)
}

// rootsWait bounds how long a call waits for a child to ask, and be told, its
// client's roots.
const rootsWait = 5 * time.Second

// awaitRoots holds a client session's new connection back from its first
// request until the child, when it asks for its client's roots as it starts
// (as the npm filesystem server does, to narrow what it may read), has been
// answered and has taken the answer in: a request that reached it before would
// be served with its start-up defaults. Whether the child asks is learned from
// its own connection, which is declared roots too.
func (c *child) awaitRoots(ctx context.Context, s *session, cn *conn) {
	if !s.caps.roots || !cn.Dialect().KeepsSession() {
		return
	}
	if own, _ := c.current(); (own == nil || !own.AskedRoots()) && !c.rootsAtStart.Load() {
		return
	}
	wait, cancel := context.WithTimeout(ctx, rootsWait)
	defer cancel()
	if !cn.roots.await(wait, cn, s) {
		c.log.Warn("the server did not ask this client's roots as it started; its first request goes on", "agent", s.agent)
		return
	}
	if !c.rootsAtStart.Swap(true) {
		c.resaveLists()
	}
}

// tokenAgents counts the agents that have a token.
func tokenAgents(g *Gateway) int {
	agents := map[string]bool{}
	for _, a := range *g.tokens.Load() {
		agents[a] = true
	}
	return len(agents)
}
