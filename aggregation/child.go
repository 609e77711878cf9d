package aggregation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/pins"
	"github.com/nexus-mcp/nexus/upstream"
)

// How long a child may take to start, and how its liveness is checked. How
// often it is tried again is upstream.Restarts'.
const (
	startTimeout = 30 * time.Second
	// A live remote connection is pinged every pingInterval, each ping bounded
	// by pingTimeout: a remote child that restarted or vanished is noticed and
	// reconnected before a call finds out.
	pingInterval = 20 * time.Second
	pingTimeout  = 10 * time.Second
)

// childEvents is what a child tells the gateway.
type childEvents interface {
	// toolsChanged says the child's connection, state or config changed, and its
	// lists with it: the manifest is rebuilt, and a list asked before the rebuild
	// is due rebuilds it first.
	toolsChanged(server string)
	// relisted says the child listed anew after it said its lists changed: the
	// manifest is rebuilt after the debounce only, however often the child says so.
	relisted(server string)
	// notification is a notification from the child, its params raw.
	notification(server, method string, params json.RawMessage)
	// sessionNotification is a notification on a connection that serves one
	// client session (cn.owner).
	sessionNotification(cn *conn, method string, params json.RawMessage)
	// sessionListsChanged says a session's own connection listed lists of its
	// own (ownlists.go).
	sessionListsChanged(s *session)
	// lifecycle is the server's life as the config says now (lifecycle.go).
	lifecycle(s *config.Server) config.Lifecycle
	// subscribed reports whether a client holds a subscription to a resource
	// of the server: stopping it would lose the updates.
	subscribed(server string) bool
	// childRequests answers the requests a child sends its client during a call.
	childRequests(cn *conn) func(context.Context, *jsonrpc.Message) (json.RawMessage, *RPCError)
	// reconnected says a child came back after exiting: what it remembered is stale.
	reconnected(server string)
	// redactText removes secret values from text a person reads (Options.RedactText).
	redactText(string) string
	// redactJSON removes secret values from JSON kept on disk (Options.Redact).
	redactJSON([]byte) []byte
}

// child is one configured server as the gateway sees it: its Life (upstream:
// its state, its connection and what that listed, kept running by Life.Run
// through the child's supervisee hooks), the tools the gateway makes of its
// listing, and its client sessions' own connections.
type child struct {
	name   string
	cfgp   atomic.Pointer[config.Server] // swapped when only annotations, prefix or timeout change
	names  naming                        // wire name style and bound
	log    *slog.Logger
	events childEvents
	supervision
	// rootsAtStart is set once a client session's connection was asked its
	// client's roots as it started (awaitRoots).
	rootsAtStart atomic.Bool
	// held is what the pins last held of the child's listing (pins.go).
	held pinsHeld

	life *upstream.Life[*conn, listing]

	// mu guards known and said. Whoever writes known holds the Life's lock
	// too (derive, relist, reconfigure), so it follows the lists shown.
	mu    sync.Mutex
	known []*Tool // the last tools it listed (or was restored with): what stale-if-error may stand in for
	// said is what the child said last run, shown while it is idle: its
	// capabilities and instructions (lifecycle.go).
	said *savedLists

	// probeWait bounds the server/discover probe (upstream.DiscoverWait);
	// eras remembers the era the handshake found, for restarts and client
	// sessions' connections.
	probeWait time.Duration
	eras      upstream.Eras

	stop context.CancelFunc // set when started
	done chan struct{}      // closed when its Life's Run returns

	// ups are the connections of its client sessions ("sessions":
	// "client"), which live under the context the child runs under.
	ups *upstream.Pool[*session, *conn]
}

// listing is what the child's connection listed, kept with it by its Life:
// the tools as the child listed them, the gateway's tools made of them, and
// its resources, templates and prompts.
type listing struct {
	raws  []json.RawMessage
	tools []*Tool
	// headerTools are those of raws whose schema mirrors arguments into
	// headers (x-mcp-header), decoded once, by name: what a modern HTTP
	// call's Mcp-Param headers are made from (headerToolsOf).
	headerTools map[string]*mcp.Tool
	extras      extras
}

