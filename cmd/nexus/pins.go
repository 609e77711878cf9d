package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/pins"
)

func toolsCommand() *cli.Command {
	return &cli.Command{
		Name:  "tools",
		Usage: "the approved (pinned) tool definitions of a server: diff, approve, pins",
		Description: "The first time Nexus lists a server's tools it pins each definition (name, title,\n" +
			"description, schemas, hints) in $NEXUS_HOME/pins.json. A tool that later changes, a\n" +
			"new tool and a renamed tool are held (servers.X.pin \"strict\") or listed with a\n" +
			"warning (\"warn\") until approved here.",
		Subcommands: []*cli.Command{
			{
				Name:      "diff",
				Usage:     "show each tool of SERVER (or of every server) held at its last listing as a diff of its approved definition",
				ArgsUsage: "[SERVER]",
				Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
				Action:    toolsDiffAction,
			},
			{
				Name:      "approve",
				Usage:     "approve the held tools of SERVER (all, or the TOOLs named by the server's own names); running gateways list them at once",
				ArgsUsage: "SERVER [TOOL...]",
				Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
				Action:    toolsApproveAction,
			},
			{
				Name:      "pins",
				Usage:     "print SERVER's approved hashes as a servers.SERVER.pins object, for a team config layer",
				ArgsUsage: "SERVER",
				Action:    toolsPinsAction,
			},
		},
	}
}

// pinnedServer is the one SERVER argument of a tools subcommand, checked
// against the config.
func pinnedServer(c *cli.Context, cfg *config.Config, verb string, more bool) (*config.Server, error) {
	name := c.Args().First()
	if name == "" || (!more && c.Args().Len() > 1) {
		return nil, usageError(fmt.Sprintf("tools %s takes one SERVER: nexus tools %s files", verb, verb))
	}
	s := cfg.Servers[name]
	if s == nil {
		return nil, knownServer(cfg, name+".*", "nothing")
	}
	return s, nil
}

// changeJSON is a held tool as --json prints it.
type changeJSON struct {
	Server  string          `json:"server"`
	Tool    string          `json:"tool"`
	Change  pins.Kind       `json:"change"`
	From    string          `json:"from,omitempty"`
	Shadows []string        `json:"shadows,omitempty"`
	SHA256  string          `json:"sha256"`
	Old     json.RawMessage `json:"approved,omitempty"`
	New     json.RawMessage `json:"offered"`
}

func changesJSON(cs []pins.Change) []changeJSON {
	out := []changeJSON{}
	for _, c := range cs {
		out = append(out, changeJSON{c.Server, c.Tool, c.Kind, c.From, c.Shadows, c.SHA256, c.Old, c.New})
	}
	return out
}

// toolsDiffAction is the action of `nexus tools diff`: what the gateways of
// this home held at their last listing of the server, as the pin file records
// it. It starts no server: a tool a running server added would not be in a
// fresh process's listing.
func toolsDiffAction(c *cli.Context) error {
	e, cfg, err := loadEnv(c, slog.LevelWarn)
	if err != nil {
		return err
	}
	f, err := pins.Load(pins.Path(e.home))
	if err != nil {
		return err
	}
	if c.Args().Len() == 0 {
		return diffAll(c, e, cfg, f)
	}
	s, err := pinnedServer(c, cfg, "diff", false)
	if err != nil {
		return err
	}
	changes := pins.Changes(f, s.Name)
	if c.Bool("json") {
		return printJSON(e.stdout, changesJSON(changes))
	}
	switch {
	case s.PinMode() == config.PinOff:
		fmt.Fprintf(e.stdout, "%s is not pinned (servers.%s.pin is \"off\")\n", s.Name, s.Name)
	case f.Servers[s.Name] == nil:
		fmt.Fprintf(e.stdout, "no listing of %s was pinned yet: the first gateway that lists it (nexus serve, nexus list-tools) pins its tools as they are\n", s.Name)
	case len(changes) == 0:
		fmt.Fprintf(e.stdout, "every tool %s offered at its last listing is approved\n", s.Name)
	default:
		for _, ch := range changes {
			fmt.Fprintln(e.stdout, ch.Diff())
		}
		fmt.Fprintf(e.stdout, "approve with: nexus tools approve %s (or name the tools: nexus tools approve %s %s)\n", s.Name, s.Name, changes[0].Tool)
	}
	return nil
}

