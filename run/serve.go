package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/nexus-mcp/nexus/aggregation"
	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/internal/pipeio"
	"github.com/nexus-mcp/nexus/pins"
)

// ServeOptions are what Serve serves.
type ServeOptions struct {
	Env    Env
	Config *config.Config // as Env.Load read it
	// Agent is the agent a stdio client is; "": the client's own name.
	Agent string
	// HTTPAddr serves streamable HTTP at http://HTTPAddr/mcp instead of
	// stdio; MetricsAddr serves /metrics and the status page.
	HTTPAddr, MetricsAddr string
	// Insecure allows HTTPAddr beyond loopback without agent tokens.
	Insecure bool
	// Gateway is what the gateway runs with; Serve always observes it
	// (Gateway.Observe), since the status page reads the observation.
	Gateway Options
	// Stdin and Stdout carry MCP over stdio; nil: os.Stdin, os.Stdout.
	Stdin  io.Reader
	Stdout io.Writer
	// Processors is how many threads run Go code at once (GOMAXPROCS) while
	// serving stdio over pipes read raw (internal/pipeio); 0 leaves the
	// runtime's choice. One client's calls are relayed with less CPU, and
	// sooner, on one: docs/decisions.md says why. Afterwards the runtime's
	// default is restored (runtime.SetDefaultGOMAXPROCS, which ignores the
	// GOMAXPROCS variable and any earlier setting: set Processors only when
	// neither was made).
	Processors int
	// StdioNotice is said on Env.Stderr when serving stdio (a person, not a
	// client, started the gateway); "": nothing.
	StdioNotice string
	// Listening, if set, is told the address of each listener Serve opens
	// ("http", "metrics"), once it is open: tests learn a port given as :0.
	Listening func(name string, addr net.Addr)
}

// UsageError is a mistake in how the gateway was asked to serve (an
// address, a flag value): the command reports it as a usage error.
type UsageError string

func (e UsageError) Error() string { return string(e) }

