package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nexus-mcp/nexus/aggregation"
	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/internal/suggest"
	"github.com/nexus-mcp/nexus/run"
)

func addCommand() *cli.Command {
	return &cli.Command{
		Name:      "add",
		Usage:     "add a child MCP server to the config",
		ArgsUsage: "NAME [-- ARGS...]",
		Description: "Examples:\n" +
			"  nexus add files --transport stdio --command npx -- -y @modelcontextprotocol/server-filesystem /tmp\n" +
			"  nexus add docs --transport streamable-http --url https://docs.example/mcp --header Authorization=\"Bearer ...\"\n" +
			"  nexus add code-kg-sample                         (from the catalog: nexus catalog list)\n" +
			"  nexus add doc-kg --value url=https://kg.example/mcp   (asks for the token on a terminal)\n" +
			"The name becomes the first half of every tool name: <name>.<tool>.\n" +
			"A catalog install prints the command line (or URL) and the names of the env vars\n" +
			"and headers it writes, then asks; without a terminal it needs --yes. Every server\n" +
			"added is pinned strict: a tool that changes later is held until nexus tools approve.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "transport", Usage: "`T`: stdio, sse or streamable-http (default: stdio with --command, streamable-http with --url)"},
			&cli.StringFlag{Name: "command", Usage: "the `PROGRAM` to run for a stdio server"},
			&cli.StringFlag{Name: "url", Usage: "the `URL` of a remote server"},
			&cli.StringSliceFlag{Name: "env", Usage: "set secret `K=V` in the child's environment: V goes to the secret store (the OS keychain, or the file store), the config holds a reference (repeatable)"},
			&cli.StringSliceFlag{Name: "plain-env", Usage: "set non-secret `K=V` in the child's environment, written to the config as is (repeatable)"},
			&cli.StringSliceFlag{Name: "header", Usage: "send secret header `K=V` to a remote server: V goes to the secret store (repeatable)"},
			&cli.StringSliceFlag{Name: "plain-header", Usage: "send non-secret header `K=V`, written to the config as is (repeatable)"},
			&cli.StringFlag{Name: "cwd", Usage: "working `DIR` of a stdio server"},
			&cli.StringFlag{Name: "timeout", Usage: "per-call `DURATION` (default 60s)"},
			&cli.StringFlag{Name: "prefix", Usage: "wire `PREFIX` of its tools (default: the name)"},
			&cli.BoolFlag{Name: "force", Usage: "replace an existing server of that name"},
			&cli.StringSliceFlag{Name: "value", Usage: "catalog install: give value `K=V` of the entry (repeatable; nexus catalog show NAME lists them)"},
			&cli.StringFlag{Name: "name", Usage: "catalog install: the `SERVER` name to install the entry under (default: the entry's name)"},
			&cli.StringFlag{Name: "config", Usage: "edit this config `FILE` (a shared layer) instead of the personal one; secrets still go to the secret store"},
			yesFlag,
		},
		Action: addAction,
	}
}

// addAction is the action of `nexus add`.
func addAction(c *cli.Context) error {
	name := c.Args().First()
	if name == "" {
		return usageError("add needs a NAME: nexus add NAME --command PROGRAM [-- ARGS...]")
	}
	if !config.ValidServerName(name) {
		return usageError(fmt.Sprintf("server name %q: use 1-32 lower-case letters, digits or '-', starting with a letter or digit", name))
	}
	e, err := newEnv(c, slog.LevelWarn)
	if err != nil {
		return err
	}
	if handled, err := addFromCatalog(c, e, name); handled {
		return err
	}
	if c.IsSet("value") || c.IsSet("name") {
		return usageError(fmt.Sprintf("--value and --name install a catalog entry, and %q is none (nexus catalog list shows them)", name))
	}
	if !c.IsSet("command") && !c.IsSet("url") {
		return e.notInCatalog(name)
	}
	srv := &config.Server{Transport: c.String("transport"), Command: c.String("command"), URL: c.String("url"),
		Args: c.Args().Tail(), Cwd: c.String("cwd"), Pin: config.PinStrict}
	vals := map[string]map[string]string{}
	for _, f := range []string{"env", "plain-env", "header", "plain-header"} {
		if vals[f], err = parsePairs(f, c.StringSlice(f)); err != nil {
			return err
		}
	}
	secretEnv, secretHeaders := vals["env"], vals["header"]
	srv.Env, srv.Headers = vals["plain-env"], vals["plain-header"]
	if err := applyServerFlags(c, srv); err != nil {
		return err
	}
	target := e.edits
	if cfg, err := e.load(); err == nil {
		if _, exists := cfg.Servers[name]; exists && !c.Bool("force") {
			return usageError(fmt.Sprintf("a server named %q already exists (from %s); pass --force to replace it or `nexus remove %s` first", name, cfg.Servers[name].Source, name))
		}
	}
	stored, err := e.storeSecrets(c.Context, name, srv, secretEnv, secretHeaders)
	if err != nil {
		return err
	}
	err = config.Edit(target, func(d config.Document) error { return d.SetServer(name, srv) })
	if err != nil {
		e.deleteSecrets(c.Context, stored) // nothing half-done: the config was not written
		return err
	}
	fmt.Fprintf(e.stdout, "added %s to %s\n", name, target)
	for _, n := range stored {
		fmt.Fprintf(e.stdout, "stored secret %s in %s\n", n, e.secretPlace(c.Context, n))
	}
	if err := e.fileStoreNotice(c.Context, len(stored)); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, memoryHint(name, nil))
	if srv.URL != "" && !hasHeader(srv.Headers, secretHeaders, "Authorization") {
		e.offerLogin(c.Context, name, srv.URL)
	}
	e.warnMissingCommand(srv.Command)
	return nil
}