// diffAll is `nexus tools diff` without a SERVER: every configured server's
// held tools.
func diffAll(c *cli.Context, e *env, cfg *config.Config, f *pins.File) error {
	var changes []pins.Change
	for _, name := range cfg.ServerNames() {
		changes = append(changes, pins.Changes(f, name)...)
	}
	if c.Bool("json") {
		return printJSON(e.stdout, changesJSON(changes))
	}
	if len(changes) == 0 {
		fmt.Fprintln(e.stdout, "no tool is held: every tool the servers offered at their last listing is approved")
		return nil
	}
	for _, ch := range changes {
		fmt.Fprintln(e.stdout, ch.Diff())
	}
	fmt.Fprintln(e.stdout, "approve with: nexus tools approve SERVER [TOOL...]")
	return nil
}

// toolsApproveAction is the action of `nexus tools approve`.
func toolsApproveAction(c *cli.Context) error {
	e, cfg, err := loadEnv(c, slog.LevelWarn)
	if err != nil {
		return err
	}
	s, err := pinnedServer(c, cfg, "approve", true)
	if err != nil {
		return err
	}
	var done []pins.Change
	_, err = pins.Update(pins.Path(e.home), func(f *pins.File) (bool, error) {
		var err error
		done, err = pins.Approve(f, s.Name, c.Args().Tail())
		return err == nil, err
	})
	if err != nil {
		return usageError(err.Error() + "; nexus tools diff " + s.Name + " lists what is held")
	}
	e.confirmRunning(c.Context)
	if c.Bool("json") {
		return printJSON(e.stdout, changesJSON(done))
	}
	for _, ch := range done {
		what := string(ch.Kind)
		if ch.Kind == pins.Renamed {
			what = "renamed from " + ch.From
		}
		fmt.Fprintf(e.stdout, "approved %s.%s (%s)\n", s.Name, ch.Tool, what)
	}
	return nil
}

// toolsPinsAction is the action of `nexus tools pins`.
func toolsPinsAction(c *cli.Context) error {
	e, cfg, err := loadEnv(c, slog.LevelWarn)
	if err != nil {
		return err
	}
	s, err := pinnedServer(c, cfg, "pins", false)
	if err != nil {
		return err
	}
	f, err := pins.Load(pins.Path(e.home))
	if err != nil {
		return err
	}
	out := map[string]string{}
	if sp := f.Servers[s.Name]; sp != nil {
		for _, t := range slices.Sorted(maps.Keys(sp.Tools)) {
			out[t] = sp.Tools[t].SHA256
		}
	}
	if len(out) == 0 {
		return fmt.Errorf("no tool of %s is pinned yet: nexus list-tools lists it (and pins its tools)", s.Name)
	}
	fmt.Fprintf(e.stderr, "paste under servers.%s.pins in the team's config layer:\n", s.Name)
	return printJSON(e.stdout, out)
}

// forgetPins drops the approved definitions of a server that is gone: a server
// added later under its name is another program, pinned afresh from its first
// listing, after nexus add has shown what it runs.
func (e *env) forgetPins(server string) {
	_, err := pins.Update(pins.Path(e.home), func(f *pins.File) (bool, error) {
		_, known := f.Servers[server]
		delete(f.Servers, server)
		return known, nil
	})
	if err != nil {
		e.log.Warn("the approved tool definitions of the removed server stay in the pin file", "server", server, "err", err)
	}
}

// checkPins is doctor's look at the pin file: one that cannot be trusted keeps
// every gateway from starting; held tools wait for someone to look at them.
func (e *env) checkPins(cfg *config.Config) check {
	path := pins.Path(e.home)
	ch := check{Area: "pins", Name: path, Status: checkOK}
	f, err := pins.Load(path)
	if err != nil {
		ch.Status, ch.Detail = checkFail, err.Error()
		ch.Fix = "nexus serve refuses to start until it is fixed; restore it from a backup, or remove it to pin every server afresh from its next listing"
		return ch
	}
	var held []string
	for _, name := range cfg.ServerNames() {
		for _, c := range pins.Changes(f, name) {
			held = append(held, name+"."+c.Tool)
		}
	}
	switch {
	case len(held) > 0:
		ch.Status, ch.Detail = checkWarn, fmt.Sprintf("%d tool(s) changed, new or renamed since approved: %s", len(held), strings.Join(held, ", "))
		ch.Fix = "nexus tools diff SERVER shows each change; nexus tools approve SERVER accepts it"
	case len(f.Servers) == 0:
		ch.Detail = "nothing pinned yet: the first listing of each server pins its tools"
	default:
		ch.Detail = fmt.Sprintf("the tools of %d server(s) pinned; nothing held", len(f.Servers))
	}
	return ch
}
