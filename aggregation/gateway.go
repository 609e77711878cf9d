// Package aggregation puts many child MCP servers behind one front MCP server.
//
// A Gateway connects to every configured child (stdio, SSE or streamable HTTP),
// merges what they offer into one manifest (tools named <server>.<tool>, sent on the
// wire as <prefix>__<tool> by default; prompts namespaced the same way; resources by
// URI), and answers clients over stdio or streamable HTTP.
//
// The gateway owns its sessions: both fronts hand every client message to one
// session layer (session.go), so every message takes one path:
//
//	front (stdio.go, http.go: framing, size limit, authentication)
//	  -> session  (initialized? whose? the agent is decided once, at initialize)
//	  -> method   (methods.go: lists from the agent's view, policy on every item)
//	  -> policy -> memory -> child, for tools/call (chain.go)
//	  -> observer (observe.go: the finished call, in one record, for metrics and audit)
//
// and everything a child sends back is routed to the session it belongs to
// (routes.go, childreq.go): progress to the caller, logs to the sessions that may see
// the server, resource updates to subscribers, sampling and elicitation to the
// client of the call. Every message to a client leaves through session.outward, the
// one redaction point. A 2026-07-28 request takes the same path with a session of
// its own that lasts as long as the request (modern.go); a child's question during
// its call becomes an InputRequiredResult (mrtr.go); each child is spoken its own
// era (upstream.Handshake). A server configured with "sessions": "client" gets one
// upstream connection per client session (clientconns.go), so what a client does to
// it stays that client's.
package aggregation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/pins"
	"github.com/nexus-mcp/nexus/policy"
	"github.com/nexus-mcp/nexus/secrets"
	"github.com/nexus-mcp/nexus/toolsearch"
	"github.com/nexus-mcp/nexus/upstream"
)

// Version is the gateway's version, reported to clients and children.
const Version = "0.1.0"

// Options configure a Gateway. The zero value is usable.
type Options struct {
	Logger *slog.Logger
	// Memory is the result cache; nil turns memory off.
	Memory *memory.Memory
	// ToolNames overrides the config's wire name style ("wire" or "dotted").
	ToolNames string
	// SearchEmbedder, when set, is blended into nexus__find_tools's ranking (the
	// memory embedder the config names, say); nil ranks by words alone.
	SearchEmbedder toolsearch.Embedder
	// MaxNameLength overrides names.maxLength: what `serve --max-name-length`
	// (written by `nexus setup` for clients that prefix names) asks for.
	MaxNameLength int
	// Resolve expands references in env and header values (${env:NAME}...) when a
	// child is started; nil expands ${env:NAME} only.
	Resolve func(string) (string, error)
	// BeforeStart, when set, is called with a child's config entry each time the
	// child is about to start (at Start, on a reload, on a restart): the place to
	// register with the redactor the values the child will be given.
	BeforeStart func(*config.Server)
	// HTTPClient, when set, is the HTTP client of a remote child's next
	// connection: the place for its authorization (OAuth). A connection whose
	// requests fail with an oauth.LoginError puts the child in StateNeedsLogin.
	HTTPClient func(*config.Server) *http.Client
	// Redact removes secret values from what children send back (results, errors,
	// resources, prompts) before it reaches memory or a client; nil keeps it as is.
	Redact func([]byte) []byte
	// RedactText removes secret values from text a person reads: a child's stderr
	// and stray stdout lines before they are cut and logged, its errors in Servers
	// (the status page, list-servers); nil keeps it as is.
	RedactText func(string) string
	// Observer sees every finished call (metrics, the audit trail); nil sees none.
	Observer Observer
	// Tracer makes the spans of each request (the request, then its policy, memory
	// and child steps); nil traces nothing.
	Tracer trace.TracerProvider
	// StateKey is the HMAC key that seals the requestState Nexus hands a
	// 2026-07-28 client in an InputRequiredResult; nil makes a random one. Replicas
	// given the same key accept each other's states for modern children.
	StateKey []byte
	// OneAttempt makes a child that fails to start give up at once, with one log
	// line, rather than retry with backoff: a one-shot command (call, list-tools)
	// ends long before a retry could help, and its output says which failed. A
	// call of the server's tool still asks it for one fresh attempt.
	OneAttempt bool
	// Pins reviews each child's tool listing against the definitions approved
	// for it (package pins): what it holds is neither listed nor callable. nil
	// lists every tool a child offers.
	Pins *pins.Guard
	// Ledger records the process groups of stdio children while they run, so
	// that a gateway killed without a chance to end them has them ended by the
	// next (upstream.Ledger); nil records none.
	Ledger *upstream.Ledger
	// ListsDir is where the lists of lazy servers are kept between runs
	// (servers.X.start, lifecycle.go); empty keeps none, and every server starts
	// with the gateway.
	ListsDir string
}

