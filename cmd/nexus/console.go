package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nexus-mcp/nexus/aggregation"
	"github.com/nexus-mcp/nexus/run"
)

func consoleCommand() *cli.Command {
	return &cli.Command{
		Name:  "console",
		Usage: "show the console of a running gateway (one a desktop client started over stdio too) in a browser",
		Description: "Every `nexus serve` publishes its console on a socket only you can reach, in\n" +
			"$NEXUS_HOME/run. nexus console finds the running gateway, listens on loopback\n" +
			"(--addr) and passes the browser's requests to it until Ctrl-C or the gateway\n" +
			"stops. The console's rules are the gateway's own: log in at /login with an\n" +
			"agent's token (nexus agent add NAME prints one; status.public lets anyone\n" +
			"look), and an action (clear memory, approve held tools) needs the token, the\n" +
			"console's own page and its CSRF token. With several gateways running, name one\n" +
			"with --pid; --list lists them.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:0", Usage: "listen on `ADDR`, a loopback address (port 0: any free port)"},
			&cli.IntFlag{Name: "pid", Usage: "show the gateway with process id `N` (nexus console --list names them)"},
			&cli.BoolFlag{Name: "list", Usage: "list the running gateways and exit"},
			&cli.BoolFlag{Name: "open", Usage: "open the console in the default browser"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON: the list of gateways, or the console's URL and gateway on one line once it listens"},
		},
		Action: consoleAction,
	}
}

// consoleAction is the action of `nexus console`.
func consoleAction(c *cli.Context) error {
	e, err := newEnv(c, slog.LevelWarn)
	if err != nil {
		return err
	}
	addr := c.String("addr")
	if host, _, err := net.SplitHostPort(addr); err != nil || !loopback(host) {
		return usageError(fmt.Sprintf("--addr %q: the console listens on loopback only; write 127.0.0.1:PORT (0: any free port)", addr))
	}
	ctx := c.Context
	gateways, err := run.Running(ctx, e.home)
	if err != nil {
		return err
	}
	if c.Bool("list") {
		return e.printGateways(gateways, c.Bool("json"))
	}
	gw, err := e.pickGateway(gateways, c.Int("pid"), c.Bool("json"))
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	url := "http://" + l.Addr().String() + "/"
	if c.Bool("json") {
		// One line, so that a script reads it while the console runs.
		if err := json.NewEncoder(e.stdout).Encode(consoleListening{URL: url, Gateway: gw}); err != nil {
			l.Close()
			return fmt.Errorf("printing the console's URL: %w", err)
		}
	} else {
		fmt.Fprintln(e.stdout, url)
	}
	fmt.Fprintf(e.stderr, "nexus: the console of the gateway with pid %d (%s, started %s) is at %s\n", gw.PID, describeFront(gw),
		gw.Started.Local().Format(time.DateTime), url)
	fmt.Fprintf(e.stderr, "nexus: log in at %slogin with an agent's token; Ctrl-C stops\n", url)
	if !anyAgentToken(e) {
		fmt.Fprintln(e.stderr, "nexus: no agent has a token yet: `nexus agent add NAME` prints one (the gateway takes it at once)")
	}
	if c.Bool("open") {
		if err := openBrowser(ctx, url); err != nil {
			fmt.Fprintf(e.stderr, "nexus: cannot open a browser (%v): open %s yourself\n", err, url)
		}
	}
	return serveConsole(ctx, l, gw)
}

// consoleListening is what --json prints once the console listens.
type consoleListening struct {
	URL     string        `json:"url"`
	Gateway run.Published `json:"gateway"`
}

// gatewayStopCheck is how often nexus console checks that its gateway still
// answers.
const gatewayStopCheck = time.Second

// serveConsole passes the requests l accepts to gw's console until ctx ends
// (nil: the user stopped it) or gw stops answering (an error that says so).
func serveConsole(ctx context.Context, l net.Listener, gw run.Published) error {
	srv := aggregation.NewHTTPServer(run.ConsoleProxy(gw.Socket))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	var stopped error
	tick := time.NewTicker(gatewayStopCheck)
	defer tick.Stop()
wait:
	for {
		select {
		case <-ctx.Done():
			break wait
		case err := <-served:
			return fmt.Errorf("serving the console: %w", err)
		case <-tick.C:
			if !gw.Answers(ctx) && ctx.Err() == nil {
				stopped = fmt.Errorf("the gateway with pid %d has stopped; run nexus console again once a gateway runs", gw.PID)
				break wait
			}
		}
	}
	shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return errors.Join(stopped, fmt.Errorf("stopping the console: %w", err))
	}
	<-served
	return stopped
}

// pickGateway is the gateway with pid, else the one running; several without
// --pid are listed (on stdout with --json) and refused.
func (e *env) pickGateway(gateways []run.Published, pid int, asJSON bool) (run.Published, error) {
	if len(gateways) == 0 {
		return run.Published{}, fmt.Errorf("no gateway is running for NEXUS_HOME %s: start one with `nexus serve` "+
			"(a desktop client such as Claude Desktop starts it when it opens)", e.home)
	}
	if pid != 0 {
		pids := make([]string, len(gateways))
		for i, g := range gateways {
			if g.PID == pid {
				return g, nil
			}
			pids[i] = strconv.Itoa(g.PID)
		}
		return run.Published{}, fmt.Errorf("no gateway with pid %d is running; the running ones have pid %s", pid, strings.Join(pids, ", "))
	}
	if len(gateways) == 1 {
		return gateways[0], nil
	}
	if asJSON {
		if err := printJSON(e.stdout, gateways); err != nil {
			return run.Published{}, err
		}
	} else if err := e.writeGateways(e.stderr, gateways); err != nil {
		return run.Published{}, err
	}
	return run.Published{}, usageError(fmt.Sprintf("%d gateways are running: name one with --pid N", len(gateways)))
}

// printGateways is --list.
func (e *env) printGateways(gateways []run.Published, asJSON bool) error {
	if asJSON {
		if gateways == nil {
			gateways = []run.Published{}
		}
		return printJSON(e.stdout, gateways)
	}
	if len(gateways) == 0 {
		fmt.Fprintln(e.stdout, "no gateway is running (nexus serve starts one)")
		return nil
	}
	return e.writeGateways(e.stdout, gateways)
}

func (e *env) writeGateways(w io.Writer, gateways []run.Published) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PID\tFRONT\tSTARTED\tCONFIG")
	for _, g := range gateways {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", g.PID, describeFront(g), g.Started.Local().Format(time.DateTime), strings.Join(g.Config, ", "))
	}
	return tw.Flush()
}

// describeFront says how a gateway serves its clients.
func describeFront(g run.Published) string {
	switch {
	case g.URL != "":
		return g.URL
	case g.Agent != "":
		return "stdio, agent " + g.Agent
	}
	return g.Front
}

// loopback reports whether host names this machine's loopback interface.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