// supervision is what the gateway gives every child it makes (Options): the
// same for all, set once.
type supervision struct {
	// dial makes the transport of each connection (upstream.Dialer).
	dial *upstream.Dialer
	// beforeStart sees the config entry before each start (Options.BeforeStart).
	beforeStart func(*config.Server)
	// oneAttempt gives up after the first failure (Options.OneAttempt).
	oneAttempt bool
	// pins reviews the child's listings (Options.Pins, pins.go).
	pins *pins.Guard
	// listsDir keeps the lists of lazy servers between runs (Options.ListsDir).
	listsDir string
}

func newChild(cfg *config.Server, names naming, log *slog.Logger, events childEvents, sup supervision) *child {
	c := &child{name: cfg.Name, names: names, log: log.With("server", cfg.Name), events: events,
		supervision: sup, done: make(chan struct{}), probeWait: upstream.DiscoverWait}
	c.life = upstream.NewLife[*conn, listing](upstream.LifeOptions[listing]{Log: c.log, OneAttempt: sup.oneAttempt,
		Changed: func() { c.events.toolsChanged(c.name) }, Derive: c.derive})
	c.ups = upstream.NewPool[*session, *conn](func(agent string) {
		c.log.Info("ended an idle upstream session to make room for another", "agent", agent)
	})
	c.cfgp.Store(cfg)
	return c
}

// config is the child's current config entry.
func (c *child) config() *config.Server { return c.cfgp.Load() }

// start runs the child until ctx ends or stop is called.
func (c *child) start(ctx context.Context) {
	ctx, c.stop = context.WithCancel(ctx)
	c.ups.Start(ctx)
	go func() {
		defer close(c.done)
		c.life.Run(ctx, (*supervisee)(c))
	}()
}

// shutdown stops the child and waits for it; a child never started returns at once.
func (c *child) shutdown() {
	if c.stop == nil {
		return
	}
	c.stop()
	<-c.done
	c.ups.Wait()
}

// reconfigure applies an entry that launches the child the same way: new annotation
// overrides, prefix or timeout take effect without a restart.
func (c *child) reconfigure(cfg *config.Server) {
	c.cfgp.Store(cfg)
	c.life.Update(nil, func(l *listing) {
		l.tools = c.toolsOf(l.raws, false)
		c.remember(l.tools)
	})
	c.events.toolsChanged(c.name)
}

// launchKey is what decides whether a config change needs a restart.
func launchKey(s *config.Server) string {
	b, _ := json.Marshal([]any{s.Transport, s.Command, s.Args, s.Env, s.Cwd, s.URL, s.Headers, s.ProtocolVersion, s.Auth, s.OAuth, s.PerClient()})
	return string(b)
}

// State is where a child is in its life (upstream.Life).
type State = upstream.State

// The states of a child.
const (
	StateConnecting = upstream.StateConnecting
	StateReady      = upstream.StateReady
	StateRetrying   = upstream.StateRetrying
	StateRestarting = upstream.StateRestarting
	StateFailed     = upstream.StateFailed
	StateNeedsLogin = upstream.StateNeedsLogin
	StateIdle       = upstream.StateIdle
)

// Status is what list-servers shows of a child.
type Status struct {
	Name      string    `json:"name"`
	Transport string    `json:"transport"`
	Target    string    `json:"target"` // command line or URL
	State     State     `json:"state"`
	Tools     int       `json:"tools"`
	Error     string    `json:"error,omitempty"`    // the last error, while not ready
	NextRetry time.Time `json:"nextRetry,omitzero"` // when it tries again
	Source    string    `json:"source,omitempty"`
	// Restarts counts the times the child exited (or its connection dropped) and
	// was started again since the gateway started it.
	Restarts int `json:"restarts"`
	// Sessions is "shared" or "client" (servers.X.sessions); UpstreamSessions
	// counts a "client" server's connections of client sessions, open or
	// opening, at most MaxSessions.
	Sessions         string `json:"sessions"`
	UpstreamSessions int    `json:"upstreamSessions"`
	MaxSessions      int    `json:"maxSessions,omitempty"`
	// Protocol is the protocol version the child speaks and its era, as in
	// "2026-07-28 (stateless)" or "2025-11-25 (session)": the live
	// connection's, or the one last found while the child is down; empty before
	// the first. ProtocolWhy says how that era was chosen.
	Protocol    string `json:"protocol,omitempty"`
	ProtocolWhy string `json:"protocolWhy,omitempty"`
	// Held are the child's tools its pins hold until approved (servers.X.pin
	// strict); Unapproved those listed without approval (warn). By the
	// child's own names.
	Held       []string `json:"held,omitempty"`
	Unapproved []string `json:"unapproved,omitempty"`
	// IdleSince is when an idle server was stopped; zero while idle means it
	// was not started yet.
	IdleSince time.Time `json:"idleSince,omitzero"`
}