// Gateway is the aggregating MCP server.
type Gateway struct {
	log   *slog.Logger
	mem   *memory.Memory
	names naming
	// searchEmbedder is Options.SearchEmbedder.
	searchEmbedder toolsearch.Embedder
	// supervision is what every child is made with; the gateway reloads the
	// pins and reads the kept lists through it too.
	supervision
	redact      func([]byte) []byte
	text        func(string) string // Options.RedactText
	methods     map[string]method
	modern      map[string]method // the dispatch table of the 2026-07-28 era (modern.go)
	sealer      sealer            // seals the requestState of bridged calls (mrtr.go)
	flights     flights           // modern requests' calls waiting for their clients' input
	modernSlots agentSlots        // modern HTTP requests in flight, per agent
	denials     *policy.Counter
	eraRefusals *rateLog // a pinned modern child refusing its own requests (eraRefusal)
	observer    Observer
	tracer      trace.Tracer
	tracing     bool // a tracer was given: spans are made
	sessions    sessionSet
	views       views
	subs        subscriptions
	progress    progressRoutes
	tasks       taskRoutes
	listsMu     sync.Mutex   // serializes listsChanged
	gate        sync.RWMutex // see gate.go

	cfg      atomic.Pointer[config.Config]
	pol      atomic.Pointer[policy.Policy]
	lists    *merger                           // the manifest
	children atomic.Pointer[map[string]*child] // replaced whole on reload
	tokens   atomic.Pointer[map[string]string] // hex SHA-256 of a bearer token -> agent
	logins   logins                            // the status page's browser sessions (login.go)

	reloadMu sync.Mutex  // one reload at a time, and none once Close began
	closed   bool        // Close began; guarded by reloadMu
	closing  atomic.Bool // Close began: children exiting now are not restarts
	runCtx   context.Context

	settled chan struct{} // closed when every child of the first config made its first attempt

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// OptionError is New's refusal of an option it cannot use (the tool-name style,
// the longest name), checked there only: a command reports it as a usage error.
type OptionError string

func (e OptionError) Error() string { return string(e) }

// New builds a gateway for cfg. Nothing is started until Start.
func New(cfg *config.Config, opts Options) (*Gateway, error) {
	pol, err := policy.Compile(cfg.Policy)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	names := cfg.ToolNames
	if opts.ToolNames != "" {
		names = opts.ToolNames
	}
	if names != "" && names != config.ToolNamesWire && names != config.ToolNamesDotted {
		return nil, OptionError(fmt.Sprintf("tool names %q (--tool-names): use wire or dotted", names))
	}
	maxName := cfg.Names.MaxName()
	if opts.MaxNameLength != 0 {
		if opts.MaxNameLength < config.MinNameLength || opts.MaxNameLength > config.DefaultMaxNameLength {
			return nil, OptionError(fmt.Sprintf("the longest tool name (--max-name-length) is from %d to %d characters, not %d", config.MinNameLength, config.DefaultMaxNameLength, opts.MaxNameLength))
		}
		maxName = opts.MaxNameLength
	}
	resolve := opts.Resolve
	if resolve == nil {
		resolve = expandEnv
	}
	if opts.Redact == nil {
		opts.Redact = func(b []byte) []byte { return b }
	}
	if opts.RedactText == nil {
		opts.RedactText = func(s string) string { return s }
	}
	tp := opts.Tracer
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	g := &Gateway{
		log: log, mem: opts.Memory, names: naming{style: names, max: maxName}, searchEmbedder: opts.SearchEmbedder, redact: opts.Redact, text: opts.RedactText,
		supervision: supervision{beforeStart: opts.BeforeStart, oneAttempt: opts.OneAttempt, pins: opts.Pins, listsDir: opts.ListsDir},
		denials:     &policy.Counter{}, observer: opts.Observer, tracer: tp.Tracer("github.com/nexus-mcp/nexus/aggregation"), tracing: opts.Tracer != nil,
	}
	g.dial = &upstream.Dialer{Resolve: resolve, HTTPClient: opts.HTTPClient, Local: upstream.LocalTransport(), Headers: traceHeaders,
		MaxMessage: g.childMessageLimit, Redact: opts.RedactText, Ledger: opts.Ledger}
	g.eraRefusals = newRateLog(log, slog.LevelWarn, "a server pinned to the stateless era refused a request of its own to the client", time.Minute)
	g.methods = g.methodTable()
	g.modern = g.modernMethodTable()
	g.sealer = newSealer(opts.StateKey)
	g.settled = make(chan struct{})
	g.lists = newMerger(g, g.settled)
	g.cfg.Store(cfg)
	g.pol.Store(pol)
	g.tokens.Store(agentTokens(cfg))
	kids := map[string]*child{}
	for _, s := range cfg.EnabledServers() {
		kids[s.Name] = g.newChild(s)
	}
	g.children.Store(&kids)
	g.applyMemorySettings(cfg)
	return g, nil
}

// Settled is closed once every child of the first config made its first
// attempt (a lazy one: once it is idle with its kept lists shown), and Start's
// first lists are built: the end of a gateway's start-up.
func (g *Gateway) Settled() <-chan struct{} { return g.settled }

// Start connects to every child in parallel and returns at once: children join as
// they connect, and their tools reach clients with list_changed. Use Ready to wait
// for them (the CLI does; serve answers initialize without waiting). A child that
// fails keeps retrying in the background without holding up the others.
func (g *Gateway) Start(ctx context.Context) error {
	ctx, g.cancel = context.WithCancel(ctx)
	g.reloadMu.Lock()
	g.runCtx = ctx
	for _, c := range g.kids() {
		c.start(ctx)
	}
	g.reloadMu.Unlock()
	g.lists.firstLists = time.Now().Add(firstListGrace)
	g.wg.Go(func() { g.lists.loop(ctx, g.log) })
	g.wg.Go(func() { g.sweepLoop(ctx) })
	g.wg.Go(func() {
		defer close(g.settled)
		if g.Ready(ctx) == nil {
			g.listsSettled()
		}
	})
	return nil
}

// firstListGrace is how long, after Start, a client's first lists may wait for
// children still making their first attempt: a client that lists at once after
// initialize (most do) gets the tools of every server that starts within it, on a
// loaded machine too (an npx server may take seconds there), and a server that
// hangs holds nothing up for longer than this; its tools arrive later with
// list_changed.
const firstListGrace = 10 * time.Second

// started reports whether every child of the first config made its first attempt.
func (g *Gateway) started() bool {
	select {
	case <-g.settled:
		return true
	default:
		return false
	}
}

// outward is the client side's one redaction point: every message to a client
// passes it, whatever produced it (a child's result, a log line, a list, an
// error, a forwarded request, an HTTP refusal before any session), on both
// fronts and in both eras. The child side has its own, fromChild, before memory
// keeps a result.
func (g *Gateway) outward(msg []byte) []byte { return g.redact(msg) }

// Ready waits until each named server (every configured one when none is named) has
// made its first attempt to connect, then brings the manifest up to date. It reports
// tool names two servers claim (the first, in server-name order, keeps it).
func (g *Gateway) Ready(ctx context.Context, servers ...string) error {
	kids := g.kids()
	if len(servers) == 0 {
		servers = slices.Collect(maps.Keys(kids))
	}
	for _, name := range servers {
		c := kids[name]
		if c == nil {
			continue
		}
		select {
		case <-c.life.Settled():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if errs := g.lists.rebuild(ctx); len(errs) > 0 {
		return fmt.Errorf("conflicting tool names: %w", errors.Join(errs...))
	}
	return nil
}

// sweepLoop drops progress routes of calls that ended.
func (g *Gateway) sweepLoop(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			g.progress.sweep(now)
			g.tasks.sweep(now)
		}
	}
}

// Close ends every session, stops every child and waits for them.
func (g *Gateway) Close() {
	// Serialised with Reload: a reload either finished before, or is refused.
	g.reloadMu.Lock()
	g.closed = true
	g.closing.Store(true)
	g.reloadMu.Unlock()
	if g.cancel != nil {
		g.cancel()
	}
	for _, s := range g.sessions.snapshot() {
		s.close()
	}
	shutdownAll(slices.Collect(maps.Values(g.kids())))
	g.wg.Wait()
	g.dial.Local.CloseIdleConnections()
}

func (g *Gateway) newChild(s *config.Server) *child {
	return newChild(s, g.names, g.log, g, g.supervision)
}

// expandEnv resolves ${env:NAME} references (the default when the caller gives no
// resolver): the one expander of the project, with no keychain behind it.
func expandEnv(value string) (string, error) {
	v, _, err := secrets.Expand(context.Background(), value, nil, os.LookupEnv)
	return v, err
}

// shutdownAll stops children in parallel: each may take its grace period to exit.
func shutdownAll(kids []*child) {
	var wg sync.WaitGroup
	for _, c := range kids {
		wg.Go(c.shutdown)
	}
	wg.Wait()
}

// kids is the current set of children; the map is never modified once published.
func (g *Gateway) kids() map[string]*child { return *g.children.Load() }

func agentTokens(cfg *config.Config) *map[string]string {
	tokens := map[string]string{}
	for name, a := range cfg.Agents {
		if a.TokenSHA256 != "" {
			tokens[strings.ToLower(a.TokenSHA256)] = name
		}
	}
	return &tokens
}

// Servers reports each configured child's state.
func (g *Gateway) Servers() []Status {
	var out []Status
	kids := g.kids()
	for _, name := range slices.Sorted(maps.Keys(kids)) {
		out = append(out, kids[name].status())
	}
	return out
}

// Config is the config in force (replaced whole on reload; never modify it).
func (g *Gateway) Config() *config.Config { return g.cfg.Load() }

// Sessions counts the live sessions per front ("stdio", "http").
func (g *Gateway) Sessions() map[string]int {
	return map[string]int{frontStdio: g.sessions.count(frontStdio), frontHTTP: g.sessions.count(frontHTTP)}
}

// Memory is the gateway's memory, nil when off.
func (g *Gateway) Memory() *memory.Memory { return g.mem }

// Tools is the current merged manifest, sorted by canonical name.
func (g *Gateway) Tools() []*Tool { return slices.Clone(g.lists.current().tools) }

// Policy is the policy in force.
func (g *Gateway) Policy() *policy.Policy { return g.pol.Load() }

// Denials counts refused calls per agent and tool.
func (g *Gateway) Denials() *policy.Counter { return g.denials }

// Reload applies a new configuration while serving: policy, agent tokens and memory
// rules apply to the next call of every session; removed servers are stopped, new ones
// started, and changed ones restarted (or, when only their annotations, prefix or
// timeout changed, re-read in place). The pin file is read again, and every
// listing reviewed against it: an approved tool is listed. Clients are told that their tools may have
// changed. The caller validates cfg first; an invalid config never gets here.
func (g *Gateway) Reload(cfg *config.Config) error {
	pol, err := policy.Compile(cfg.Policy)
	if err != nil {
		return err
	}
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	if g.closed {
		return errors.New("the gateway is closing; reload skipped")
	}
	if g.pins != nil {
		_ = g.pins.Reload() // an approval; a file that can no longer be trusted holds every tool (logged)
	}
	g.cfg.Store(cfg)
	g.swapPolicy(pol)
	g.tokens.Store(agentTokens(cfg))
	g.endRevokedSessions()
	g.applyMemorySettings(cfg)

	old := g.kids()
	next := map[string]*child{}
	var stopped []*child
	for _, s := range cfg.EnabledServers() {
		c, ok := old[s.Name]
		switch {
		case ok && launchKey(c.config()) == launchKey(s):
			next[s.Name] = c
			c.reconfigure(s)
			c.retry() // a server that gave up tries once more (doctor --retry)
		default:
			if ok {
				stopped = append(stopped, c)
			}
			nc := g.newChild(s)
			next[s.Name] = nc
			if g.runCtx != nil {
				nc.start(g.runCtx)
				g.log.Info("server started", "server", s.Name)
			}
		}
	}
	for name, c := range old {
		if _, kept := next[name]; !kept {
			stopped = append(stopped, c)
			g.log.Info("server stopped: it is no longer in the config (or is disabled)", "server", name)
		}
	}
	g.children.Store(&next)
	for _, c := range stopped {
		g.forget(g.runCtx, c.name)
		if next[c.name] != nil && next[c.name] != c {
			g.log.Info("server restarted: its launch settings changed", "server", c.name)
		}
	}
	shutdownAll(stopped)
	g.toolsChanged("")
	g.listsChanged() // the policy may have changed what sessions see
	return nil
}

// applyMemorySettings hands memory the rules config parsed (and validated) at load.
func (g *Gateway) applyMemorySettings(cfg *config.Config) {
	g.mem.SetSettings(cfg.MemoryRules()) // memory off (nil) ignores them
}

// toolsChanged and relisted are what a child tells of its lists (childEvents):
// the manifest is built again (merger.changed, merger.schedule).
func (g *Gateway) toolsChanged(string) { g.lists.changed() }
func (g *Gateway) relisted(string)     { g.lists.schedule() }

// forget makes a server's remembered answers unfit to be served as fresh: it
// crashed, restarted, its tools changed, or it is gone. They stay for
// stale-if-error. Children that exit because the gateway closes are not
// forgotten: a clean shutdown changes nothing they said.
func (g *Gateway) forget(ctx context.Context, server string) {
	if g.closing.Load() {
		return
	}
	if ctx == nil || ctx.Err() != nil {
		ctx = context.Background()
	}
	if err := g.mem.MarkStale(ctx, server); err != nil {
		g.log.Warn("marking remembered answers stale failed", "server", server, "err", err)
	}
}

func (g *Gateway) reconnected(server string) { g.forget(g.runCtx, server) }

func (g *Gateway) childMessageLimit() int64 { return g.cfg.Load().ChildMessageLimit() }