// Serve runs a gateway until ctx ends: it builds the runtime of
// opts.Config, serves MCP over stdio or HTTP (and the pages beside it),
// reloads when a watched config file changes or on SIGHUP, and announces
// itself in Env.Home/run so that CLI edits can wait for the reload and
// `nexus console` can show its console (publishConsole). Every
// goroutine it starts is joined before the gateway closes.
func Serve(ctx context.Context, opts ServeOptions) error {
	e, cfg := opts.Env, opts.Config
	opts.Gateway.Observe = true
	ls, err := openListeners(cfg, e, opts)
	if err != nil {
		return err
	}
	g, err := Build(ctx, cfg, e, opts.Gateway)
	if err != nil {
		ls.close()
		if oe := aggregation.OptionError(""); errors.As(err, &oe) {
			return UsageError(oe)
		}
		return err
	}
	defer g.Close()
	defer logRefusals(e, g)
	// Every goroutine serve starts is joined before the gateway closes: a reload
	// (from the watcher or SIGHUP) never runs while Close does.
	ctx, cancel := context.WithCancel(ctx)
	var workers sync.WaitGroup
	defer workers.Wait() // after cancel (defers run in reverse), before g.Close
	defer cancel()
	workers.Go(func() { reportProblems(ctx, e, g) })
	workers.Go(func() { returnMemory(ctx, g.Settled(), returnMemoryAfter, debug.FreeOSMemory) })
	defer followConfig(ctx, e, g, &workers)()
	defer publishConsole(ctx, e, published(opts, ls), socketMux(g, e), &workers)()
	if ls.metrics != nil {
		serveMetrics(ctx, opts, g, ls.metrics, &workers)
	}
	if ls.http == nil {
		return serveStdio(ctx, opts, g)
	}
	srv := aggregation.NewHTTPServer(g.HTTPHandler(aggregation.HTTPOptions{RequireToken: ls.requireToken, Pages: g.obs.pages(g.Gateway),
		Actions: g.obs.actions(g.Gateway)}))
	shutdownWhenDone(ctx, srv, &workers)
	if opts.Listening != nil {
		opts.Listening("http", ls.http.Addr())
	}
	e.Logger.Info("serving streamable HTTP", "url", "http://"+ls.http.Addr().String()+"/mcp", "tools", len(g.Tools()))
	fmt.Fprintf(e.stderr(), "nexus: listening on http://%s/mcp; status page on http://%s/ (in a browser, log in at http://%s/login with an agent's token)\n", ls.http.Addr(), ls.http.Addr(), ls.http.Addr())
	if err := srv.Serve(ls.http); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// returnMemory calls free (debug.FreeOSMemory) once start-up is over: once
// settled is closed, and after a moment more for a client's opening requests
// (initialize, then its first lists, at once). Start-up decodes the pin file and
// every server's kept lists, and its garbage leaves the heap several times the
// size an idle gateway needs; the runtime's scavenger would give those pages
// back to the system only slowly, and a gateway mostly idles. With 20 lazy
// servers, the gateway's anonymous memory goes from 17 MiB to 11 MiB. It
// returns without calling free when ctx ends first.
func returnMemory(ctx context.Context, settled <-chan struct{}, after time.Duration, free func()) {
	select {
	case <-settled:
	case <-ctx.Done():
		return
	}
	t := time.NewTimer(after)
	defer t.Stop()
	select {
	case <-t.C:
		free()
	case <-ctx.Done():
	}
}

// returnMemoryAfter is how long after start-up returnMemory waits: long
// enough for a client's opening requests, short against the time a gateway
// idles.
const returnMemoryAfter = 500 * time.Millisecond

// listeners are what Serve listens on: MCP over HTTP and the metrics pages,
// each nil when not asked for.
type listeners struct {
	http, metrics net.Listener
	requireToken  bool // see listen
}

// openListeners opens the listeners opts asks for, before the gateway starts,
// so that a refused or taken address fails at once.
func openListeners(cfg *config.Config, e Env, opts ServeOptions) (listeners, error) {
	var ls listeners
	var err error
	if opts.HTTPAddr != "" {
		if ls.http, ls.requireToken, err = listen(cfg, e, "http", opts.HTTPAddr, opts.Insecure); err != nil {
			return ls, err
		}
	}
	if opts.MetricsAddr != "" {
		if ls.metrics, _, err = listen(cfg, e, "metrics", opts.MetricsAddr, opts.Insecure); err != nil {
			ls.close()
			return ls, err
		}
	}
	return ls, nil
}

// published is the record of the console a gateway serving opts on ls
// publishes (publishConsole).
func published(opts ServeOptions, ls listeners) Published {
	rec := Published{Started: time.Now(), Version: aggregation.Version, Front: "stdio", Agent: opts.Agent,
		Config: opts.Config.Layers}
	if ls.http != nil {
		rec.Front, rec.URL, rec.Agent = "http", "http://"+ls.http.Addr().String()+"/mcp", ""
	}
	if ls.metrics != nil {
		rec.Metrics = "http://" + ls.metrics.Addr().String() + "/"
	}
	return rec
}

func (ls listeners) close() {
	for _, l := range []net.Listener{ls.http, ls.metrics} {
		if l != nil {
			l.Close()
		}
	}
}

// logRefusals is the audit trail's summary at the end of a session: every
// refusal was logged as it happened.
func logRefusals(e Env, g *Runtime) {
	for agent, tools := range g.Denials().Snapshot() {
		for tool, n := range tools {
			e.Logger.Info("policy: refusals this session", "agent", agent, "tool", tool, "count", n)
		}
	}
}

// reportProblems says, once every server made its first attempt, which policy
// and toolset entries name nothing: serve does not wait for its servers to
// answer its client.
func reportProblems(ctx context.Context, e Env, g *Runtime) {
	if g.Ready(ctx) != nil {
		return
	}
	known := KnownTools(g.Gateway)
	for _, p := range g.Policy().Check(known) {
		e.Logger.Warn("policy problem", "problem", p.String())
	}
	for _, p := range g.Config().PinProblems(known) {
		e.Logger.Warn("toolset problem", "problem", p)
	}
}

// followConfig reloads g when a watched file changes, on SIGHUP (the CLI sends
// it after an edit, and waits for the reload the announcement counts) and when
// a missing file's grace ends; a change of the pin file alone (an approval
// where there are no signals, another gateway's first listing) has the tool
// lists reviewed again. The returned function stops all but the
// workers, which end with ctx.
func followConfig(ctx context.Context, e Env, g *Runtime, workers *sync.WaitGroup) (stop func()) {
	rl := newReloader(e, g.Gateway)
	workers.Go(func() { config.Watch(ctx, e.Watched, 500*time.Millisecond, rl.reload) })
	workers.Go(func() {
		config.Watch(ctx, []string{pins.Path(e.Home)}, 500*time.Millisecond, g.ReviewPins)
	})
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	reloaded, unannounce := announce(e)
	workers.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				e.Logger.Info("SIGHUP: reloading the config")
				rl.reload()
				reloaded() // tells the waiting command the edit is in force
			case <-rl.recheck:
				rl.reload() // a missing config file's grace has ended
			}
		}
	})
	return func() {
		unannounce()
		signal.Stop(hup)
		rl.stop()
	}
}