// Describe says in words what a server that is not ready is doing: its state, its
// last error and its next try.
func (s Status) Describe() string {
	if s.State == StateIdle {
		return describeIdle(s.IdleSince)
	}
	d := strings.ReplaceAll(string(s.State), "-", " ")
	switch {
	case strings.HasPrefix(s.Error, d+":"):
		d = s.Error // "needs login: run nexus auth login X" says its state itself
	case s.Error != "":
		d += ": " + s.Error
	}
	if !s.NextRetry.IsZero() {
		d += fmt.Sprintf("; next try in %s", max(time.Until(s.NextRetry), 0).Round(time.Millisecond))
	}
	return d
}

func (c *child) status() Status {
	life := c.life.Snapshot()
	s := Status{Name: c.name, Transport: c.config().Transport, State: life.State, Tools: len(life.Lists.tools), Source: c.config().Source,
		NextRetry: life.NextRetry, Restarts: life.Restarts, Sessions: config.SessionsShared}
	if life.State == StateIdle {
		s.IdleSince = life.IdleSince
	}
	if c.config().PerClient() {
		s.Sessions, s.UpstreamSessions, s.MaxSessions = config.SessionsClient, c.ups.Len(), c.config().SessionLimit()
	}
	if c.config().Transport == config.TransportStdio {
		s.Target = strings.Join(append([]string{c.config().Command}, c.config().Args...), " ")
	} else {
		s.Target = c.config().URL
	}
	if life.Err != nil {
		s.Error = life.Err.Error()
	}
	s.Held, s.Unapproved = c.held.names()
	if cn := life.Conn; cn != nil {
		e, why := cn.Era()
		s.Protocol, s.ProtocolWhy = describeProtocol(e.Version), why
	} else if e := c.eras.Get(eraKey(c.config())); e != nil {
		s.Protocol, s.ProtocolWhy = describeProtocol(e.Version), e.Why
	}
	// A status is what people read (the status page, list-servers, errors): a
	// handshake error or a URL may hold the very key the child was given.
	s.Target, s.Error = c.events.redactText(s.Target), c.events.redactText(s.Error)
	return s
}

// connected returns the live connection, waiting while the child is connecting,
// retrying or restarting, or idle (upstream.Life.Await); a child that gave up
// makes one fresh attempt, which the call waits for. It returns nil when that
// attempt failed too or ctx ended first.
func (c *child) connected(ctx context.Context) *conn { return c.connectedExcept(ctx, nil) }

// connectedExcept is connected, but never returns old: a caller whose request the
// child refused for want of a session waits for the connection that replaces it.
func (c *child) connectedExcept(ctx context.Context, old *conn) *conn {
	cn, _ := c.life.Await(ctx, old)
	return cn
}

// retry asks a child that gave up for one fresh attempt (upstream.Life.Retry).
func (c *child) retry() { c.life.Retry() }

// knownTool is the tool of that wire or canonical name the child had when it was
// last up, or nil.
func (c *child) knownTool(name string) *Tool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.known {
		if t.Wire == name || t.Canonical == name {
			return t
		}
	}
	return nil
}

// remember keeps tools, when there are any, as the last the child listed.
func (c *child) remember(tools []*Tool) {
	if tools == nil {
		return
	}
	c.mu.Lock()
	c.known = tools
	c.mu.Unlock()
}

func (c *child) current() (*conn, []*Tool) {
	cn, lists := c.life.Current()
	return cn, lists.tools
}

