package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nexus-mcp/nexus/aggregation"
	"github.com/nexus-mcp/nexus/config"
)

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "serve the gateway over stdio (default) or streamable HTTP",
		Description: "Over stdio (for Claude Desktop and other local clients) stdout carries only MCP\n" +
			"messages and logs go to stderr. With --http ADDR the gateway listens at\n" +
			"http://ADDR/mcp; agents are identified by bearer tokens (nexus agent add).\n" +
			"Metrics (/metrics) and the status page (/) are served to agents with a token\n" +
			"(or to anyone with \"status\": {\"public\": true}), at --http's address or at\n" +
			"--metrics ADDR.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "agent", Usage: "the agent `NAME` this stdio client is (default: the client's own name, else anonymous)", EnvVars: []string{"NEXUS_AGENT"}},
			&cli.StringFlag{Name: "http", Usage: "listen for streamable HTTP on `ADDR` (e.g. 127.0.0.1:8765) instead of stdio; /metrics and the status page / are served there too"},
			&cli.StringFlag{Name: "metrics", Usage: "serve Prometheus metrics (/metrics) and the status page (/) on `ADDR` (e.g. 127.0.0.1:9464)"},
			&cli.BoolFlag{Name: "insecure-no-auth", Usage: "allow --http on a non-loopback address with no agent tokens configured"},
			&cli.StringFlag{Name: "tool-names", Usage: "wire names: `STYLE` wire (<server>__<tool>) or dotted (<server>.<tool>)"},
			&cli.IntFlag{Name: "max-name-length", Usage: "the longest wire tool name, `N` from 20 to 64 (default names.maxLength, else 64); nexus setup sets it for clients that prefix names", EnvVars: []string{"NEXUS_MAX_NAME_LENGTH"}},
			&cli.BoolFlag{Name: "no-memory", Usage: "do not answer from or write to memory"},
		},
		Action: func(c *cli.Context) error {
			if c.Args().Len() > 0 {
				return usageError(fmt.Sprintf("serve takes no arguments, got %q", c.Args().First()))
			}
			e, err := newEnv(c, slog.LevelInfo)
			if err != nil {
				return err
			}
			e.serving = true
			err = e.serve(c.Context, serveOptions{
				agent: c.String("agent"), httpAddr: c.String("http"), metricsAddr: c.String("metrics"), insecure: c.Bool("insecure-no-auth"),
				gw: gatewayOptions{noMemory: c.Bool("no-memory"), toolNames: c.String("tool-names"), maxNameLength: c.Int("max-name-length"), noWait: true,
					observe: true, metrics: c.String("http") != "" || c.String("metrics") != ""},
			})
			if c.Context.Err() != nil && errors.Is(err, context.Canceled) {
				return nil // SIGINT or SIGTERM: the stop the user asked for
			}
			return err
		},
	}
}

type serveOptions struct {
	agent       string
	httpAddr    string
	metricsAddr string
	insecure    bool
	gw          gatewayOptions
}

