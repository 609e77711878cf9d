package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/nexus-mcp/nexus/catalog"
	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/internal/suggest"
	"github.com/nexus-mcp/nexus/policy"
	"github.com/nexus-mcp/nexus/secrets"
)

// memoryHint is the line `nexus add` prints about memory for a new server: what
// the catalog keeps (lifetimes, by canonical pattern), or how to turn it on.
func memoryHint(server string, lifetimes map[string]string) string {
	if len(lifetimes) == 0 {
		return fmt.Sprintf("memory: answers of %s are not kept until you say how long they stay true, e.g. nexus cache ttl %s 5m", server, server)
	}
	parts := make([]string, 0, len(lifetimes))
	for _, p := range slices.Sorted(maps.Keys(lifetimes)) {
		parts = append(parts, p+" "+lifetimes[p])
	}
	return fmt.Sprintf("memory: read-only answers kept as the catalog suggests (%s); change with nexus cache ttl %s DURATION", strings.Join(parts, ", "), server)
}

// loadCatalog reads the builtin catalog extended by $NEXUS_HOME/catalog.json and the
// catalog.json beside each config layer.
func (e *env) loadCatalog() (*catalog.Catalog, error) {
	files := append([]string{filepath.Join(e.home, "catalog.json")}, catalog.LayerFiles(e.layers)...)
	var uniq []string
	for _, f := range files {
		if !slices.Contains(uniq, f) {
			uniq = append(uniq, f)
		}
	}
	return catalog.Load(uniq...)
}

func catalogCommand() *cli.Command {
	return &cli.Command{
		Name:  "catalog",
		Usage: "list and show the install specs `nexus add NAME` knows",
		Description: "The catalog is built into nexus and extended (or overridden by name) by\n" +
			"$NEXUS_HOME/catalog.json and a catalog.json beside each config layer.\n" +
			"Install an entry with `nexus add NAME [--value K=V ...]`.",
		Subcommands: []*cli.Command{
			{
				Name:   "list",
				Usage:  "list the catalog entries",
				Flags:  []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
				Action: catalogListAction,
			},
			{
				Name:      "show",
				Usage:     "show one entry: the values it needs, its launch template, hints and docs",
				ArgsUsage: "NAME",
				Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
				Action:    catalogShowAction,
			},
		},
	}
}

// catalogEnv is the env of a catalog command and the catalog it reads.
func catalogEnv(c *cli.Context) (*env, *catalog.Catalog, error) {
	e, err := newEnv(c, slog.LevelWarn)
	if err != nil {
		return nil, nil, err
	}
	cat, err := e.loadCatalog()
	if err != nil {
		return nil, nil, err
	}
	return e, cat, nil
}

// catalogShowAction is the action of `nexus catalog show`.
func catalogShowAction(c *cli.Context) error {
	e, cat, err := catalogEnv(c)
	if err != nil {
		return err
	}
	en, ok := cat.Get(c.Args().First())
	if !ok {
		msg := fmt.Sprintf("no catalog entry %q", c.Args().First())
		if near := suggest.Closest(c.Args().First(), cat.Names()); near != "" {
			return usageHint(msg, fmt.Sprintf("did you mean `nexus catalog show %s`?", near))
		}
		return usageHint(msg, "the catalog has: "+strings.Join(cat.Names(), ", "))
	}
	if c.Bool("json") {
		return printJSON(e.stdout, struct {
			Name   string `json:"name"`
			Source string `json:"source"`
			*catalog.Entry
		}{en.Name, en.Source, en})
	}
	showEntry(e.stdout, en)
	return nil
}

