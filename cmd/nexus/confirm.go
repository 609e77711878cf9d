package main

import (
	"bufio"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/nexus-mcp/nexus/config"
)

// yesFlag lets a script install what it has checked without being asked. It has
// no -y alias: -y is what npx takes, and a child's -y without -- must stay an error.
var yesFlag = &cli.BoolFlag{Name: "yes", Usage: "install without asking (what it runs is printed all the same); needed when stdin is not a terminal"}

// confirmInstall shows what the servers about to be written run, the exact
// command line (or URL) and the names of their environment variables and
// headers, then asks on a terminal. Without one it needs --yes: a server
// someone else wrote must not start on this machine unseen. Nothing is written
// unless it returns nil.
func (e *env) confirmInstall(c *cli.Context, servers map[string]*config.Server, order []string) error {
	fmt.Fprintln(e.stderr, "about to install:")
	for _, name := range order {
		fmt.Fprintf(e.stderr, "  %s: %s\n", name, servers[name].Launch())
	}
	if c.Bool("yes") {
		return nil
	}
	tty, ok := stdinTerminal(c.App.Reader)
	if !ok {
		return usageError("nothing was written: stdin is not a terminal, so nexus cannot ask; check what it runs (above), then run the command again with --yes")
	}
	what := strings.Join(order, ", ")
	fmt.Fprintf(e.stderr, "install %s? [y/N] ", what)
	answer, _ := bufio.NewReader(tty).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return cli.Exit("nothing was written", 1)
}