func removeCommand() *cli.Command {
	return &cli.Command{
		Name:      "remove",
		Usage:     "remove a child server from the config and forget its remembered answers",
		ArgsUsage: "NAME",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Usage: "edit this config `FILE` (a shared layer) instead of the personal one"},
		},
		Action: removeAction,
	}
}

// removeAction is the action of `nexus remove`.
func removeAction(c *cli.Context) error {
	name := c.Args().First()
	e, err := newEnv(c, slog.LevelWarn)
	if err != nil {
		return err
	}
	target := e.edits
	before, _ := e.load() // to find the server's secrets once it is gone
	found := false
	err = config.Edit(target, func(d config.Document) error {
		found = d.RemoveServer(name)
		return nil
	})
	if err != nil {
		return err
	}
	if !found {
		msg := fmt.Sprintf("no server named %q in %s", name, target)
		if before != nil {
			if near := suggest.Closest(name, before.ServerNames()); near != "" {
				return cli.Exit(fmt.Sprintf("%s; did you mean `nexus remove %s`?", msg, near), 1)
			}
		}
		return cli.Exit(msg+" (nexus list-servers shows the configured ones and their files)", 1)
	}
	if before != nil {
		if purged := e.purgeSecrets(c.Context, before, name); len(purged) > 0 {
			fmt.Fprintf(e.stdout, "deleted %d secret(s) of %s from %s\n", len(purged), name, e.storeName())
		}
	}
	if cfg, err := e.load(); err == nil {
		if mem, err := e.openMemory(c.Context, cfg); err == nil {
			if n, err := mem.Clear(c.Context, name, ""); err == nil && n > 0 {
				fmt.Fprintf(e.stdout, "forgot %d remembered answers of %s\n", n, name)
			}
			mem.Close()
		}
		if cfg.Servers[name] == nil {
			e.forgetPins(name)
		}
	}
	fmt.Fprintf(e.stdout, "removed %s from %s\n", name, target)
	e.confirmRunning(c.Context)
	return nil
}

func listServersCommand() *cli.Command {
	return &cli.Command{
		Name:  "list-servers",
		Usage: "list the configured child servers",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
			&cli.BoolFlag{Name: "live", Usage: "show each server's state and tool count: the running gateway's (nexus serve of this home that read the same config files) when one runs, else connect to each server"},
			&cli.BoolFlag{Name: "fresh", Usage: "with --live, connect to each server even when a gateway is running"},
		},
		Action: listServersAction,
	}
}

