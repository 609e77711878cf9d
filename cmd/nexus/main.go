// Command nexus is an MCP gateway: many MCP servers behind one.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/nexus-mcp/nexus/secrets"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stopProfile := startProfile(os.Getenv("NEXUS_CPUPROFILE"))
	err := runCLI(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr)
	stopProfile()
	stop()
	if err != nil {
		// runCLI's error is already redacted: print its text, exit with its code.
		code := 1
		var exit cli.ExitCoder
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		}
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(os.Stderr, "nexus:", msg)
		}
		os.Exit(code)
	}
}

// startProfile writes a CPU profile to path until the returned func is called: for
// measuring the gateway under a real client (NEXUS_CPUPROFILE=/tmp/cpu.out).
func startProfile(path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nexus: NEXUS_CPUPROFILE:", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "nexus: NEXUS_CPUPROFILE:", err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// runCLI is the whole program; main only picks the exit code. Everything the commands
// print to stdout and stderr (logs, child stderr) passes the redactor, which knows
// every secret value the process has read or stored.
func runCLI(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	redactor := secrets.NewRedactor()
	out, errw := redactor.Writer(stdout), redactor.Writer(stderr)
	defer errw.Close()
	defer out.Close()
	app := newApp(stdin, out, errw)
	app.Metadata = map[string]any{redactorKey: redactor, argsKey: args, stdioKey: stdio{in: stdin, out: stdout}}
	if err := app.RunContext(ctx, interspersed(app, args)); err != nil {
		// main prints the error to stderr itself, past the redacting writer: its
		// text passes the redactor here (a child's error may quote its key).
		msg := err.Error()
		var exit cli.ExitCoder
		if errors.As(err, &exit) {
			msg = exit.Error()
		}
		return &redactedError{err: err, msg: redactor.String(msg)}
	}
	return nil
}

// redactedError is an error whose text passed the redactor; errors.As still finds
// what it wraps (the exit code of a cli.ExitCoder).
type redactedError struct {
	err error
	msg string
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redactorKey finds the process's redactor in the app's metadata.
const redactorKey = "redactor"

// stdioKey finds runCLI's own stdin and stdout (not the redacting writer) in the
// app's metadata: serve speaks MCP over them (os.Stdin and os.Stdout from main).
const stdioKey = "stdio"

type stdio struct {
	in  io.Reader
	out io.Writer
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:  "nexus",
		Usage: "many MCP servers behind one",
		Description: "Nexus is an MCP gateway. Point Claude Desktop, Cursor or any MCP client at\n" +
			"`nexus serve`; Nexus connects to the servers in your config, merges their tools\n" +
			"as <server>.<tool>, enforces each agent's policy and remembers read-only results.\n\n" +
			"Try `nexus demo` first.",
		Reader:          stdin,
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "config", Usage: "add a config `FILE` layer (repeatable; read before $NEXUS_HOME/config.json, which wins; without it, $NEXUS_CONFIG lists layers separated by " + listSeparatorName + ")"},
			&cli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error (logs go to stderr)", Value: ""},
			&cli.BoolFlag{Name: "project", Usage: "also read .nexus/config.json from the working directory upward (a shared project layer)"},
			&cli.BoolFlag{Name: "insecure-file-store", Usage: "when no OS keychain is usable, keep secrets in a file readable only by you under NEXUS_HOME"},
		},
		Commands: []*cli.Command{
			serveCommand(),
			consoleCommand(),
			addCommand(),
			removeCommand(),
			listServersCommand(),
			listToolsCommand(),
			toolsCommand(),
			callCommand(),
			policyCommand(),
			agentCommand(),
			secretsCommand(),
			authCommand(),
			configCommand(),
			cacheCommand(),
			auditCommand(),
			catalogCommand(),
			setupClientCommand(),
			importCommand(),
			doctorCommand(),
			demoCommand(),
			sampleServerCommand(),
			versionCommand(),
		},
		ExitErrHandler: func(*cli.Context, error) {}, // main prints errors and picks exit codes
	}
	guardUsage(app)
	return app
}
