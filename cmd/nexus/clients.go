package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/nexus-mcp/nexus/clients"
	"github.com/nexus-mcp/nexus/config"
)

// clientFile is the config file of a client named on the command line.
type clientFile struct {
	Name    string // "claude-desktop", or "" for a file given by path
	Display string
	Path    string
	Format  clients.Format
}

// resolveClient turns claude-desktop|cursor|vscode|FILE into a file. A known client's
// file is where that client keeps it on this OS, for the user in HOME.
func resolveClient(arg string) (clientFile, error) {
	if !strings.ContainsAny(arg, `/\`) && !strings.HasSuffix(strings.ToLower(arg), ".json") {
		home, err := os.UserHomeDir()
		if err != nil {
			return clientFile{}, fmt.Errorf("finding your home directory (set HOME): %w", err)
		}
		cl, err := clients.Find(arg, runtime.GOOS, home, os.Getenv)
		if err != nil {
			return clientFile{}, usageError(err.Error())
		}
		return clientFile{Name: cl.Name, Display: cl.Display, Path: cl.Path, Format: cl.Format}, nil
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

// importResult is what became of one client server entry.
type importResult struct {
	Original string   `json:"original"`
	Name     string   `json:"name,omitempty"`
	Status   string   `json:"status"` // imported, exists, skipped, stayed
	Secrets  []string `json:"secrets,omitempty"`
	Store    string   `json:"store,omitempty"` // where its secrets went (or would go)
	Notes    []string `json:"notes,omitempty"`
	Error    string   `json:"error,omitempty"`
	Fix      string   `json:"fix,omitempty"`
}

// Import statuses. A server "stayed" because its secrets could not be stored; one
// "skipped" cannot run behind Nexus at all.
const (
	statusImported = "imported"
	statusExists   = "exists"
	statusSkipped  = "skipped"
	statusStayed   = "stayed"
)

// plannedImport decides the Nexus name of each entry: an entry whose launch matches a
// configured server is "exists"; a name taken by another server gets a -2, -3...
// suffix. Entries with Err are "skipped".
func plannedImport(cfg *config.Config, ims []clients.Imported) ([]importResult, []*clients.Imported, error) {
	taken := map[string]bool{}
	for n := range cfg.Servers {
		taken[n] = true
	}
	var results []importResult
	var todo []*clients.Imported
	for i := range ims {
		im := &ims[i]
		r := importResult{Original: im.Original, Name: im.Name, Notes: im.Notes}
		if im.Err != nil {
			r.Status, r.Name, r.Error = statusSkipped, "", im.Err.Error()
			results = append(results, r)
			continue
		}
		if old, ok := cfg.Servers[im.Name]; ok && sameLaunch(old, im.Server) {
			r.Status = statusExists
			results = append(results, r)
			continue
		}
		if taken[im.Name] {
			base := im.Name
			name := base
			for n := 2; taken[name]; n++ {
				suffix := fmt.Sprintf("-%d", n)
				name = base
				if len(name)+len(suffix) > 32 {
					name = strings.TrimRight(name[:32-len(suffix)], "-")
				}
				name += suffix
			}
			if err := im.Rename(name); err != nil {
				return nil, nil, err
			}
			r.Name = name
			r.Notes = append(r.Notes, fmt.Sprintf("a server named %s exists already, so this one is %s", base, name))
		}
		taken[im.Name] = true
		r.Status = statusImported
		r.Secrets = slices.Sorted(maps.Keys(im.Secrets))
		results = append(results, r)
		todo = append(todo, im)
	}
	return results, todo, nil
}

func sameLaunch(a, b *config.Server) bool {
	return a.Transport == b.Transport && a.Command == b.Command && slices.Equal(a.Args, b.Args) && a.URL == b.URL
}

// placeSecrets opens the secret store for the servers of todo that carry secrets,
// and says in results where their secrets go. When no store is usable, those servers
// stay where they are (status "stayed", with the reason and the fix) and the others,
// which need no store, go ahead: it returns the servers that can be imported. A dry
// run calls it too, so that what it promises was checked.
func (e *env) placeSecrets(ctx context.Context, cfg *config.Config, results []importResult, todo []*clients.Imported) []*clients.Imported {
	if !slices.ContainsFunc(todo, func(im *clients.Imported) bool { return len(im.Secrets) > 0 }) {
		return todo
	}
	_, err := e.secrets(ctx, cfg)
	var keep []*clients.Imported
	for _, im := range todo {
		i := slices.IndexFunc(results, func(r importResult) bool { return r.Original == im.Original })
		switch {
		case len(im.Secrets) == 0:
			keep = append(keep, im)
		case err == nil:
			results[i].Store = e.storeName()
			keep = append(keep, im)
		default:
			results[i].Status = statusStayed
			results[i].Error = "its secrets cannot be stored: " + firstLine(err.Error())
			results[i].Fix = fixPart(err.Error())
		}
	}
	return keep
}

// importInto stores the secrets of ims and writes them into the personal config, all or
// nothing. Call placeSecrets first. It returns the secrets stored, for undoing.
func (e *env) importInto(c *cli.Context, ims []*clients.Imported) ([]string, error) {
	all := map[string]string{}
	for _, im := range ims {
		for k, v := range im.Secrets {
			all[k] = v
		}
	}
	var stored []string
	if len(all) > 0 {
		store, err := e.secrets(c.Context, nil)
		if err != nil {
			return nil, fmt.Errorf("the servers to import carry secrets (tokens in their env or headers), and they cannot be stored, so nothing was written: %w", err)
		}
		for _, name := range slices.Sorted(maps.Keys(all)) {
			if err := store.Set(c.Context, name, all[name]); err != nil {
				e.deleteSecrets(c.Context, stored)
				return nil, fmt.Errorf("storing the secret %s in %s, so nothing was written: %w", name, e.storeName(), err)
			}
			stored = append(stored, name)
		}
	}
	err := config.Edit(e.personal, func(d config.Document) error {
		for _, im := range ims {
			if err := d.SetServer(im.Name, im.Server); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		e.deleteSecrets(c.Context, stored)
		return nil, err
	}
	return stored, nil
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

// undoImport takes imported servers out of the personal config again.
func (e *env) undoImport(c *cli.Context, ims []*clients.Imported, stored []string) {
	err := config.Edit(e.personal, func(d config.Document) error {
		for _, im := range ims {
			d.RemoveServer(im.Name)
		}
		return nil
	})
	if err != nil {
		e.log.Warn("could not take the imported servers out of the config again; remove them with nexus remove", "err", err)
	}
	e.deleteSecrets(c.Context, stored)
}

func printImport(w io.Writer, results []importResult, dryRun, moving bool) {
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
		case statusSkipped:
			fmt.Fprintf(w, "skipped %s: %s\n", r.Original, r.Error)
		case statusExists:
			fmt.Fprintf(w, "%s is already configured in Nexus as %s\n", r.Original, r.Name)
		case statusStayed:
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
		ArgsUsage: "claude-desktop|cursor|vscode|FILE",
		Description: "Reads the client's server entries (\"mcpServers\", or VS Code's \"servers\") and\n" +
			"adds each to $NEXUS_HOME/config.json. Env values and headers that look like\n" +
			"credentials are stored in the OS keychain (or, with --insecure-file-store and no\n" +
			"keychain, in a file readable only by you, a choice then kept in the personal\n" +
			"config); the config holds ${keyring:...} references. Without a usable store,\n" +
			"servers without secrets are still imported and the others are not, with why.\n" +
			"The client's file is not changed (nexus setup CLIENT --move-all also takes the\n" +
			"servers out of the client).",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "dry-run", Usage: "show what would be imported and write nothing"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: func(c *cli.Context) error {
			if c.Args().Len() != 1 {
				return usageError("import takes one client: claude-desktop, cursor, vscode, or the path of a client config FILE")
			}
			e, err := newEnv(c, slog.LevelWarn)
			if err != nil {
				return err
			}
			cf, err := resolveClient(c.Args().First())
			if err != nil {
				return err
			}
			ims, err := clients.ReadServers(cf.Path)
			if err != nil {
				return err
			}
			cfg, err := e.load()
			if err != nil {
				return fmt.Errorf("the Nexus config is broken, so nothing was imported; fix it first (nexus doctor): %w", err)
			}
			results, todo, err := plannedImport(cfg, ims)
			if err != nil {
				return err
			}
			dry := c.Bool("dry-run")
			todo = e.placeSecrets(c.Context, cfg, results, todo)
			if !dry && len(todo) > 0 {
				if _, err := e.importInto(c, todo); err != nil {
					return err
				}
			}
			kept, err := e.keepFileStore(c.Context, cfg, dry)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return printJSON(e.stdout, map[string]any{"file": cf.Path, "dryRun": dry, "servers": nonNil(results), "fileStoreKept": kept})
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
			return nil
		},
	}
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
		Usage:     "connect a client (Claude Desktop, Cursor, VS Code) to Nexus by adding Nexus to its config file",
		ArgsUsage: "claude-desktop|cursor|vscode|FILE",
		Description: "Adds a \"nexus\" server entry running `nexus serve` to the client's config file,\n" +
			"keeping every other key, after copying the file to FILE.nexus-backup-TIME (0600:\n" +
			"it holds the original values, tokens included). The entry carries NEXUS_HOME\n" +
			"when it is set. The servers the client already runs can move behind Nexus: they\n" +
			"are imported into the Nexus config (secrets to the keychain, or the file store as\n" +
			"for import) and taken out of the client; a server whose secrets cannot be stored\n" +
			"stays in the client, and the output says why. On a terminal, setup asks which\n" +
			"to move; --move-all or --move NAME decide without asking. --dry-run checks the\n" +
			"secret store, shows the diff and writes nothing.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "agent", Usage: "the client connects as agent `NAME` (its policy applies)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "show the diff and write nothing (neither the client file nor the Nexus config)"},
			&cli.BoolFlag{Name: "move-all", Usage: "move every server of the client behind Nexus"},
			&cli.StringSliceFlag{Name: "move", Usage: "move the client's server `NAME` behind Nexus (repeatable)"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON (never asks)"},
		},
		Action: func(c *cli.Context) error {
			if c.Args().Len() != 1 {
				return usageError("setup takes one client: claude-desktop, cursor, vscode, or the path of a client config FILE")
			}
			agent := c.String("agent")
			if err := checkAgent(agent); err != nil {
				return err
			}
			if c.Bool("move-all") && c.IsSet("move") {
				return usageError("give --move-all or --move NAME, not both")
			}
			e, err := newEnv(c, slog.LevelWarn)
			if err != nil {
				return err
			}
			cf, err := resolveClient(c.Args().First())
			if err != nil {
				return err
			}
			exe, err := selfPath()
			if err != nil {
				return err
			}
			entry := clients.NexusEntry(exe, agent)
			entry.Env = entryEnv(e)

			// The servers the client runs now, which may move behind Nexus.
			var ims []clients.Imported
			if _, err := os.Stat(cf.Path); err == nil {
				if ims, err = clients.ReadServers(cf.Path); err != nil {
					return err
				}
			} else if !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("reading %s: %w", cf.Path, err)
			}
			ims = slices.DeleteFunc(ims, func(im clients.Imported) bool { return im.Original == entry.Name })
			var movable []string
			for _, im := range ims {
				if im.Err == nil {
					movable = append(movable, im.Original)
				}
			}
			var move []string
			switch {
			case c.Bool("move-all"):
				move = movable
			case c.IsSet("move"):
				for _, m := range c.StringSlice("move") {
					i := slices.IndexFunc(ims, func(im clients.Imported) bool { return im.Original == m })
					if i < 0 {
						return usageError(fmt.Sprintf("--move %s: %s has no server %q; it has: %s", m, cf.Path, m, strings.Join(names(ims), ", ")))
					}
					if ims[i].Err != nil {
						return fmt.Errorf("--move %s: it cannot run behind Nexus (leave it in the client, or fix it): %w", m, ims[i].Err)
					}
					if !slices.Contains(move, m) {
						move = append(move, m)
					}
				}
			default:
				if tty, ok := stdinTerminal(c.App.Reader); ok && !c.Bool("json") && len(movable) > 0 {
					if move, err = askMoves(tty, e.stderr, cf, movable); err != nil {
						return err
					}
				}
			}

			// A dry run first: it refuses a file it cannot edit before anything is written.
			res, err := clients.Setup(cf.Path, entry, clients.SetupOptions{Format: cf.Format, DryRun: true, Move: move})
			if err != nil {
				return err
			}
			cfg, err := e.load()
			if err != nil && len(res.Moved) > 0 {
				return fmt.Errorf("the Nexus config is broken, so no server can move into it and nothing was written; fix it first (nexus doctor): %w", err)
			}
			dry := c.Bool("dry-run")
			var results []importResult
			var todo []*clients.Imported
			if len(res.Moved) > 0 {
				if results, todo, err = plannedImport(cfg, res.Moved); err != nil {
					return err
				}
				todo = e.placeSecrets(c.Context, cfg, results, todo)
				// A server whose secrets cannot be stored stays in the client.
				held := false
				for _, r := range results {
					if r.Status == statusStayed {
						move = slices.DeleteFunc(move, func(m string) bool { return m == r.Original })
						held = true
					}
				}
				if held {
					if res, err = clients.Setup(cf.Path, entry, clients.SetupOptions{Format: cf.Format, DryRun: true, Move: move}); err != nil {
						return err
					}
				}
			}
			out := setupOutput{Client: cf.Display, File: cf.Path, DryRun: dry, Changed: res.Changed, Created: res.Created,
				Diff: res.Diff, Moved: nonNil(results)}
			if !dry && res.Changed {
				var stored []string
				if len(todo) > 0 {
					if stored, err = e.importInto(c, todo); err != nil {
						return err
					}
				}
				real, err := clients.Setup(cf.Path, entry, clients.SetupOptions{Format: cf.Format, Move: move})
				if err != nil {
					if len(todo) > 0 {
						e.undoImport(c, todo, stored)
					}
					return fmt.Errorf("%w\n(the Nexus config is as it was)", err)
				}
				out.Backup, out.Diff = real.Backup, real.Diff
			}
			// Kept once the rest is written: the entry just written runs Nexus, which
			// must open the store the secrets went to.
			if out.FileStoreKept, err = e.keepFileStore(c.Context, cfg, dry); err != nil {
				return err
			}
			for _, im := range ims {
				if slices.Contains(move, im.Original) {
					continue
				}
				reason := notChosen
				if i := slices.IndexFunc(results, func(r importResult) bool { return r.Original == im.Original }); i >= 0 {
					reason = results[i].Error
				} else if im.Err != nil {
					reason = "it cannot run behind Nexus: " + im.Err.Error()
				}
				out.Stayed = append(out.Stayed, stayedServer{Name: im.Original, Reason: reason})
			}
			if c.Bool("json") {
				return printJSON(e.stdout, out)
			}
			if out.FileStoreKept {
				e.fileStoreWarning(e.stdout, dry)
			}
			out.print(e.stdout, c.Args().First())
			return nil
		},
	}
}

// entryEnv is the environment the client entry needs for Nexus to find this home:
// NEXUS_HOME when it is set (a client does not start servers in the user's shell).
func entryEnv(e *env) map[string]string {
	if os.Getenv("NEXUS_HOME") == "" {
		return nil
	}
	home, err := filepath.Abs(e.home)
	if err != nil {
		home = e.home
	}
	return map[string]string{"NEXUS_HOME": home}
}

type setupOutput struct {
	Client        string         `json:"client"`
	File          string         `json:"file"`
	DryRun        bool           `json:"dryRun"`
	Changed       bool           `json:"changed"`
	Created       bool           `json:"created"`
	Backup        string         `json:"backup,omitempty"`
	Diff          string         `json:"diff,omitempty"`
	Moved         []importResult `json:"moved"`
	Stayed        []stayedServer `json:"stayed,omitempty"`
	FileStoreKept bool           `json:"fileStoreKept,omitempty"` // secrets.insecureFileStore set in the personal config
}

// notChosen is the reason a server stayed in the client when the user kept it there.
const notChosen = "not chosen to move"

// stayedServer is a server of the client that still runs in the client, and why.
type stayedServer struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
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
		case s.Reason == notChosen:
			chosen = append(chosen, s.Name)
		case !slices.ContainsFunc(o.Moved, func(r importResult) bool { return r.Original == s.Name }):
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

func names(ims []clients.Imported) []string {
	var out []string
	for _, im := range ims {
		out = append(out, im.Original)
	}
	return out
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
