package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/nexus-mcp/nexus/aggregation"
	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/policy"
	"github.com/nexus-mcp/nexus/run"
)

func policyCommand() *cli.Command {
	// Like call: no agent named is the anonymous one. The edits name theirs (or
	// --default) explicitly, without NEXUS_AGENT: a variable should not decide
	// whose policy a command rewrites.
	agentFlag := func() cli.Flag {
		return &cli.StringFlag{Name: "agent", Usage: "the agent `NAME` (default: " + policy.Anonymous + ")", EnvVars: []string{"NEXUS_AGENT"}}
	}
	edit := func(verb string, apply func(policy.Config, string, string) (policy.Config, error), applyDefault func(policy.Config, string) (policy.Config, error)) *cli.Command {
		return &cli.Command{
			Name:      verb,
			Usage:     verb + " ENTRY... for an agent, or for the default (ENTRY: server.tool, server.*, * or @readonly)",
			ArgsUsage: "ENTRY...",
			Flags: []cli.Flag{&cli.StringFlag{Name: "agent", Usage: "the agent `NAME`"},
				&cli.BoolFlag{Name: "default", Usage: "edit policy.default, the rules of every agent without a policy of its own"},
				&cli.BoolFlag{Name: "later", Usage: "write entries that name a server no config layer has yet (one you add later); without it such an entry is refused as a likely misspelling"}},
			Action: policyEditAction(verb, apply, applyDefault),
		}
	}
	return &cli.Command{
		Name:  "policy",
		Usage: "show, explain, check and edit which agent may call which tool",
		Description: "With no policy an agent may call read-only tools only. policy.default and\n" +
			"policy.agents.NAME in the config each hold {\"allow\": [...], \"deny\": [...]};\n" +
			"an agent's entry replaces the default, and deny beats allow.",
		Subcommands: []*cli.Command{
			{
				Name:   "show",
				Usage:  "connect to the servers and show, per tool, whether the agent may call it and why",
				Flags:  []cli.Flag{agentFlag(), &cli.BoolFlag{Name: "json", Usage: "print JSON"}},
				Action: policyShowAction,
			},
			{
				Name:      "explain",
				Usage:     "tell whether an agent may call TOOL, and the rule that decided",
				ArgsUsage: "TOOL",
				Flags:     []cli.Flag{agentFlag(), &cli.BoolFlag{Name: "json", Usage: "print JSON"}},
				Action:    policyExplainAction,
			},
			{
				Name:   "check",
				Usage:  "report policy entries (and toolset pins) that name unknown servers or tools (latent permissions)",
				Action: policyCheckAction,
			},
			edit("allow", policy.Allow, policy.AllowDefault),
			edit("deny", policy.Deny, policy.DenyDefault),
			edit("revoke", policy.Revoke, policy.RevokeDefault),
		},
	}
}

// policyCheckAction is the action of `nexus policy check`.
func policyCheckAction(c *cli.Context) error {
	e, cfg, err := loadEnv(c, slog.LevelError)
	if err != nil {
		return err
	}
	g, err := e.startGateway(c.Context, cfg, run.Options{NoMemory: true})
	if err != nil {
		return err
	}
	defer g.Close()
	known := run.KnownTools(g.Gateway)
	probs := g.Policy().Check(known)
	for _, p := range probs {
		fmt.Fprintln(e.stdout, p.String())
	}
	// Pins name tools like policy entries do, and go stale the same way.
	pins := cfg.PinProblems(known)
	for _, p := range pins {
		fmt.Fprintln(e.stdout, p)
	}
	if n := len(probs) + len(pins); n > 0 {
		return cli.Exit(fmt.Sprintf("%d policy problem(s)", n), 1)
	}
	fmt.Fprintln(e.stdout, "policy ok")
	return nil
}

// policyExplainAction is the action of `nexus policy explain`.
func policyExplainAction(c *cli.Context) error {
	e, err := newEnv(c, slog.LevelWarn)
	if err != nil {
		return err
	}
	return e.showPolicy(c, c.String("agent"), c.Args().First())
}

// policyShowAction is the action of `nexus policy show`.
func policyShowAction(c *cli.Context) error {
	e, err := newEnv(c, slog.LevelWarn)
	if err != nil {
		return err
	}
	return e.showPolicy(c, c.String("agent"), "")
}

// policyEditAction is the action of `nexus policy allow` and `nexus policy
// deny`: verb names which, apply edits an agent's rules and applyDefault the
// default's.
func policyEditAction(verb string, apply func(policy.Config, string, string) (policy.Config, error), applyDefault func(policy.Config, string) (policy.Config, error)) cli.ActionFunc {
	return func(c *cli.Context) error {
		if c.IsSet("agent") == c.Bool("default") {
			return usageHint(fmt.Sprintf("nexus policy %s needs --agent NAME or --default", verb),
				fmt.Sprintf("write `nexus policy %s --agent NAME ENTRY...`", verb))
		}
		e, err := newEnv(c, slog.LevelWarn)
		if err != nil {
			return err
		}
		// Revoking an entry of a server that is gone is how it is cleaned up.
		anyServer := verb == "revoke" || c.Bool("later")
		if c.Bool("default") {
			return e.editPolicy("", c.Args().Slice(), anyServer, func(cfg policy.Config, _, entry string) (policy.Config, error) {
				return applyDefault(cfg, entry)
			})
		}
		return e.editPolicy(c.String("agent"), c.Args().Slice(), anyServer, apply)
	}
}