func (e *env) serve(ctx context.Context, opts serveOptions) error {
	if err := checkAgent(opts.agent); err != nil {
		return err
	}
	cfg, err := e.load()
	if err != nil {
		return err
	}
	if opts.gw.toolNames != "" && opts.gw.toolNames != config.ToolNamesWire && opts.gw.toolNames != config.ToolNamesDotted {
		return usageError(fmt.Sprintf("--tool-names %q: use wire or dotted", opts.gw.toolNames))
	}
	if n := opts.gw.maxNameLength; n != 0 && (n < config.MinNameLength || n > config.DefaultMaxNameLength) {
		return usageError(fmt.Sprintf("--max-name-length %d: write a number from %d to %d", n, config.MinNameLength, config.DefaultMaxNameLength))
	}
	var listener, metricsListener net.Listener
	requireToken := false
	if opts.httpAddr != "" {
		if listener, requireToken, err = e.listen(cfg, "http", opts.httpAddr, opts.insecure); err != nil {
			return err
		}
	}
	if opts.metricsAddr != "" {
		if metricsListener, _, err = e.listen(cfg, "metrics", opts.metricsAddr, opts.insecure); err != nil {
			if listener != nil {
				listener.Close()
			}
			return err
		}
	}
	g, err := e.startGateway(ctx, cfg, opts.gw)
	if err != nil {
		for _, l := range []net.Listener{listener, metricsListener} {
			if l != nil {
				l.Close()
			}
		}
		return err
	}
	defer g.Close()
	defer func() {
		// The audit trail's summary: every refusal was logged as it happened.
		for agent, tools := range g.Denials().Snapshot() {
			for tool, n := range tools {
				e.log.Info("policy: refusals this session", "agent", agent, "tool", tool, "count", n)
			}
		}
	}()
	// Every goroutine serve starts is joined before the gateway closes: a reload
	// (from the watcher or SIGHUP) never runs while Close does.
	ctx, cancel := context.WithCancel(ctx)
	var workers sync.WaitGroup
	defer workers.Wait() // after cancel (defers run in reverse), before g.Close
	defer cancel()
	workers.Go(func() {
		// Once every server made its first attempt, say which policy entries name
		// nothing: serve does not wait for its servers to answer its client.
		if g.Ready(ctx) == nil {
			known := knownTools(g.Gateway)
			for _, p := range g.Policy().Check(known) {
				e.log.Warn("policy problem", "problem", p.String())
			}
			for _, p := range g.Config().PinProblems(known) {
				e.log.Warn("toolset problem", "problem", p)
			}
		}
	})
	watched := append(slices.Clone(e.layers), config.CommandTTLFile(e.home))
	if p := e.projectLayer(); p != "" {
		watched = append(watched, p)
	}
	rl := newReloader(e, g.Gateway)
	defer rl.stop()
	workers.Go(func() { config.Watch(ctx, watched, 500*time.Millisecond, rl.reload) })
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP) // SIGHUP forces a reload (the CLI sends it after an edit)
	defer signal.Stop(hup)
	reloaded, unannounce := e.announce()
	defer unannounce()
	workers.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				e.log.Info("SIGHUP: reloading the config")
				rl.reload()
				reloaded() // tells the waiting command the edit is in force
			case <-rl.recheck:
				rl.reload() // a missing config file's grace has ended
			}
		}
	})

	if metricsListener != nil {
		mux := http.NewServeMux()
		for pattern, h := range g.obs.pages(g.Gateway) {
			mux.Handle(pattern, g.Guard(h))
		}
		msrv := aggregation.NewHTTPServer(mux)
		workers.Go(func() {
			<-ctx.Done()
			shut, done := context.WithTimeout(context.Background(), 5*time.Second)
			defer done()
			_ = msrv.Shutdown(shut)
		})
		workers.Go(func() {
			if err := msrv.Serve(metricsListener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				e.log.Error("the metrics server stopped", "err", err)
			}
		})
		e.log.Info("serving metrics and the status page", "url", "http://"+metricsListener.Addr().String()+"/metrics")
		fmt.Fprintf(e.stderr, "nexus: metrics on http://%s/metrics, status page on http://%s/\n", metricsListener.Addr(), metricsListener.Addr())
	}

	if listener == nil {
		e.log.Info("serving over stdio", "servers", len(cfg.EnabledServers()), "tools", len(g.Tools()))
		if isTerminal(os.Stdin) {
			fmt.Fprintln(e.stderr, stdioWaitNotice)
		}
		return g.ServeStdio(ctx, os.Stdin, os.Stdout, opts.agent)
	}
	srv := aggregation.NewHTTPServer(g.HTTPHandler(aggregation.HTTPOptions{RequireToken: requireToken, Pages: g.obs.pages(g.Gateway)}))
	workers.Go(func() {
		<-ctx.Done()
		shut, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		_ = srv.Shutdown(shut)
	})
	e.log.Info("serving streamable HTTP", "url", "http://"+listener.Addr().String()+"/mcp", "tools", len(g.Tools()))
	fmt.Fprintf(e.stderr, "nexus: listening on http://%s/mcp\n", listener.Addr())
	if err := srv.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// listen opens the HTTP listener, refusing to expose an unauthenticated gateway
// beyond this machine unless the user said so explicitly. requireToken tells the
// handler to refuse everyone should a reload remove the last token.
func (e *env) listen(cfg *config.Config, flag, addr string, insecure bool) (l net.Listener, requireToken bool, err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, false, usageError(fmt.Sprintf("--%s %q: write HOST:PORT, e.g. 127.0.0.1:8765", flag, addr))
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
			return nil, false, usageError(fmt.Sprintf("refusing to serve %s without authentication: create an agent token with `nexus agent add NAME`, listen on 127.0.0.1, or pass --insecure-no-auth", addr))
		}
		e.log.Warn("no agent tokens configured: every HTTP client is served as the anonymous agent (nexus agent add NAME creates a token)")
	}
	l, err = net.Listen("tcp", addr)
	if err != nil {
		return nil, false, fmt.Errorf("listening on %s: %w", addr, err)
	}
	return l, !loopback && !insecure, nil
}

// reload applies an edited config to the running gateway; an invalid edit is logged
// and ignored, and the running config stays.
func (e *env) reload(g *aggregation.Gateway) {
	cfg, err := e.load()
	if err != nil {
		e.log.Error("config change ignored: the edited config is invalid", "err", err)
		return
	}
	if err := g.Reload(cfg); err != nil {
		e.log.Error("config change ignored", "err", err)
		return
	}
	e.log.Info("config reloaded: servers, policy, agent tokens and memory rules apply from the next call")
}

// knownTools maps each server to its tool names, nil for a server not connected.
func knownTools(g *aggregation.Gateway) map[string][]string {
	known := map[string][]string{}
	for _, s := range g.Servers() {
		known[s.Name] = nil
		if s.State == "ready" {
			known[s.Name] = []string{}
		}
	}
	for _, t := range g.Tools() {
		known[t.Server] = append(known[t.Server], t.Exposed()) // policy names a renamed tool by its new name
	}
	return known
}