// derive completes a listing as it becomes the child's (upstream.Life.Set,
// under its lock): the gateway's tools, reviewed by the pins under the config
// of now, and the tools whose schema mirrors arguments into headers. A
// reconfigure changes the config before it rebuilds the current listing under
// the same lock, so no listing is left built under an entry since replaced.
func (c *child) derive(l *listing) {
	l.tools, l.headerTools = c.toolsFrom(l.raws), headerToolsOf(l.raws)
	c.remember(l.tools)
}

// watchRemote pings a remote child while cn lives (upstream.Conn.Watch): the
// state the child held (sessions, subscriptions) is gone once it stops
// answering, and its Life reconnects. A modern child has no ping (2026-07-28
// removed it): its dialect asks server/discover instead.
func (c *child) watchRemote(ctx context.Context, cn *conn) {
	ping := func(ctx context.Context) error {
		_, err := cn.Request(ctx, string(mcp.MethodPing), nil)
		return err
	}
	if err := cn.Watch(ctx, ping, pingInterval, pingTimeout); err != nil {
		c.log.Warn("the child did not answer a ping: reconnecting", "err", err)
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// relist refreshes the tools after the child said they changed.
func (c *child) relist(ctx context.Context, cn *conn) {
	raws, err := c.listTools(ctx, cn)
	if err != nil {
		c.log.Warn("re-listing tools failed", "err", err)
		return
	}
	var ex extras
	if !c.life.Update(cn, func(l *listing) {
		// Reviewed only once it is known to be the serving connection's: the
		// pins record no listing of one since replaced.
		l.raws, ex = raws, l.extras
		c.derive(l)
		c.mu.Lock()
		c.known = l.tools // what it lists now, none included
		c.mu.Unlock()
	}) {
		return
	}
	c.saveLists(cn, listing{raws: raws, extras: ex})
	c.events.relisted(c.name)
}

// relistExtras refreshes resources and prompts after the child said they changed.
func (c *child) relistExtras(ctx context.Context, cn *conn) {
	ex := c.listExtras(ctx, cn)
	var raws []json.RawMessage
	if !c.life.Update(cn, func(l *listing) { l.extras, raws = ex, l.raws }) {
		return
	}
	c.saveLists(cn, listing{raws: raws, extras: ex})
	c.events.relisted(c.name)
}

// conn is one live connection to a child: the connection itself
// (upstream.Conn: its transport, era, ids, end, use, what it declares, its
// requests), and what ties it to the gateway's clients. Its Instructions, what
// the child's initialize (or server/discover) result told its client, go into
// the gateway's own initialize result under the server's name.
type conn struct {
	*upstream.Conn
	server string

	// callers are the calls in flight on it; holds, the child's requests
	// waiting on clients.
	callers callers
	holds   holds
	// owner is the client session the connection serves alone ("sessions":
	// "client"), nil for the child's own connection; opener is the call that
	// opened it, whose stream carries what the child asks while it starts.
	owner  *session
	opener *caller
	// roots is whose roots the child was last told.
	roots rootsState

	// levelSent is the level a shared legacy child was last asked for, plus
	// one (0 before any).
	levelSent atomic.Int32
}

// StderrTail is what the child last wrote on stderr; "" when there is no
// connection (connect may fail before it has one).
func (cn *conn) StderrTail() string {
	if cn == nil {
		return ""
	}
	return cn.Conn.StderrTail()
}

// connect starts (or dials) the child, initializes the session and lists its tools.
// owner is the client session the connection is for ("sessions": "client"), nil for
// the child's own connection; opener is the call that made the session's
// connection open, if any. A session's connection lists no tools: the manifest is
// the child's own connection's. On failure the returned conn, if any, still carries
// the stderr tail for the log.
func (c *child) connect(ctx context.Context, owner *session, opener *caller) (*conn, []json.RawMessage, error) {
	cn, raws, err := c.connectOnce(ctx, owner, opener)
	if errors.Is(err, upstream.ErrEraFound) {
		// The era was found on a connection that cannot speak it (upstream.ErrEraFound):
		// once more, in the era now remembered.
		cn, raws, err = c.connectOnce(ctx, owner, opener)
	}
	return cn, raws, err
}

// connectOnce is one attempt of connect.
func (c *child) connectOnce(ctx context.Context, owner *session, opener *caller) (*conn, []json.RawMessage, error) {
	if c.beforeStart != nil {
		c.beforeStart(c.config())
	}
	cn := &conn{Conn: upstream.NewConn(), server: c.name,
		owner: owner, opener: opener, roots: rootsState{told: make(chan struct{})}}
	cn.Shared, cn.Declared, cn.ParamTool, cn.Info = owner == nil, c.capabilities(owner), c.paramHeaderTool, nexusInfo()
	if owner != nil {
		cn.Level = owner.logLevel
	}
	cn.Listen = upstream.NewListen(c.name, cn.Conn, cn.Shared, func(ctx context.Context, id json.RawMessage, params any) error {
		_, err := cn.RequestID(ctx, id, string(mcp.MethodSubscriptionsListen), params, upstream.Outgoing{})
		return err
	}, c.log)
	var err error
	if cn.Transport, err = c.dial.Dial(c.config(), c.log, cn.Tail()); err != nil {
		return cn, nil, err
	}
	drops := newRateLog(c.log, slog.LevelWarn, "dropped notifications from the child: the gateway is not keeping up", time.Second)
	// Requests from the child go to the gateway raw, so that every field of a
	// sampling or elicitation request reaches the client and the client's
	// error codes reach the child.
	cn.Transport.Receive(upstream.Handlers{
		Notification: func(method string, params json.RawMessage) {
			// This runs on the transport's reader: hand off, never block it.
			if !cn.Backlog.Put(method, params) {
				drops.add("method", method)
			}
		},
		Request: c.events.childRequests(cn),
		Lost:    cn.Lose,
	})
	if err = cn.Transport.Start(ctx); err != nil {
		cn.Lose(nil)
		if cn.Transport.Remote() {
			return cn, nil, remoteStartFailure(c.name, c.config().URL, fmt.Errorf("starting %s: %w", c.name, err))
		}
		return cn, nil, fmt.Errorf("starting %s: %w", c.name, notInstalled(c.name, c.config().Command, err))
	}
	go cn.Backlog.Pump(ctx, cn.Done(), func(n upstream.Note) { c.pumpNotification(cn, n) })
	go c.relistLoop(ctx, cn)

	limit := startTimeout
	if t := c.config().Timeout.D; t > 0 {
		limit = t // the server's timeout bounds its handshake too
	}
	initCtx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	if err := c.handshake(initCtx, cn, owner); err != nil {
		if errors.Is(err, upstream.ErrEraFound) {
			cn.Close()
			return cn, nil, err
		}
		if cn.Transport.Remote() {
			err = remoteStartFailure(c.name, c.config().URL, err)
		} else {
			err = withExit(cn, err)
		}
		cn.Close()
		if initCtx.Err() != nil && ctx.Err() == nil {
			// What the child answered before it went silent (its refusal of
			// server/discover) may be what explains it.
			return cn, nil, fmt.Errorf("%s did not finish its handshake within %s (raise servers.%s.timeout if it needs longer): %w", c.name, limit, c.name, err)
		}
		return cn, nil, err
	}
	cn.Dialect().Opened(ctx)
	if owner != nil {
		return cn, nil, nil
	}
	raws, err := c.listTools(initCtx, cn)
	if err != nil {
		cn.Close()
		return cn, nil, err
	}
	return cn, raws, nil
}

// capabilities are what the child is told its client can do: only what Nexus can
// honour. A connection of one client session gets exactly that client's sampling,
// elicitation and roots; a shared server's connection gets all three, which Nexus
// forwards to the client of the call in flight when that client declared them. The
// child's own connection of a "client" server is declared the same as a shared one:
// its lists are what every client is shown, and a server lists some tools only to a
// client that can sample or has roots; a call of such a tool is then answered by
// the client's own connection, which knows what its client declared. mcp-go's SSE
// client transport cannot receive a server's requests, so an SSE child gets none:
// its requests would wait unanswered.
func (c *child) capabilities(owner *session) mcp.ClientCapabilities {
	switch {
	case c.config().Transport == config.TransportSSE:
		return mcp.ClientCapabilities{}
	case owner != nil:
		return owner.caps.declared
	}
	return mcp.ClientCapabilities{
		Sampling:    &mcp.SamplingCapability{},
		Elicitation: &mcp.ElicitationCapability{Form: &struct{}{}},
		Roots: &struct {
			ListChanged bool `json:"listChanged,omitempty"`
		}{ListChanged: true},
	}
}

// pumpNotification routes one notification of the child.
func (c *child) pumpNotification(cn *conn, n upstream.Note) {
	if n.Method == mcp.MethodNotificationSubscriptionsAcknowledged {
		// The listen stream's own, for no one else. A list that changed before
		// the stream was open was told to no one: read it again.
		if cn.Listen.Acknowledged(n.Params) && cn.Shared {
			cn.Changes.Mark(upstream.ToolsList | upstream.OtherLists)
		}
		return
	}
	params := cn.Dialect().Received(n.Params)
	switch {
	case n.Method == string(mcp.MethodNotificationToolsListChanged):
		cn.Changes.Mark(upstream.ToolsList)
	case n.Method == string(mcp.MethodNotificationResourcesListChanged), n.Method == string(mcp.MethodNotificationPromptsListChanged):
		cn.Changes.Mark(upstream.OtherLists)
	case !cn.Shared:
		// A session's connection: what it sends is its client's alone.
		c.events.sessionNotification(cn, n.Method, params)
	default:
		c.events.notification(c.name, n.Method, params)
	}
}

// relistLoop re-reads the lists the child said changed (upstream.Changes), one
// pass at a time, for as long as the connection lives. The child's own
// connection reads them once it is the child's: what the child says while its
// first listing is still being made is read again after, not dropped as a
// replaced connection's would be.
func (c *child) relistLoop(ctx context.Context, cn *conn) {
	if cn.Shared && !c.awaitCurrent(ctx, cn) {
		return
	}
	for {
		lists, ok := cn.Changes.Next(ctx, cn.Done())
		if !ok {
			return
		}
		if !cn.Shared {
			c.relistOwn(ctx, cn, lists)
			continue
		}
		if lists&upstream.ToolsList != 0 {
			c.relist(ctx, cn)
		}
		if lists&upstream.OtherLists != 0 {
			c.relistExtras(ctx, cn)
		}
	}
}

// awaitCurrent waits until cn is the child's current connection, and reports
// false when cn or ctx ended first.
func (c *child) awaitCurrent(ctx context.Context, cn *conn) bool {
	for {
		updated := c.life.Updated()
		if current, _ := c.life.Current(); current == cn {
			return true
		}
		select {
		case <-updated:
		case <-cn.Done():
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// listTools asks the child for every page of its tools, kept as raw JSON.
func (c *child) listTools(ctx context.Context, cn *conn) ([]json.RawMessage, error) {
	tools, err := upstream.List(ctx, cn.Request, string(mcp.MethodToolsList), "tools")
	if err != nil {
		return nil, fmt.Errorf("listing the tools of %s: %w", c.name, err)
	}
	return tools, nil
}

// toolsFrom builds the gateway's tools from a listing the child just gave
// (toolsOf).
func (c *child) toolsFrom(raws []json.RawMessage) []*Tool { return c.toolsOf(raws, true) }

// toolsOf builds the gateway's tools from the child's listing and the current
// config entry, of the tools its pins admit; a tool the gateway cannot serve is
// logged and skipped. fresh says the listing is new: the pins record what it
// brings (a listing reviewed again after a reload records nothing).
func (c *child) toolsOf(raws []json.RawMessage, fresh bool) []*Tool {
	if raws == nil {
		return nil
	}
	raws = c.admit(raws, fresh)
	cfg := c.config()
	tools := make([]*Tool, 0, len(raws))
	for _, raw := range raws {
		t, err := newTool(cfg, raw, c.names)
		if err != nil {
			c.log.Warn("skipping a tool", "err", c.skipReason(err))
			continue
		}
		tools = append(tools, t)
	}
	return tools
}
