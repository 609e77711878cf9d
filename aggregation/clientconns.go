package aggregation

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// This file holds the upstream sessions of a server with "sessions": "client": one
// connection (for a stdio server, one process) per client session, so that what one
// client does to a stateful server (a browser page, a shell, a resource it created,
// its log level, its subscriptions, its roots) is never seen by another.
//
// The child's own supervised connection (child.run) stays: it is the "template"
// the manifest is listed from, declared what a shared child is (so it lists the tools
// a server offers only to clients that can sample or have roots), and the connection
// of calls that have no client (`nexus call`). A client
// session's connection is opened on its first request to the server, declared
// exactly that client's capabilities, and closed when the client's session closes
// (or the child stops). One that exits is opened afresh on the next request: the
// server's state for that client is then lost, as it would be with a direct
// connection.

// upstreams are a "client" child's connections, one per client session.
type upstreams struct {
	mu sync.Mutex
	m  map[*session]*clientUpstream
}

// clientUpstream is one client session's connection; ready is closed once the attempt
// to open it is over, and cn or err then says how it went.
type clientUpstream struct {
	ready chan struct{}
	cn    *conn
	err   error
	agent string // the agent of the session it serves
}

// count is the number of upstream sessions open or opening.
func (u *upstreams) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.m)
}

// sessionConn is the connection of session s to the child, opened on first use
// within the server's maxSessions. opener is the call that needs it (nil when
// none): what the child asks while it starts (its roots, commonly) goes to that
// call's stream. It waits for an opening under way, up to ctx.
func (c *child) sessionConn(ctx context.Context, s *session, opener *caller) (*conn, error) {
	for {
		u, mine, err := c.claim(s)
		if err != nil {
			return nil, err
		}
		if mine {
			c.open(s, u, opener)
		}
		select {
		case <-u.ready:
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), errCallTimeout) {
				return nil, fmt.Errorf("server %s did not finish opening this client's session in time; raise servers.%s.timeout if it needs longer", c.name, c.name)
			}
			return nil, fmt.Errorf("waiting for server %s to open this client's session: %w", c.name, context.Cause(ctx))
		}
		if u.err != nil {
			return nil, u.err
		}
		if !u.cn.Lost() {
			return u.cn, nil
		}
		c.dropUpstream(s, u) // it exited: the next pass opens a new one
	}
}

// claim returns the session's upstream, or a new one for the caller to open
// (mine), or the error that refuses one past the bound.
func (c *child) claim(s *session) (u *clientUpstream, mine bool, err error) {
	c.ups.mu.Lock()
	defer c.ups.mu.Unlock()
	if u := c.ups.m[s]; u != nil {
		u.touch()
		return u, false, nil
	}
	if c.runCtx == nil || c.runCtx.Err() != nil {
		return nil, false, fmt.Errorf("server %s is not running", c.name)
	}
	if s.isClosed() {
		return nil, false, errSessionClosed
	}
	if err := c.makeRoomLocked(s); err != nil {
		return nil, false, err
	}
	if c.ups.m == nil {
		c.ups.m = map[*session]*clientUpstream{}
	}
	u = &clientUpstream{ready: make(chan struct{}), agent: s.agent}
	c.ups.m[s] = u
	c.upWG.Add(1) // under ups.mu, so that shutdown's Wait comes after it (see shutdown)
	return u, true, nil
}

// open connects u for s in the background: the connection outlives the request
// that asked for it, and lives until the session or the child ends. claim counted
// it in upWG.
func (c *child) open(s *session, u *clientUpstream, opener *caller) {
	ctx, cancel := context.WithCancel(c.runCtx)
	stopWithSession := context.AfterFunc(s.ctx, cancel)
	go func() {
		defer c.upWG.Done()
		defer cancel()
		defer stopWithSession()
		cn, _, err := c.connect(ctx, s, opener)
		if err != nil {
			c.log.Warn("opening an upstream session failed", "agent", s.agent, "err", err, "stderr", cn.StderrTail())
			u.err = fmt.Errorf("opening server %s for this client session: %w", c.name, err)
			c.dropUpstream(s, u)
			close(u.ready)
			return
		}
		c.awaitRoots(ctx, s, cn)
		u.cn = cn
		close(u.ready)
		c.log.Debug("upstream session opened", "agent", s.agent)
		c.followLevel(ctx, s, cn)
		select {
		case <-ctx.Done():
		case <-cn.Done():
		}
		cn.Close()
		c.dropUpstream(s, u)
		if s.dropOwn(c.name) {
			c.events.sessionListsChanged(s)
		}
		c.log.Debug("upstream session closed", "agent", s.agent, "reason", cn.ExitReason())
	}()
}

// dropUpstream forgets u if it is still the session's.
func (c *child) dropUpstream(s *session, u *clientUpstream) {
	c.ups.mu.Lock()
	defer c.ups.mu.Unlock()
	if c.ups.m[s] == u {
		delete(c.ups.m, s)
	}
}

// openConn is the session's connection if one is open now; it never opens one
// (an unsubscribe at a session's end must not start a process).
func (c *child) openConn(s *session) *conn {
	c.ups.mu.Lock()
	u := c.ups.m[s]
	c.ups.mu.Unlock()
	if u == nil {
		return nil
	}
	select {
	case <-u.ready:
		if u.cn != nil && !u.cn.Lost() {
			return u.cn
		}
	default:
	}
	return nil
}

// closeSession frees the session's place among the server's maxSessions at once;
// its connection (its process) ends in open's goroutine, which the session's end
// (s.ctx) wakes, so that a child slow to exit holds up no client.
func (c *child) closeSession(s *session) {
	c.ups.mu.Lock()
	defer c.ups.mu.Unlock()
	delete(c.ups.m, s)
}

// followLevel gives a session's new connection the logging level its client set.
func (c *child) followLevel(ctx context.Context, s *session, cn *conn) {
	lvl := s.level.Load()
	if lvl == levelUnset || cn.Caps.Logging == nil || !cn.dialect().keepsSession() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, levelWait)
	defer cancel()
	if _, err := cn.request(ctx, "logging/setLevel", map[string]any{"level": logLevels[lvl]}); err != nil {
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
		old.Lose(errSessionLost)
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
	if !s.caps.roots || !cn.dialect().keepsSession() {
		return
	}
	if own, _ := c.current(); (own == nil || !own.askedRoots.Load()) && !c.rootsAtStart.Load() {
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