// listServersAction is the action of `nexus list-servers`.
func listServersAction(c *cli.Context) error {
	e, cfg, err := loadEnv(c, slog.LevelError)
	if err != nil {
		return err
	}
	type row struct {
		Name      string `json:"name"`
		Transport string `json:"transport"`
		Target    string `json:"target"`
		Disabled  bool   `json:"disabled,omitempty"`
		Source    string `json:"source"`
		State     string `json:"state,omitempty"`
		Tools     *int   `json:"tools,omitempty"`
		Error     string `json:"error,omitempty"`
		// Sessions is "shared" or "client"; Upstream counts a "client"
		// server's open upstream sessions (--live).
		Sessions    string `json:"sessions"`
		Upstream    *int   `json:"upstreamSessions,omitempty"`
		MaxSessions int    `json:"maxSessions,omitempty"`
		// Protocol is the version the child speaks and its era (--live):
		// "2026-07-28 (stateless)", "2025-11-25 (session)"; ProtocolWhy how
		// that era was chosen.
		Protocol    string `json:"protocol,omitempty"`
		ProtocolWhy string `json:"protocolWhy,omitempty"`
		// Held are the tools its pins hold until approved, Unapproved those
		// listed without approval (pin: warn), by the server's names (--live).
		Held       []string `json:"held,omitempty"`
		Unapproved []string `json:"unapproved,omitempty"`
		// IdleSince is when the running gateway stopped an idle server (zero:
		// not started yet).
		IdleSince time.Time `json:"idleSince,omitzero"`
	}
	rows := []row{}
	for _, name := range cfg.ServerNames() {
		s := cfg.Servers[name]
		target := s.URL
		if s.Transport == config.TransportStdio {
			target = strings.Join(append([]string{s.Command}, s.Args...), " ")
		}
		r := row{Name: name, Transport: s.Transport, Target: target, Disabled: s.Disabled, Source: s.Source, Sessions: config.SessionsShared}
		if s.PerClient() {
			r.Sessions, r.MaxSessions = config.SessionsClient, s.SessionLimit()
		}
		rows = append(rows, r)
	}
	if c.Bool("live") {
		all, err := e.liveServers(c.Context, cfg, c.Bool("fresh"), c.Bool("json"))
		if err != nil {
			return err
		}
		states := map[string]int{}
		for i, st := range all {
			states[st.Name] = i
		}
		for i := range rows {
			if j, ok := states[rows[i].Name]; ok {
				n := all[j].Tools
				rows[i].State, rows[i].Tools, rows[i].Error = string(all[j].State), &n, all[j].Error
				rows[i].Protocol, rows[i].ProtocolWhy = all[j].Protocol, all[j].ProtocolWhy
				rows[i].Held, rows[i].Unapproved, rows[i].IdleSince = all[j].Held, all[j].Unapproved, all[j].IdleSince
				if all[j].Sessions == config.SessionsClient {
					up := all[j].UpstreamSessions
					rows[i].Upstream = &up
				}
				if !all[j].NextRetry.IsZero() {
					rows[i].Error += fmt.Sprintf("; next try in %s", time.Until(all[j].NextRetry).Round(time.Millisecond))
				}
			} else {
				rows[i].State = "disabled"
			}
		}
	}
	if c.Bool("json") {
		return printJSON(e.stdout, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintf(e.stdout, "no servers configured in %s (nexus add NAME --command PROGRAM adds one; nexus demo shows one running)\n", strings.Join(e.layers, ", "))
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTRANSPORT\tTARGET\tSTATE\tSESSIONS\tSOURCE")
	for _, r := range rows {
		state := r.State
		if state == "" {
			state = "enabled"
			if r.Disabled {
				state = "disabled"
			}
		} else if r.State == string(aggregation.StateIdle) {
			state = aggregation.Status{State: aggregation.StateIdle, IdleSince: r.IdleSince}.StateText()
		} else if r.Tools != nil && r.State == string(aggregation.StateReady) {
			state = fmt.Sprintf("ready (%d tools)", *r.Tools)
			if r.Protocol != "" {
				state = fmt.Sprintf("ready (%d tools, %s)", *r.Tools, r.Protocol)
			}
		}
		sessions := r.Sessions
		if r.Sessions == config.SessionsClient {
			sessions = fmt.Sprintf("client (max %d)", r.MaxSessions)
			if r.Upstream != nil {
				sessions = fmt.Sprintf("client (%d of %d)", *r.Upstream, r.MaxSessions)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Transport, truncate(r.Target, 60), state, sessions, r.Source)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows { // why a server is not running, and when it tries again
		if r.Error != "" && r.State != string(aggregation.StateReady) {
			fmt.Fprintf(e.stdout, "%s: %s\n", r.Name, r.Error)
		}
	}
	for _, r := range rows { // what its pins keep back, and the command that shows it
		if len(r.Held) > 0 {
			fmt.Fprintf(e.stdout, "%s holds %d tool(s) until approved: %s (nexus tools diff %s)\n", r.Name, len(r.Held), strings.Join(r.Held, ", "), r.Name)
		}
		if len(r.Unapproved) > 0 {
			fmt.Fprintf(e.stdout, "%s lists %d tool(s) without approval (pin: warn): %s (nexus tools diff %s)\n", r.Name, len(r.Unapproved), strings.Join(r.Unapproved, ", "), r.Name)
		}
	}
	for _, r := range rows { // the era each server is spoken, and why
		if r.Protocol != "" && r.ProtocolWhy != "" {
			fmt.Fprintf(e.stdout, "%s speaks %s: %s\n", r.Name, r.Protocol, r.ProtocolWhy)
		}
	}
	return nil
}

// liveServers is the state of each server: that of the running gateway of this
// home that read the same config files as the command (the newest, when several
// did), so that an idle server shows since when it is stopped; else, or with
// fresh, that of a gateway started for the command, which connects to each
// server. A gateway that read other files may run other servers, or the same
// ones otherwise: its state would not answer for this config.
func (e *env) liveServers(ctx context.Context, cfg *config.Config, fresh, jsonOut bool) ([]aggregation.Status, error) {
	if !fresh {
		running, err := run.Running(ctx, e.home)
		if err == nil && len(running) > 0 {
			same := -1 // the newest that read the same files
			for i := len(running) - 1; i >= 0 && same < 0; i-- {
				if slices.Equal(running[i].Config, cfg.Layers) {
					same = i
				}
			}
			if same < 0 {
				rec := running[len(running)-1]
				fmt.Fprintf(e.stderr, "nexus: the gateway running as pid %d read other config files (%s); connecting to each server instead\n",
					rec.PID, strings.Join(rec.Config, ", "))
			} else {
				rec := running[same]
				all, err := rec.Servers(ctx)
				if err == nil {
					fmt.Fprintf(e.stderr, "nexus: the state of the gateway running as pid %d since %s (--fresh connects to each server instead)\n",
						rec.PID, rec.Started.Local().Format(time.DateTime))
					return all, nil
				}
				fmt.Fprintf(e.stderr, "nexus: %v; connecting to each server instead\n", err)
			}
		}
	}
	g, err := e.startGatewayShowingProgress(ctx, cfg, run.Options{NoMemory: true}, jsonOut)
	if err != nil {
		return nil, err
	}
	defer g.Close()
	return g.Servers(), nil
}

// applyServerFlags sets what --cwd, --timeout and --prefix say, for an entry built
// from flags or installed from the catalog.
func applyServerFlags(c *cli.Context, srv *config.Server) error {
	if c.IsSet("cwd") {
		srv.Cwd = c.String("cwd")
	}
	if t := c.String("timeout"); t != "" {
		d, err := config.ParseDuration(t)
		if err != nil {
			return usageError("--timeout: " + err.Error())
		}
		srv.Timeout = config.Duration{D: d}
	}
	if c.IsSet("prefix") {
		p := c.String("prefix")
		srv.Prefix = &p
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// notInCatalog answers `nexus add NAME` with neither --command nor --url for a NAME
// the catalog lacks: most often a misspelt entry ("githb").
func (e *env) notInCatalog(name string) error {
	msg := fmt.Sprintf("%q is not in the catalog, and no --command or --url says how to run it", name)
	if cat, err := e.loadCatalog(); err == nil {
		if near := suggest.Closest(name, cat.Names()); near != "" {
			return usageHint(msg, fmt.Sprintf("did you mean `nexus add %s`? (nexus catalog list shows the entries)", near))
		}
	}
	return usageHint(msg, "nexus catalog list shows the entries; nexus add NAME --command PROGRAM [-- ARGS...] adds any other server")
}

// hasHeader reports whether either header set names header.
func hasHeader(a, b map[string]string, header string) bool {
	for _, m := range []map[string]string{a, b} {
		for k := range m {
			if strings.EqualFold(k, header) {
				return true
			}
		}
	}
	return false
}

// warnMissingCommand warns when a stdio server's program (or the launcher a
// catalog entry runs it with: npx, uvx, docker) is not on PATH: the server is
// saved, but it cannot start until the program is installed.
func (e *env) warnMissingCommand(command string) {
	if command == "" {
		return
	}
	if _, err := exec.LookPath(command); err != nil {
		fmt.Fprintf(e.stderr, "warning: %s is not on PATH (%v); the server is saved, but it will not start until %s is installed (nexus doctor checks it)\n", command, errors.Unwrap(err), command)
	}
}

// knownServer refuses name (a policy entry or ttl pattern: server.tool, server.*)
// when the server it names is in no config layer: a misspelt server would be saved
// and apply to nothing. The refusal names the closest server, and the flag that
// writes it anyway. Entries that name no server ("*", "@readonly") pass.
func knownServer(cfg *config.Config, name, flag string) error {
	server, _, ok := strings.Cut(name, ".")
	if !ok || server == "" || server == "*" || strings.HasPrefix(name, "@") || cfg.Servers[server] != nil {
		return nil
	}
	msg := fmt.Sprintf("%s: no server %q is configured, nothing was written", name, server)
	if near := suggest.Closest(server, cfg.ServerNames()); near != "" {
		_, rest, _ := strings.Cut(name, ".")
		return usageHint(msg, fmt.Sprintf("did you mean %s? (%s writes it for a server you add later)", near+"."+rest, flag))
	}
	return usageHint(msg, fmt.Sprintf("`nexus list-servers` shows the servers; %s writes it for a server you add later", flag))
}