// catalogListAction is the action of `nexus catalog list`.
func catalogListAction(c *cli.Context) error {
	e, cat, err := catalogEnv(c)
	if err != nil {
		return err
	}
	type row struct {
		Name        string   `json:"name"`
		Transport   string   `json:"transport"`
		Description string   `json:"description"`
		Required    []string `json:"required"`
		Launcher    string   `json:"launcher,omitempty"` // the program it runs with (npx, uvx), which must be installed
		Source      string   `json:"source"`
	}
	rows := []row{}
	for _, en := range cat.List() {
		r := row{Name: en.Name, Transport: en.Transport, Description: en.Description, Source: en.Source, Required: []string{}, Launcher: launcher(en)}
		for _, v := range en.Missing(nil) {
			r.Required = append(r.Required, v.Name)
		}
		rows = append(rows, r)
	}
	if c.Bool("json") {
		return printJSON(e.stdout, rows)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTRANSPORT\tNEEDS\tDESCRIPTION")
	for _, r := range rows {
		needs := strings.Join(r.Required, ", ")
		if r.Launcher != "" {
			needs = strings.Join(append([]string{r.Launcher}, r.Required...), ", ")
		}
		if needs == "" {
			needs = "-"
		}
		desc := r.Description
		if r.Source != catalog.BuiltinSource {
			desc += " [" + r.Source + "]"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, r.Transport, needs, truncate(desc, 90))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "\nnexus catalog show NAME tells what an entry needs; nexus add NAME installs it.")
	return nil
}

func showEntry(w io.Writer, en *catalog.Entry) {
	fmt.Fprintf(w, "%s: %s\n", en.Name, en.Description)
	if en.Docs != "" {
		fmt.Fprintf(w, "docs:      %s\n", en.Docs)
	}
	fmt.Fprintf(w, "source:    %s\n", en.Source)
	fmt.Fprintf(w, "transport: %s\n", en.Transport)
	if en.Command != "" {
		fmt.Fprintf(w, "command:   %s\n", strings.Join(append([]string{en.Command}, en.Args...), " "))
	}
	if en.URL != "" {
		fmt.Fprintf(w, "url:       %s\n", en.URL)
	}
	printMap := func(label string, m map[string]string) {
		if len(m) == 0 {
			return
		}
		fmt.Fprintf(w, "%s:\n", label)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			fmt.Fprintf(w, "  %s=%s\n", k, m[k])
		}
	}
	printMap("env", en.Env)
	printMap("headers", en.Headers)
	if len(en.Values) == 0 {
		fmt.Fprintln(w, "values:    none needed")
	} else {
		fmt.Fprintln(w, "values (give with --value NAME=VALUE; asked for on a terminal):")
		for _, v := range en.Values {
			req := "optional"
			if v.Required && v.Default == "" {
				req = "required"
			}
			fmt.Fprintf(w, "  [%s] %s\n", req, catalog.Describe(v))
		}
	}
	printMap("suggested ttl", en.TTL)
	if p := en.Policy; len(p.ReadOnly)+len(p.Mutating)+len(p.Allow) > 0 {
		fmt.Fprintln(w, "policy hints:")
		if len(p.ReadOnly) > 0 {
			fmt.Fprintf(w, "  read-only: %s\n", strings.Join(p.ReadOnly, ", "))
		}
		if len(p.Mutating) > 0 {
			fmt.Fprintf(w, "  mutating:  %s\n", strings.Join(p.Mutating, ", "))
		}
		if len(p.Allow) > 0 {
			fmt.Fprintf(w, "  suggested allow: %s\n", strings.Join(p.Allow, ", "))
		}
	}
	printMap("memory cache", en.Memory.Cache)
	if len(en.Memory.SemanticFields) > 0 {
		fmt.Fprintln(w, "semantic fields:")
		keys := make([]string, 0, len(en.Memory.SemanticFields))
		for k := range en.Memory.SemanticFields {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "  %s: %s\n", k, strings.Join(en.Memory.SemanticFields[k], ", "))
		}
	}
	fmt.Fprintf(w, "install:   nexus add %s", en.Name)
	for _, v := range en.Missing(nil) {
		if v.Secret {
			continue // asked for on a terminal; on a command line it would land in shell history
		}
		fmt.Fprintf(w, " --value %s=...", v.Name)
	}
	fmt.Fprintln(w)
}

// stdinTerminal returns the terminal stdin is, if it is one.
func stdinTerminal(in io.Reader) (*os.File, bool) {
	f, ok := in.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil, false
	}
	return f, true
}

// addFromCatalog is `nexus add NAME` for a catalog entry: it reports handled=false
// when NAME is not one, or when the flags describe a server by hand (--url,
// --transport, or --command for an entry that takes no command value).
func addFromCatalog(c *cli.Context, e *env, name string) (handled bool, err error) {
	if c.IsSet("url") || c.IsSet("transport") {
		return false, nil
	}
	cat, err := e.loadCatalog()
	if err != nil {
		if c.IsSet("command") {
			return false, nil
		}
		return true, err
	}
	entry, ok := cat.Get(name)
	if !ok {
		return false, nil
	}
	if _, takesCommand := entry.Value("command"); c.IsSet("command") && !takesCommand {
		return false, nil
	}
	return true, installEntry(c, e, entry)
}

