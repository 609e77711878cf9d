package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/nexus-mcp/nexus/aggregation"
	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/policy"
)

func agentCommand() *cli.Command {
	return &cli.Command{
		Name:  "agent",
		Usage: "manage agents (identities of HTTP clients): add, list, rotate, remove",
		Subcommands: []*cli.Command{
			{
				Name:      "add",
				Usage:     "create an agent and print its bearer token once; only its hash is stored",
				ArgsUsage: "NAME",
				Flags:     []cli.Flag{&cli.BoolFlag{Name: "force", Usage: "replace the token of an existing agent"}},
				Action:    agentAddAction,
			},
			{
				Name:      "rotate",
				Usage:     "give an agent a new token, printed once; the old one stops working at once",
				ArgsUsage: "NAME",
				Action:    agentRotateAction,
			},
			{
				Name:      "remove",
				Usage:     "delete an agent's token: HTTP clients using it are refused (its policy stays until you revoke it)",
				ArgsUsage: "NAME",
				Action:    removeAgent,
			},
			{
				Name:   "list",
				Usage:  "list the agents: whether each has a token, its policy and where it is defined (never the token)",
				Flags:  []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
				Action: listAgents,
			},
		},
	}
}

// agentRotateAction is the action of `nexus agent rotate`.
func agentRotateAction(c *cli.Context) error {
	return issueToken(c, "rotate", false)
}

// agentAddAction is the action of `nexus agent add`.
func agentAddAction(c *cli.Context) error {
	return issueToken(c, "add", c.Bool("force"))
}

// agentArg is the one NAME an agent subcommand takes.
func agentArg(c *cli.Context, verb string) (string, error) {
	name := c.Args().First()
	if !policy.ValidAgentName(name) {
		return "", usageError(fmt.Sprintf("agent %s takes one NAME of 1-32 lower-case letters, digits or '-': nexus agent %s coder", verb, verb))
	}
	return name, nil
}

// issueToken makes a new token for an agent and stores its hash: a new agent
// ("add", or "add --force" to replace), or a new token for one that exists
// ("rotate"), which revokes the old one since only one hash is kept.
func issueToken(c *cli.Context, verb string, force bool) error {
	name, err := agentArg(c, verb)
	if err != nil {
		return err
	}
	e, err := newEnv(c, slog.LevelWarn)
	if err != nil {
		return err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return fmt.Errorf("generating a token: %w", err)
	}
	token := "nxs_" + base64.RawURLEncoding.EncodeToString(secret)
	firstToken := !anyAgentToken(e)
	err = config.Edit(e.personal, func(d config.Document) error {
		_, exists := d.Get("agents", name)
		switch {
		case verb == "add" && exists && !force:
			return usageError(fmt.Sprintf("agent %q already exists; `nexus agent rotate %s` gives it a new token", name, name))
		case verb == "rotate" && !exists:
			return usageError(fmt.Sprintf("no agent %q in %s to rotate; nexus agent add %s creates it (nexus agent list shows the agents)", name, e.personal, name))
		}
		return d.Set(config.Agent{TokenSHA256: aggregation.TokenHash(token)}, "agents", name)
	})
	if err != nil {
		return err
	}
	if verb == "rotate" {
		fmt.Fprintf(e.stderr, "agent %s has a new token, printed once below; the old one no longer works. Nexus keeps only its SHA-256.\n", name)
	} else {
		fmt.Fprintf(e.stderr, "agent %s created; its token is printed once, below. Nexus keeps only its SHA-256.\n", name)
	}
	if firstToken {
		fmt.Fprintln(e.stderr, anonymousEndsNotice)
	}
	fmt.Fprintln(e.stdout, token)
	e.confirmRunning(c.Context)
	return nil
}

func removeAgent(c *cli.Context) error {
	name, err := agentArg(c, "remove")
	if err != nil {
		return err
	}
	e, err := newEnv(c, slog.LevelWarn)
	if err != nil {
		return err
	}
	found := false
	if err := config.Edit(e.personal, func(d config.Document) error {
		found = d.Delete("agents", name)
		return nil
	}); err != nil {
		return err
	}
	if !found {
		return cli.Exit(fmt.Sprintf("no agent %q in %s (nexus agent list shows the agents)", name, e.personal), 1)
	}
	fmt.Fprintf(e.stdout, "removed agent %s from %s: its token no longer works\n", name, e.personal)
	if cfg, err := e.load(); err == nil {
		if _, ok := cfg.Policy.Agents[name]; ok {
			fmt.Fprintf(e.stdout, "its policy policy.agents.%s stays (a client with --agent %s still gets it over stdio); delete it from the config to drop it\n", name, name)
		}
	}
	e.confirmRunning(c.Context)
	return nil
}

// agentRow is one agent as `agent list` shows it: never its token or its hash.
type agentRow struct {
	Name   string `json:"name"`
	Token  bool   `json:"token"`            // an HTTP bearer token is set
	Policy string `json:"policy"`           // "own" or "default"
	Source string `json:"source,omitempty"` // the file that defines it
}

func listAgents(c *cli.Context) error {
	e, cfg, err := loadEnv(c, slog.LevelWarn)
	if err != nil {
		return err
	}
	names := map[string]string{}
	for n := range cfg.Agents {
		names[n] = ""
	}
	for n := range cfg.Policy.Agents {
		names[n] = cfg.Policy.Sources["policy.agents."+n]
	}
	rows := []agentRow{}
	for _, n := range slices.Sorted(maps.Keys(names)) {
		r := agentRow{Name: n, Token: cfg.Agents[n].TokenSHA256 != "", Policy: "default", Source: names[n]}
		if _, ok := cfg.Policy.Agents[n]; ok {
			r.Policy = "own"
		}
		if r.Source == "" && r.Token {
			r.Source = e.personal
		}
		rows = append(rows, r)
	}
	if c.Bool("json") {
		return printJSON(e.stdout, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(e.stdout, "no agents yet (nexus agent add NAME creates one with an HTTP token)")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tTOKEN\tPOLICY\tSOURCE")
	for _, r := range rows {
		token := "no"
		if r.Token {
			token = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, token, r.Policy, r.Source)
	}
	return tw.Flush()
}

// anonymousEndsNotice is said when the first agent token appears: from then on
// `serve --http` serves only clients with a valid token, and a client that used to
// connect without one is refused with 401.
const anonymousEndsNotice = "nexus: this is the first agent token: `nexus serve --http` now refuses clients without a valid token (401), " +
	"so HTTP clients that connected anonymously need a token of their own (nexus agent add NAME)"

// anyAgentToken reports whether the config already holds an agent token. A config
// that does not load counts as none: the edit that follows reports the mistake.
func anyAgentToken(e *env) bool {
	cfg, err := e.load()
	if err != nil {
		return false
	}
	for _, a := range cfg.Agents {
		if a.TokenSHA256 != "" {
			return true
		}
	}
	return false
}
