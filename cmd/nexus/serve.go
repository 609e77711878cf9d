package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/run"
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
			"--metrics ADDR. In a browser, log in at /login there with an agent's token: it\n" +
			"sets a session cookie (12 hours, the pages only, never /mcp).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "agent", Usage: "the agent `NAME` this stdio client is (default: the client's own name, else anonymous)", EnvVars: []string{"NEXUS_AGENT"}},
			&cli.StringFlag{Name: "http", Usage: "listen for streamable HTTP on `ADDR` (e.g. 127.0.0.1:8765) instead of stdio; /metrics and the status page / are served there too"},
			&cli.StringFlag{Name: "metrics", Usage: "serve Prometheus metrics (/metrics) and the status page (/) on `ADDR` (e.g. 127.0.0.1:9464)"},
			&cli.BoolFlag{Name: "insecure-no-auth", Usage: "allow --http on a non-loopback address with no agent tokens configured"},
			&cli.StringFlag{Name: "tool-names", Usage: "wire names: `STYLE` wire (<server>__<tool>) or dotted (<server>.<tool>)"},
			&cli.IntFlag{Name: "max-name-length", Usage: "the longest wire tool name, `N` from 20 to 64 (default names.maxLength, else 64); nexus setup sets it for clients that prefix names", EnvVars: []string{"NEXUS_MAX_NAME_LENGTH"}},
			&cli.BoolFlag{Name: "no-memory", Usage: "do not answer from or write to memory"},
		},
		Action: serveAction,
	}
}

// serveAction is the action of `nexus serve`.
func serveAction(c *cli.Context) error {
	e, err := newEnv(c, slog.LevelInfo)
	if err != nil {
		return err
	}
	e.serving = true
	// MCP over runCLI's own stdin and stdout (main's are os.Stdin and os.Stdout),
	// past the redacting writer as before.
	std, _ := c.App.Metadata[stdioKey].(stdio)
	err = e.serve(c.Context, run.ServeOptions{Stdin: std.in, Stdout: std.out,
		Agent: c.String("agent"), HTTPAddr: c.String("http"), MetricsAddr: c.String("metrics"), Insecure: c.Bool("insecure-no-auth"),
		Gateway: run.Options{NoMemory: c.Bool("no-memory"), ToolNames: c.String("tool-names"), MaxNameLength: c.Int("max-name-length"), NoWait: true, KeepLists: true,
			Observe: true, Metrics: c.String("http") != "" || c.String("metrics") != ""},
	})
	if c.Context.Err() != nil && errors.Is(err, context.Canceled) {
		return nil // SIGINT or SIGTERM: the stop the user asked for
	}
	return err
}

// serve loads the config and runs the gateway (run.Serve) with this command's
// environment; run's usage errors are this command's.
func (e *env) serve(ctx context.Context, opts run.ServeOptions) error {
	if err := checkAgent(opts.Agent); err != nil {
		return err
	}
	cfg, err := e.load()
	if err != nil {
		return err
	}
	opts.Env, opts.Config = e.runEnv(ctx, cfg), cfg
	opts.Env.Load = e.load
	opts.Env.Watched = append(slices.Clone(e.layers), config.CommandTTLFile(e.home))
	if p := e.projectLayer(); p != "" {
		opts.Env.Watched = append(opts.Env.Watched, p)
	}
	if opts.HTTPAddr == "" && isTerminal(os.Stdin) {
		opts.StdioNotice = stdioWaitNotice
	}
	// The process serving its own stdio serves one client, on one P unless
	// GOMAXPROCS says otherwise; serveStdio takes it only over pipes it reads
	// raw, which is Linux's (docs/decisions.md says why). In-process callers
	// (tests) leave the runtime as it is: the setting is the process's.
	ownStdio := (opts.Stdin == nil || opts.Stdin == io.Reader(os.Stdin)) &&
		(opts.Stdout == nil || opts.Stdout == io.Writer(os.Stdout))
	if _, set := os.LookupEnv("GOMAXPROCS"); opts.HTTPAddr == "" && ownStdio && !set {
		opts.Processors = 1
	}
	err = run.Serve(ctx, opts)
	var ue run.UsageError
	if errors.As(err, &ue) {
		return usageError(string(ue))
	}
	return err
}
