package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nexus-mcp/nexus/aggregation"
	"github.com/nexus-mcp/nexus/clients"
	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/policy"
	"github.com/nexus-mcp/nexus/run"
	"github.com/nexus-mcp/nexus/secrets"
)

// clientFile is the config file of a client named on the command line.
type clientFile struct {
	Name    string // "claude-desktop", or "" for a file given by path
	Display string
	Path    string
	Format  clients.Format
	// MaxNameLength is the wire-name cap the client needs (0: the default fits).
	maxName func(entry string) int
}

// clientNames is the list of known clients for usage lines.
const clientNames = "claude-desktop|claude-code|cursor|vscode|codex|windsurf|gemini|zed|goose|cline|roo-code|continue|opencode|lm-studio|copilot-cli|kiro|FILE"

// resolveClient turns a known client's name, or the path of a client file, into
// a file. A known client's file is where that client keeps it on this OS, for
// the user in HOME.
func resolveClient(arg string) (clientFile, error) {
	if arg == "" {
		return clientFile{}, usageError("name a client (" + clientNames + ")")
	}
	if !strings.ContainsAny(arg, `/\`) && !clients.IsClientFile(arg) {
		home, err := os.UserHomeDir()
		if err != nil {
			return clientFile{}, fmt.Errorf("finding your home directory (set HOME): %w", err)
		}
		cl, err := clients.Find(arg, runtime.GOOS, home, os.Getenv)
		if err != nil {
			return clientFile{}, usageError(err.Error())
		}
		cl = cl.Located(fileExists)
		return clientFile{Name: cl.Name, Display: cl.Display, Path: cl.Path, Format: cl.Format, maxName: cl.MaxNameLength}, nil
	}
	abs, err := filepath.Abs(arg)
	if err != nil {
		return clientFile{}, usageError(fmt.Sprintf("%s: %v", arg, err))
	}
	format, err := clients.DetectFormat(abs)
	if err != nil {
		return clientFile{}, err
	}
	return clientFile{Display: abs, Path: abs, Format: format}, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// selfPath is the absolute path of this nexus binary, for client entries: clients start
// servers with a minimal PATH.
func selfPath() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the path of the nexus executable: %w", err)
	}
	if abs, err := filepath.EvalSymlinks(exe); err == nil {
		exe = abs
	}
	return exe, nil
}

// importer writes imported servers into the personal config and their secrets into
// the store this command opens.
func (e *env) importer(cfg *config.Config) *clients.Importer {
	return &clients.Importer{
		Config:    e.personal,
		Store:     func(ctx context.Context) (secrets.Store, error) { return e.secrets(ctx, cfg) },
		StoreName: e.storeName,
		Log:       e.log,
	}
}

// keepFileStore records the choice of --insecure-file-store in the personal config
// when the file store is the one in use, so that Nexus started by a client (from the
// entry setup writes) and every later command open the same store and find the
// secrets. It reports whether it did (or, in a dry run, would).
func (e *env) keepFileStore(ctx context.Context, cfg *config.Config, dryRun bool) (bool, error) {
	if !e.insecure || cfg != nil && cfg.Secrets.InsecureFileStore {
		return false, nil
	}
	if _, err := e.secrets(ctx, cfg); err != nil || e.storeFile == "" {
		return false, nil // the keychain works, or no store does: nothing to keep
	}
	if dryRun {
		return true, nil
	}
	err := config.Edit(e.personal, func(d config.Document) error {
		return d.Set(true, "secrets", "insecureFileStore")
	})
	if err != nil {
		return false, fmt.Errorf("recording the insecure file store in %s: %w", e.personal, err)
	}
	return true, nil
}

// fileStoreWarning says that the file store is now the configured store, and why.
func (e *env) fileStoreWarning(w io.Writer, dryRun bool) {
	verb := "is now"
	if dryRun {
		verb = "would be"
	}
	fmt.Fprintf(w, "warning: no OS keychain is usable, so secrets are kept in %s, a plain file readable only by you.\n"+
		"  \"secrets\": {\"insecureFileStore\": true} %s in %s, so that Nexus finds them when a client starts it.\n"+
		"  Once a keychain works, store each value again with nexus secrets set NAME and remove that setting.\n",
		e.storeFile, verb, e.personal)
}

func printImport(w io.Writer, results []clients.ImportResult, dryRun, moving bool) {
	verb := "imported"
	switch {
	case moving && dryRun:
		verb = "would move behind Nexus:"
	case moving:
		verb = "moved behind Nexus:"
	case dryRun:
		verb = "would import"
	}
	for _, r := range results {
		switch r.Status {
		case clients.StatusSkipped:
			fmt.Fprintf(w, "skipped %s: %s\n", r.Original, r.Error)
		case clients.StatusExists:
			fmt.Fprintf(w, "%s is already configured in Nexus as %s\n", r.Original, r.Name)
		case clients.StatusStayed:
			not := "not imported"
			if moving {
				not = "not moved (it stays in the client)"
			}
			fmt.Fprintf(w, "%s %s: %s\n", not, r.Original, r.Error)
			if r.Fix != "" {
				fmt.Fprintf(w, "  fix: %s\n", r.Fix)
			}
		default:
			if r.Name != r.Original {
				fmt.Fprintf(w, "%s %s as %s\n", verb, r.Original, r.Name)
			} else {
				fmt.Fprintf(w, "%s %s\n", verb, r.Name)
			}
			for _, s := range r.Secrets {
				if dryRun {
					fmt.Fprintf(w, "  its secret %s would go to %s\n", s, r.Store)
				} else {
					fmt.Fprintf(w, "  stored secret %s in %s\n", s, r.Store)
				}
			}
		}
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
	}
}

func importCommand() *cli.Command {
	return &cli.Command{
		Name:      "import",
		Usage:     "import the MCP servers of a client's config file into Nexus (secrets go to the keychain)",
		ArgsUsage: clientNames,
		Description: "Reads the client's server entries (\"mcpServers\", VS Code's \"servers\", Zed's\n" +
			"\"context_servers\", opencode's \"mcp\", Codex's TOML tables, Goose's and Continue's\n" +
			"YAML) and adds each to $NEXUS_HOME/config.json. Env values and headers that look like\n" +
			"credentials are stored in the OS keychain (or, with --insecure-file-store and no\n" +
			"keychain, in a file readable only by you, a choice then kept in the personal\n" +
			"config); the config holds ${keyring:...} references. Without a usable store,\n" +
			"servers without secrets are still imported and the others are not, with why.\n" +
			"The client's file is not changed (nexus setup CLIENT --move-all also takes the\n" +
			"servers out of the client). Before writing, it prints each server's command line\n" +
			"(or URL) and the names of its env vars and headers, and asks; without a terminal\n" +
			"it needs --yes. Imported servers are pinned strict (nexus tools --help).",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "dry-run", Usage: "show what would be imported and write nothing"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
			yesFlag,
		},
		Action: importAction,
	}
}

// clientEnv is the env of import and setup and the client file they name.
func clientEnv(c *cli.Context) (*env, clientFile, error) {
	e, err := newEnv(c, slog.LevelWarn)
	if err != nil {
		return nil, clientFile{}, err
	}
	cf, err := resolveClient(c.Args().First())
	if err != nil {
		return nil, clientFile{}, err
	}
	return e, cf, nil
}

// importAction is the action of `nexus import`.
func importAction(c *cli.Context) error {
	e, cf, err := clientEnv(c)
	if err != nil {
		return err
	}
	ims, err := clients.ReadServersAs(cf.Path, cf.Format)
	if err != nil {
		return err
	}
	cfg, err := e.load()
	if err != nil {
		return fmt.Errorf("the Nexus config is broken, so nothing was imported; fix it first (nexus doctor): %w", err)
	}
	results, todo, err := clients.PlanImport(cfg, ims)
	if err != nil {
		return err
	}
	dry := c.Bool("dry-run")
	imp := e.importer(cfg)
	todo = imp.PlaceSecrets(c.Context, results, todo)
	if !dry && len(todo) > 0 {
		servers, order := map[string]*config.Server{}, []string{}
		for _, im := range todo {
			servers[im.Name], order = im.Server, append(order, im.Name)
		}
		if err := e.confirmInstall(c, servers, order); err != nil {
			return err
		}
		if _, err := imp.Import(c.Context, todo); err != nil {
			return err
		}
	}
	kept, err := e.keepFileStore(c.Context, cfg, dry)
	if err != nil {
		return err
	}
	var hidden []hiddenTools
	if !dry && len(todo) > 0 {
		hidden = e.hiddenTools(c.Context, importedNames(results), policy.Anonymous)
	}
	if c.Bool("json") {
		if err := printJSON(e.stdout, map[string]any{"file": cf.Path, "dryRun": dry, "servers": nonNil(results), "fileStoreKept": kept, "hidden": nonNil(hidden)}); err != nil {
			return err
		}
		return leftBehind(results, false, dry)
	}
	if kept {
		e.fileStoreWarning(e.stdout, dry)
	}
	if len(results) == 0 {
		fmt.Fprintf(e.stdout, "%s has no servers to import\n", cf.Path)
		return nil
	}
	printImport(e.stdout, results, dry, false)
	switch {
	case dry:
		fmt.Fprintln(e.stdout, "dry run: nothing was written")
	case len(todo) > 0:
		fmt.Fprintf(e.stdout, "wrote %s; the client's file is unchanged (nexus setup %s --move-all connects the client to Nexus and takes them out of it)\n", e.personal, c.Args().First())
	}
	printHidden(e.stdout, hidden, policy.Anonymous)
	return leftBehind(results, false, dry)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func setupClientCommand() *cli.Command {
	return &cli.Command{
		Name:      "setup",
		Usage:     "connect a client (Claude Desktop, Cursor, VS Code, Zed, Goose...) to Nexus by adding Nexus to its config file, or undo that",
		ArgsUsage: clientNames,
		Description: "Adds a \"nexus\" server entry running `nexus serve` to the client's config file,\n" +
			"keeping every other key, after copying the file to FILE.nexus-backup-TIME (0600:\n" +
			"it holds the original values, tokens included). The entry carries NEXUS_HOME\n" +
			"when it is set. The servers the client already runs can move behind Nexus: they\n" +
			"are imported into the Nexus config (secrets to the keychain, or the file store as\n" +
			"for import) and taken out of the client; a server whose secrets cannot be stored\n" +
			"stays in the client, and the output says why. On a terminal, setup asks which\n" +
			"to move; --move-all or --move NAME decide without asking. --dry-run checks the\n" +
			"secret store, shows the diff and writes nothing.\n\n" +
			"--undo restores the file from the backup the last setup made, when the file\n" +
			"still holds what setup wrote (else it refuses, and names the backup); run it\n" +
			"again to go one setup further back.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "agent", Usage: "the client connects as agent `NAME` (its policy applies)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "show the diff and write nothing (neither the client file nor the Nexus config)"},
			&cli.BoolFlag{Name: "move-all", Usage: "move every server of the client behind Nexus"},
			&cli.StringSliceFlag{Name: "move", Usage: "move the client's server `NAME` behind Nexus (repeatable)"},
			&cli.BoolFlag{Name: "undo", Usage: "restore the client's file from the backup the last setup made"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON (never asks)"},
		},
		Action: setupAction,
	}
}

// undoAction is the action of `nexus setup --undo`.
func undoAction(c *cli.Context) error {
	if c.IsSet("agent") || c.Bool("move-all") || c.IsSet("move") {
		return usageError("--undo takes no --agent, --move or --move-all: it restores the file as it was")
	}
	e, cf, err := clientEnv(c)
	if err != nil {
		return err
	}
	dry := c.Bool("dry-run")
	res, err := clients.Undo(cf.Path, dry)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(e.stdout, map[string]any{"client": cf.Display, "file": res.File, "backup": res.Backup, "diff": res.Diff, "dryRun": dry, "restored": res.Written})
	}
	if dry {
		fmt.Fprint(e.stdout, res.Diff)
		fmt.Fprintf(e.stdout, "dry run: %s would be restored from %s; nothing was written\n", res.File, res.Backup)
		return nil
	}
	fmt.Fprintf(e.stdout, "restored %s from %s (the backup is removed; nexus setup %s --undo again goes one setup further back)\n", res.File, res.Backup, c.Args().First())
	fmt.Fprintf(e.stdout, "restart %s for it to read the file again\n", cf.Display)
	return nil
}

// setupAction is the action of `nexus setup`.
func setupAction(c *cli.Context) error {
	if c.Bool("undo") {
		return undoAction(c)
	}
	agent := c.String("agent")
	if err := checkAgent(agent); err != nil {
		return err
	}
	if c.Bool("move-all") && c.IsSet("move") {
		return usageError("give --move-all or --move NAME, not both")
	}
	e, cf, err := clientEnv(c)
	if err != nil {
		return err
	}
	exe, err := selfPath()
	if err != nil {
		return err
	}
	entry := clients.NexusEntry(exe, agent)
	if cf.maxName != nil {
		// Names the client would cut or refuse are shortened by Nexus,
		// stably, instead.
		entry = entry.WithMaxNameLength(cf.maxName(entry.Name))
	}
	entry.Env = entryEnv(e)

	var move []string
	switch {
	case c.Bool("move-all"):
		if move, err = clients.Movable(cf.Path, cf.Format, entry.Name); err != nil {
			return err
		}
	case c.IsSet("move"):
		for _, m := range c.StringSlice("move") {
			if !slices.Contains(move, m) {
				move = append(move, m)
			}
		}
	default:
		movable, err := clients.Movable(cf.Path, cf.Format, entry.Name)
		if err != nil {
			return err
		}
		if tty, ok := stdinTerminal(c.App.Reader); ok && !c.Bool("json") && len(movable) > 0 {
			if move, err = askMoves(tty, e.stderr, cf, movable); err != nil {
				return err
			}
		}
	}
	cfg, cfgErr := e.load()
	dry := c.Bool("dry-run")
	conn, err := e.importer(cfg).Connect(c.Context, cf.Path, entry,
		clients.ConnectOptions{Format: cf.Format, Move: move, DryRun: dry, Config: cfg, ConfigErr: cfgErr})
	if err != nil {
		return err
	}
	out := setupOutput{Client: cf.Display, File: cf.Path, DryRun: dry, Changed: conn.Changed, Created: conn.Created,
		Backup: conn.Backup, Diff: conn.Diff, Moved: nonNil(conn.Moved), Stayed: conn.Stayed}
	// Kept once the rest is written: the entry just written runs Nexus, which
	// must open the store the secrets went to.
	if out.FileStoreKept, err = e.keepFileStore(c.Context, cfg, dry); err != nil {
		return err
	}
	as := agent
	if as == "" {
		as = policy.Anonymous
	}
	if !dry && len(conn.Moved) > 0 {
		out.Hidden = e.hiddenTools(c.Context, importedNames(conn.Moved), as)
	}
	if c.Bool("json") {
		if err := printJSON(e.stdout, out); err != nil {
			return err
		}
		return leftBehind(conn.Moved, true, dry)
	}
	if out.FileStoreKept {
		e.fileStoreWarning(e.stdout, dry)
	}
	out.print(e.stdout, c.Args().First())
	printHidden(e.stdout, out.Hidden, as)
	return leftBehind(conn.Moved, true, dry)
}

// entryEnv is the environment the client entry needs for Nexus to find this home
// and its children's programs: NEXUS_HOME when it is set, and the PATH of the shell
// setup runs in (a client does not start servers in the user's shell).
func entryEnv(e *env) map[string]string {
	env := map[string]string{}
	if p := recordedPath(os.Getenv("PATH")); p != "" {
		env["PATH"] = p
	}
	if os.Getenv("NEXUS_HOME") != "" {
		home, err := filepath.Abs(e.home)
		if err != nil {
			home = e.home
		}
		env["NEXUS_HOME"] = home
	}
	if len(env) == 0 {
		return nil
	}
	return env
}

type setupOutput struct {
	Client        string                 `json:"client"`
	File          string                 `json:"file"`
	DryRun        bool                   `json:"dryRun"`
	Changed       bool                   `json:"changed"`
	Created       bool                   `json:"created"`
	Backup        string                 `json:"backup,omitempty"`
	Diff          string                 `json:"diff,omitempty"`
	Moved         []clients.ImportResult `json:"moved"`
	Stayed        []clients.Stayed       `json:"stayed,omitempty"`
	FileStoreKept bool                   `json:"fileStoreKept,omitempty"` // secrets.insecureFileStore set in the personal config
	Hidden        []hiddenTools          `json:"hidden,omitempty"`        // moved servers' tools the agent's policy hides
}

func (o setupOutput) print(w io.Writer, arg string) {
	if !o.Changed {
		fmt.Fprintf(w, "%s already runs Nexus; nothing to change\n", o.File)
	} else if o.DryRun {
		fmt.Fprint(w, o.Diff)
	}
	if len(o.Moved) > 0 {
		printImport(w, o.Moved, o.DryRun, true)
	}
	if o.DryRun {
		fmt.Fprintln(w, "dry run: nothing was written")
		return
	}
	if o.Changed {
		switch {
		case o.Created:
			fmt.Fprintf(w, "created %s with Nexus in it\n", o.File)
		case o.Backup != "":
			fmt.Fprintf(w, "added Nexus to %s\n", o.File)
			fmt.Fprintf(w, "backup of the original: %s (readable only by you; it holds the original values, tokens included: delete it once the client works with Nexus)\n", o.Backup)
		default:
			fmt.Fprintf(w, "added Nexus to %s\n", o.File)
		}
	}
	var chosen []string
	for _, s := range o.Stayed {
		switch {
		case s.Reason == clients.NotChosen:
			chosen = append(chosen, s.Name)
		case !slices.ContainsFunc(o.Moved, func(r clients.ImportResult) bool { return r.Original == s.Name }):
			fmt.Fprintf(w, "%s stays in the client: %s\n", s.Name, s.Reason) // reported above otherwise
		}
	}
	if len(chosen) > 0 {
		fmt.Fprintf(w, "still run by the client itself: %s (nexus setup %s --move NAME moves one behind Nexus)\n", strings.Join(chosen, ", "), arg)
	}
	if o.Changed {
		fmt.Fprintf(w, "restart %s to connect it to Nexus\n", o.Client)
	}
}

// askMoves asks on the terminal which of the client's servers should move behind Nexus.
func askMoves(tty *os.File, prompt io.Writer, cf clientFile, movable []string) ([]string, error) {
	fmt.Fprintf(prompt, "%s runs %d server(s) itself:\n", cf.Display, len(movable))
	for i, m := range movable {
		fmt.Fprintf(prompt, "  %d) %s\n", i+1, m)
	}
	fmt.Fprintln(prompt, "Moving them behind Nexus imports them into the Nexus config (secrets to the secret store) and takes them out of the client.")
	r := bufio.NewReader(tty)
	for {
		fmt.Fprint(prompt, "Move which? all, none, or numbers or names separated by commas (all): ")
		line, err := r.ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("reading the answer: %w", err)
		}
		if errors.Is(err, io.EOF) && line == "" {
			return nil, usageError("no answer; nothing was written (pass --move-all or --move NAME to decide without asking)")
		}
		answer := strings.TrimSpace(line)
		switch strings.ToLower(answer) {
		case "", "all", "a", "y", "yes":
			return movable, nil
		case "none", "n", "no":
			return nil, nil
		}
		picked, bad := pickMoves(answer, movable)
		if bad == "" {
			return picked, nil
		}
		fmt.Fprintf(prompt, "%q is not one of them\n", bad)
		if errors.Is(err, io.EOF) {
			return nil, usageError("no valid answer; nothing was written")
		}
	}
}

// pickMoves reads an answer of numbers or names separated by commas (or numbers
// separated by spaces); bad is the first part that names none of movable.
func pickMoves(answer string, movable []string) (picked []string, bad string) {
	pick := func(part string) bool {
		part = strings.TrimSpace(part)
		if part == "" {
			return true
		}
		var n int
		if _, err := fmt.Sscanf(part, "%d", &n); err == nil && fmt.Sprint(n) == part {
			if n < 1 || n > len(movable) {
				return false
			}
			part = movable[n-1]
		}
		for _, m := range movable {
			if strings.EqualFold(m, part) || clients.SanitizeName(m) == strings.ToLower(part) {
				if !slices.Contains(picked, m) {
					picked = append(picked, m)
				}
				return true
			}
		}
		return false
	}
	for _, part := range strings.Split(answer, ",") {
		if pick(part) {
			continue
		}
		// "1 2": numbers separated by spaces.
		ok := true
		for _, f := range strings.Fields(part) {
			if !pick(f) {
				ok = false
				break
			}
		}
		if !ok {
			return nil, strings.TrimSpace(part)
		}
	}
	return picked, ""
}

// leftBehind is the exit status of an import or a move: 1 when a server the user
// asked for was not imported (it cannot run behind Nexus, or its secrets could not
// be stored), so that a script sees it; the output above says why. A dry run only
// reports.
func leftBehind(results []clients.ImportResult, moving, dryRun bool) error {
	if dryRun {
		return nil
	}
	n := 0
	for _, r := range results {
		if r.Status == clients.StatusSkipped || r.Status == clients.StatusStayed {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	verb := "imported"
	if moving {
		verb = "moved (they stay in the client)"
	}
	return cli.Exit(fmt.Sprintf("%d server(s) were not %s; see why above", n, verb), 1)
}

// importedNames are the Nexus names of the servers an import wrote.
func importedNames(results []clients.ImportResult) []string {
	var names []string
	for _, r := range results {
		if r.Status == clients.StatusImported {
			names = append(names, r.Name)
		}
	}
	return names
}

// hiddenTools are the tools of one imported server that an agent's policy hides.
type hiddenTools struct {
	Server string   `json:"server"`
	Tools  []string `json:"tools"` // canonical names
	Of     int      `json:"of"`    // the server's tool count
	Error  string   `json:"error,omitempty"`
}

// hiddenTools starts the servers just imported, for a bounded time, and lists
// the tools agent's policy will hide: the default shows read-only tools only,
// so a client's write tools disappear once they run behind Nexus, and the user
// should hear it now rather than find out in the client.
func (e *env) hiddenTools(ctx context.Context, servers []string, agent string) []hiddenTools {
	if len(servers) == 0 {
		return nil
	}
	cfg, err := e.load()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The children's start-up noise is not what this is about: their failures
	// are summed up below.
	log := e.log
	e.log = slog.New(slog.DiscardHandler)
	defer func() { e.log = log }()
	g, err := e.startGateway(ctx, cfg, run.Options{NoMemory: true, WaitFor: servers})
	if err != nil {
		return []hiddenTools{{Server: strings.Join(servers, ", "), Error: err.Error()}}
	}
	defer g.Close()
	state := map[string]aggregation.Status{}
	for _, st := range g.Servers() {
		state[st.Name] = st
	}
	var out []hiddenTools
	for _, name := range servers {
		h := hiddenTools{Server: name}
		if st := state[name]; st.State != aggregation.StateReady {
			h.Error = fmt.Sprintf("it did not start (%s), so its tools are unknown: nexus policy show --agent %s lists them once it runs", st.Error, agent)
			out = append(out, h)
			continue
		}
		for _, t := range g.Tools() {
			if t.Server != name {
				continue
			}
			h.Of++
			if !g.Policy().Decide(agent, policy.Tool{Name: t.Canonical, ReadOnly: t.Hints.ReadOnly, Destructive: t.Hints.Destructive}).Allowed {
				h.Tools = append(h.Tools, t.Canonical)
			}
		}
		if len(h.Tools) > 0 {
			out = append(out, h)
		}
	}
	return out
}

// printHidden says which imported tools the policy hides, and the command that
// grants them.
func printHidden(w io.Writer, hidden []hiddenTools, agent string) {
	who := "--agent " + agent
	if agent == policy.Anonymous {
		who = "--default"
	}
	for _, h := range hidden {
		if h.Error != "" {
			fmt.Fprintf(w, "policy: %s: %s\n", h.Server, h.Error)
			continue
		}
		fmt.Fprintf(w, "policy: agent %s will not see %d of the %d tools of %s (not read-only): %s\n", agent, len(h.Tools), h.Of, h.Server, strings.Join(h.Tools, ", "))
		fmt.Fprintf(w, "  to grant them: nexus policy allow %s %s   (or '%s.*' for all of them)\n", who, strings.Join(h.Tools, " "), h.Server)
	}
}