// catalogValues gathers the values given on the command line: --value K=V, and
// --command, --env, --plain-env, --header and --plain-header where they name a value of
// the entry (by its name, or as the env var or header its template fills in whole).
func catalogValues(c *cli.Context, entry *catalog.Entry) (map[string]string, error) {
	values := map[string]string{}
	given, err := parsePairs("value", c.StringSlice("value"))
	if err != nil {
		return nil, err
	}
	for k, v := range given {
		if _, ok := entry.Value(k); !ok {
			msg := fmt.Sprintf("--value %s: catalog entry %q takes no value %q; it takes: %s (nexus catalog show %s)", k, entry.Name, k, valueList(entry), entry.Name)
			if near := suggest.Closest(k, valueNames(entry)); near != "" {
				return nil, usageHint(msg, fmt.Sprintf("did you mean --value %s=%s?", near, v))
			}
			return nil, usageError(msg)
		}
		values[k] = v
	}
	if c.IsSet("command") {
		values["command"] = c.String("command")
	}
	for _, f := range []struct {
		flag, kind string
		tmpl       map[string]string
	}{{"env", "env var", entry.Env}, {"plain-env", "env var", entry.Env}, {"header", "header", entry.Headers}, {"plain-header", "header", entry.Headers}} {
		pairs, err := parsePairs(f.flag, c.StringSlice(f.flag))
		if err != nil {
			return nil, err
		}
		for k, v := range pairs {
			if _, ok := entry.Value(k); ok {
				values[k] = v
				continue
			}
			tmpl, ok := f.tmpl[k]
			if !ok {
				return nil, usageError(fmt.Sprintf("--%s %s: catalog entry %q sets no %s %s; give its values with --value NAME=VALUE (it takes: %s)", f.flag, k, entry.Name, f.kind, k, valueList(entry)))
			}
			vname, prefix, ok := wholePlaceholder(tmpl)
			if !ok || !strings.HasPrefix(v, prefix) {
				return nil, usageError(fmt.Sprintf("--%s %s: catalog entry %q writes %s as %q; give the parts with --value NAME=VALUE", f.flag, k, entry.Name, k, tmpl))
			}
			values[vname] = strings.TrimPrefix(v, prefix)
		}
	}
	return values, nil
}

// wholePlaceholder reports whether tmpl is a fixed prefix followed by one {{NAME}}
// ("Bearer {{token}}"), and returns NAME and the prefix.
func wholePlaceholder(tmpl string) (name, prefix string, ok bool) {
	i := strings.Index(tmpl, "{{")
	if i < 0 || !strings.HasSuffix(tmpl, "}}") || strings.Count(tmpl, "{{") != 1 {
		return "", "", false
	}
	return strings.TrimSpace(tmpl[i+2 : len(tmpl)-2]), tmpl[:i], true
}

func valueList(entry *catalog.Entry) string {
	if len(entry.Values) == 0 {
		return "no values"
	}
	return strings.Join(valueNames(entry), ", ")
}

// valueNames are the names of the values entry takes, in its order.
func valueNames(entry *catalog.Entry) []string {
	var names []string
	for _, v := range entry.Values {
		names = append(names, v.Name)
	}
	return names
}

// promptValues asks on the terminal for each missing required value; secrets are read
// without echo.
func promptValues(tty *os.File, prompt io.Writer, missing []catalog.Value, values map[string]string) error {
	r := bufio.NewReader(tty)
	for _, v := range missing {
		fmt.Fprintln(prompt, catalog.Describe(v))
		for {
			var val string
			if v.Secret {
				fmt.Fprintf(prompt, "%s (hidden): ", v.Name)
				b, err := term.ReadPassword(int(tty.Fd()))
				fmt.Fprintln(prompt)
				if err != nil {
					return fmt.Errorf("reading %s: %w", v.Name, err)
				}
				val = string(b)
			} else {
				fmt.Fprintf(prompt, "%s: ", v.Name)
				line, err := r.ReadString('\n')
				if err != nil && !errors.Is(err, io.EOF) {
					return fmt.Errorf("reading %s: %w", v.Name, err)
				}
				val = line
				if errors.Is(err, io.EOF) && line == "" {
					return usageError(fmt.Sprintf("no value given for %s; nothing was written", v.Name))
				}
			}
			val = strings.TrimSpace(val)
			if val != "" {
				values[v.Name] = val
				break
			}
			fmt.Fprintf(prompt, "%s is required (Ctrl-C to stop)\n", v.Name)
		}
	}
	return nil
}