// serveMetrics serves /metrics and the status page on l until ctx ends.
func serveMetrics(ctx context.Context, opts ServeOptions, g *Runtime, l net.Listener, workers *sync.WaitGroup) {
	e := opts.Env
	msrv := aggregation.NewHTTPServer(pagesMux(g))
	shutdownWhenDone(ctx, msrv, workers)
	workers.Go(func() {
		if err := msrv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			e.Logger.Error("the metrics server stopped", "err", err)
		}
	})
	if opts.Listening != nil {
		opts.Listening("metrics", l.Addr())
	}
	e.Logger.Info("serving metrics and the status page", "url", "http://"+l.Addr().String()+"/metrics")
	fmt.Fprintf(e.stderr(), "nexus: metrics on http://%s/metrics, status page on http://%s/ (in a browser, log in at http://%s/login with an agent's token)\n", l.Addr(), l.Addr(), l.Addr())
}

// shutdownWhenDone shuts srv down, giving requests in flight 5 seconds, once
// ctx ends.
func shutdownWhenDone(ctx context.Context, srv *http.Server, workers *sync.WaitGroup) {
	workers.Go(func() {
		<-ctx.Done()
		shut, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		_ = srv.Shutdown(shut)
	})
}

// serveStdio serves MCP on opts.Stdin and opts.Stdout until ctx ends or the
// client leaves.
func serveStdio(ctx context.Context, opts ServeOptions, g *Runtime) error {
	e := opts.Env
	e.Logger.Info("serving over stdio", "servers", len(opts.Config.EnabledServers()), "tools", len(g.Tools()))
	if opts.StdioNotice != "" {
		fmt.Fprintln(e.stderr(), opts.StdioNotice)
	}
	var in io.Reader = os.Stdin
	var out io.Writer = os.Stdout
	if opts.Stdin != nil {
		in = opts.Stdin
	}
	if opts.Stdout != nil {
		out = opts.Stdout
	}
	// Pipes from the client (as it starts a stdio server) are read and
	// written raw: see internal/pipeio.
	raw := false
	if f, ok := in.(*os.File); ok {
		r, restore := pipeio.Own(f)
		defer restore()
		in, raw = r, r != io.ReadWriter(f)
	}
	if f, ok := out.(*os.File); ok {
		w, restore := pipeio.Own(f)
		defer restore()
		out, raw = w, raw && w != io.ReadWriter(f)
	}
	if !raw {
		e.Logger.Debug("stdin and stdout are read through os.File: not pipes or sockets this process could open again (internal/pipeio)")
	}
	// One P only over raw pipes: a read of stdin blocked in the kernel would
	// hold the only P while a call waits for its child.
	if opts.Processors > 0 && raw {
		runtime.GOMAXPROCS(opts.Processors)
		defer runtime.SetDefaultGOMAXPROCS()
	}
	return g.ServeStdio(ctx, in, out, opts.Agent)
}

// listen opens the HTTP listener, refusing to expose an unauthenticated gateway
// beyond this machine unless the user said so explicitly. requireToken tells the
// handler to refuse everyone should a reload remove the last token.
func listen(cfg *config.Config, e Env, flag, addr string, insecure bool) (l net.Listener, requireToken bool, err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, false, UsageError(fmt.Sprintf("--%s %q: write HOST:PORT, e.g. 127.0.0.1:8765", flag, addr))
	}
	hasTokens := false
	for _, a := range cfg.Agents {
		hasTokens = hasTokens || a.TokenSHA256 != ""
	}
	loopback := host == "localhost"
	if ip := net.ParseIP(host); ip != nil {
		loopback = ip.IsLoopback()
	}
	if !hasTokens {
		if !loopback && !insecure {
			return nil, false, UsageError(fmt.Sprintf("refusing to serve %s without authentication: create an agent token with `nexus agent add NAME`, listen on 127.0.0.1, or pass --insecure-no-auth", addr))
		}
		e.Logger.Warn("no agent tokens configured: every HTTP client is served as the anonymous agent (nexus agent add NAME creates a token)")
	}
	l, err = net.Listen("tcp", addr)
	if err != nil {
		return nil, false, fmt.Errorf("listening on %s: %w", addr, err)
	}
	return l, !loopback && !insecure, nil
}

// reload applies an edited config to the running gateway; an invalid edit is logged
// and ignored, and the running config stays.
func reload(e Env, g *aggregation.Gateway) {
	cfg, err := e.Load()
	if err != nil {
		e.Logger.Error("config change ignored: the edited config is invalid", "err", err)
		return
	}
	if err := g.Reload(cfg); err != nil {
		e.Logger.Error("config change ignored", "err", err)
		return
	}
	e.Logger.Info("config reloaded: servers, policy, agent tokens and memory rules apply from the next call")
}

// KnownTools maps each server to its tool names, nil for a server not connected.
func KnownTools(g *aggregation.Gateway) map[string][]string {
	known := map[string][]string{}
	for _, s := range g.Servers() {
		known[s.Name] = nil
		if s.State == aggregation.StateReady {
			known[s.Name] = []string{}
		}
	}
	for _, t := range g.Tools() {
		known[t.Server] = append(known[t.Server], t.Exposed()) // policy names a renamed tool by its new name
	}
	return known
}