// showPolicy prints the effective decision for every tool (or one tool).
func (e *env) showPolicy(c *cli.Context, agent, tool string) error {
	if agent == "" {
		agent = policy.Anonymous
	}
	if err := checkAgent(agent); err != nil {
		return err
	}
	cfg, err := e.load()
	if err != nil {
		return err
	}
	g, err := e.startGateway(c.Context, cfg, run.Options{NoMemory: true})
	if err != nil {
		return err
	}
	defer g.Close()
	var items []aggregation.Explained
	if tool != "" {
		it, err := g.ExplainName(c.Context, agent, tool)
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		items = append(items, it)
	} else {
		items = g.Explain(agent)
	}
	if c.Bool("json") {
		type row struct {
			Agent   string `json:"agent"`
			Kind    string `json:"kind"`
			Tool    string `json:"tool"`
			Allowed bool   `json:"allowed"`
			Rule    string `json:"rule"`
			Origin  string `json:"origin"`
			Source  string `json:"source,omitempty"`
			Hint    string `json:"hint,omitempty"`
		}
		rows := []row{}
		for _, it := range items {
			d := it.Decision
			rows = append(rows, row{d.Agent, it.Kind, it.Name, d.Allowed, d.Rule, d.Origin, d.Source, d.Hint()})
		}
		return printJSON(e.stdout, rows)
	}
	if tool != "" {
		it := items[0]
		d := it.Decision
		if it.Kind != "tool" {
			what := map[string]string{"prompt": "prompt " + it.Name, "resources": "the resources of server " + it.Name}[it.Kind]
			if d.Allowed {
				fmt.Fprintf(e.stdout, "allowed: agent %q may use %s (%s, from %s)\n", d.Agent, what, d.Rule, origin(d))
				return nil
			}
			msg := fmt.Sprintf("denied: agent %q may not use %s (%s, from %s)", d.Agent, what, d.Rule, origin(d))
			if h := d.Hint(); h != "" {
				msg += ". To grant it: " + h
			}
			fmt.Fprintln(e.stdout, msg)
			return cli.Exit("", 1)
		}
		if d.Allowed {
			fmt.Fprintf(e.stdout, "allowed: agent %q may call %q (%s, from %s)\n", d.Agent, d.Tool, d.Rule, origin(d))
			return nil
		}
		fmt.Fprintln(e.stdout, "denied: "+d.Message())
		return cli.Exit("", 1)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "TOOL\tAGENT %s\tRULE\tFROM\n", agent)
	for _, it := range items {
		d := it.Decision
		verdict := "denied"
		if d.Allowed {
			verdict = "allowed"
		}
		name := it.Name
		switch it.Kind {
		case "prompt":
			name = "prompt " + it.Name
		case "resources":
			name = "resources of " + it.Name
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, verdict, d.Rule, origin(d))
	}
	return tw.Flush()
}

func origin(d policy.Decision) string {
	if d.Source != "" {
		return d.Origin + " (" + d.Source + ")"
	}
	return d.Origin
}

// editPolicy applies allow/deny/revoke of each entry to the agent's rules (agent
// "": policy.default) and writes them to the personal config file. Every entry is
// checked before anything is written. An entry that names a server no config
// layer has is refused, unless anyServer (--later, or revoke): a misspelt server
// would otherwise be saved and allow or deny nothing. An entry that names a tool
// the config and catalog do not know of is written with a warning, since the
// server's tools are known only once it runs.
func (e *env) editPolicy(agent string, entries []string, anyServer bool, apply func(policy.Config, string, string) (policy.Config, error)) error {
	if err := checkAgent(agent); err != nil {
		return err
	}
	cfg, err := e.load()
	if err != nil {
		return err
	}
	if !anyServer {
		for _, entry := range entries {
			if err := knownServer(cfg, entry, "--later"); err != nil {
				return err
			}
		}
	}
	next := cfg.Policy
	for _, entry := range entries {
		if next, err = apply(next, agent, entry); err != nil {
			return err
		}
	}
	path, where := []string{"policy", "agents", agent}, "policy.agents."+agent
	rules := next.Agents[agent]
	if agent == "" {
		path, where, rules = []string{"policy", "default"}, policy.DefaultOrigin, *next.Default
	}
	err = config.Edit(e.personal, func(d config.Document) error {
		return d.Set(rules, path...)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s in %s: allow %v, deny %v\n", where, e.personal, rules.Allow, rules.Deny)
	known := e.configuredTools(cfg)
	for _, entry := range entries {
		if msg := policy.CheckEntry(entry, known); msg != "" {
			fmt.Fprintf(e.stderr, "warning: %s: %q matches no tool Nexus knows of: %s (nexus policy check asks the running servers)\n", where, entry, msg)
		}
	}
	e.confirmRunning(context.Background())
	return nil
}

// configuredTools is what the config and the catalog know of the servers' tools
// without starting them: each configured server, with the tools its catalog entry
// or its annotations name (nil when none is named: only the server is checked).
func (e *env) configuredTools(cfg *config.Config) map[string][]string {
	known := map[string][]string{}
	cat, _ := e.loadCatalog()
	for _, name := range cfg.ServerNames() {
		s := cfg.Servers[name]
		var tools []string
		for t := range s.Annotations {
			tools = append(tools, t)
		}
		if cat != nil && s.Catalog != "" {
			if en, ok := cat.Get(s.Catalog); ok {
				p := en.Policy
				for _, full := range slices.Concat(p.ReadOnly, p.Mutating, p.Allow) {
					if _, t, ok := strings.Cut(full, "."); ok && !strings.ContainsAny(t, "*?") {
						tools = append(tools, t)
					}
				}
			}
		}
		known[name] = tools
	}
	return known
}