func installEntry(c *cli.Context, e *env, entry *catalog.Entry) error {
	server := entry.Name
	if c.IsSet("name") {
		server = c.String("name")
		if !config.ValidServerName(server) {
			return usageError(fmt.Sprintf("--name %q: use 1-32 lower-case letters, digits or '-', starting with a letter or digit", server))
		}
	}
	target := e.edits
	if cfg, err := e.load(); err == nil {
		if s, exists := cfg.Servers[server]; exists && !c.Bool("force") {
			return usageError(fmt.Sprintf("a server named %q already exists (from %s); pass --force to replace it, --name OTHER to install %s under another name, or `nexus remove %s` first", server, s.Source, entry.Name, server))
		}
	}
	values, err := catalogValues(c, entry)
	if err != nil {
		return err
	}
	if missing := entry.Missing(values); len(missing) > 0 {
		tty, ok := stdinTerminal(c.App.Reader)
		if !ok {
			return usageError((&catalog.MissingError{Entry: entry.Name, Values: missing}).Error() + "\nnothing was written")
		}
		for _, v := range missing {
			if v.Secret {
				// Say so before asking, not after the user typed a token.
				if _, err := e.secrets(c.Context, nil); err != nil {
					return fmt.Errorf("%s needs the secret %s, and no secret store can be used, so nothing was written: %w", entry.Name, v.Name, err)
				}
				break
			}
		}
		fmt.Fprintf(e.stderr, "%s needs %d value(s):\n", entry.Name, len(missing))
		if err := promptValues(tty, e.stderr, missing, values); err != nil {
			return err
		}
	}
	self, err := os.Executable()
	if err != nil {
		self = ""
	} else if abs, err := filepath.EvalSymlinks(self); err == nil {
		self = abs
	}
	if err := entry.CheckPaths(values); err != nil {
		return usageError(err.Error() + "\nnothing was written")
	}
	inst, err := entry.Install(server, values, self)
	if err != nil {
		var me *catalog.MissingError
		if errors.As(err, &me) {
			return usageError(me.Error() + "\nnothing was written")
		}
		return usageError(err.Error() + "\nnothing was written")
	}
	srv := inst.Server
	srv.Args = append(srv.Args, c.Args().Tail()...)
	if len(inst.Hints.Annotations) > 0 {
		srv.Annotations = inst.Hints.Annotations
	}
	if err := applyServerFlags(c, srv); err != nil {
		return err
	}

	srv.Pin = config.PinStrict
	inst.Server = srv
	if err := e.confirmInstall(c, map[string]*config.Server{server: srv}, []string{server}); err != nil {
		return err
	}
	w, err := inst.Write(c.Context, target, server, func(ctx context.Context) (secrets.Store, error) { return e.secrets(ctx, nil) }, e.log)
	if err != nil {
		return err
	}
	stored, addedCache := w.Stored, w.AddedCache
	fmt.Fprintf(e.stdout, "added %s (catalog entry %s) to %s\n", server, entry.Name, target)
	for _, n := range stored {
		fmt.Fprintf(e.stdout, "stored secret %s in %s\n", n, e.secretPlace(c.Context, n))
	}
	if err := e.fileStoreNotice(c.Context, len(stored)); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, memoryHint(server, inst.Hints.TTL))
	if len(addedCache) > 0 {
		fmt.Fprintf(e.stdout, "cache hints set: %s\n", strings.Join(addedCache, ", "))
	}
	if allow := e.hiddenByDefault(inst.Hints); len(allow) > 0 {
		fmt.Fprintf(e.stdout, "the catalog suggests allowing these tools, which the default policy hides; for an agent (or --default for every agent), run:\n  nexus policy allow --agent AGENT %s\n", strings.Join(allow, " "))
	}
	if entry.Docs != "" {
		fmt.Fprintf(e.stdout, "docs: %s\n", entry.Docs)
	}
	fmt.Fprintln(e.stdout, "check it with: nexus list-tools  (or nexus doctor)")
	if srv.Transport == config.TransportStdio || srv.Transport == "" {
		e.warnMissingCommand(srv.Command)
	}
	return nil
}

// hiddenByDefault are the entries of the catalog's suggested allow list that the
// default policy (the config's, after the install) does not already allow: a
// read-only tool the default lets through needs no command. A pattern
// ("server.*") is kept: it grants tools the default hides.
func (e *env) hiddenByDefault(h catalog.Hints) []string {
	rules := policy.Config{}
	if cfg, err := e.load(); err == nil {
		rules.Default = cfg.Policy.Default
	}
	pol, err := policy.Compile(rules)
	if err != nil {
		return h.Allow // the config's own check reports it; suggest every entry
	}
	var out []string
	for _, entry := range h.Allow {
		_, tool, _ := strings.Cut(entry, ".")
		if strings.ContainsAny(tool, "*?") || entry == policy.All ||
			!pol.Decide("", policy.Tool{Name: entry, ReadOnly: slices.Contains(h.ReadOnly, entry)}).Allowed {
			out = append(out, entry)
		}
	}
	return out
}

// launcher is the program a catalog entry runs that the user must have installed
// (npx, uvx, docker): "" when the command is a value the user gives, or this
// nexus binary.
func launcher(en *catalog.Entry) string {
	if en.Command == "" || strings.Contains(en.Command, "{{") {
		return ""
	}
	return en.Command
}
