package clients

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/secrets"
)

// Import statuses. A server "stayed" because its secrets could not be stored; one
// "skipped" cannot run behind Nexus at all.
const (
	StatusImported = "imported"
	StatusExists   = "exists"
	StatusSkipped  = "skipped"
	StatusStayed   = "stayed"
)

// ImportResult is what became of one client server entry.
type ImportResult struct {
	Original string   `json:"original"`
	Name     string   `json:"name,omitempty"`
	Status   string   `json:"status"` // imported, exists, skipped, stayed
	Secrets  []string `json:"secrets,omitempty"`
	Store    string   `json:"store,omitempty"` // where its secrets went (or would go)
	Notes    []string `json:"notes,omitempty"`
	Error    string   `json:"error,omitempty"`
	Fix      string   `json:"fix,omitempty"`
}

// PlanImport decides the Nexus name of each entry against the servers cfg has: an
// entry whose launch matches a configured server is "exists"; a name taken by
// another server gets a -2, -3... suffix. Entries with Err are "skipped". It returns
// a result per entry and the entries to import.
func PlanImport(cfg *config.Config, ims []Imported) ([]ImportResult, []*Imported, error) {
	taken := map[string]bool{}
	for n := range cfg.Servers {
		taken[n] = true
	}
	var results []ImportResult
	var todo []*Imported
	for i := range ims {
		im := &ims[i]
		r := ImportResult{Original: im.Original, Name: im.Name, Notes: im.Notes}
		if im.Err != nil {
			r.Status, r.Name, r.Error = StatusSkipped, "", im.Err.Error()
			results = append(results, r)
			continue
		}
		if old, ok := cfg.Servers[im.Name]; ok && sameLaunch(old, im.Server) {
			r.Status = StatusExists
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
		r.Status = StatusImported
		r.Secrets = slices.Sorted(maps.Keys(im.Secrets))
		results = append(results, r)
		todo = append(todo, im)
	}
	return results, todo, nil
}

func sameLaunch(a, b *config.Server) bool {
	return a.Transport == b.Transport && a.Command == b.Command && slices.Equal(a.Args, b.Args) && a.URL == b.URL
}

// Importer moves client servers into a Nexus config file, their secrets into a
// secret store, all or nothing.
type Importer struct {
	// Config is the Nexus config file written (the personal one).
	Config string
	// Store opens the secret store; it is called only when a server carries
	// secrets, since most imports need none and a locked keychain should not
	// stop them.
	Store func(context.Context) (secrets.Store, error)
	// StoreName names the store opened ("the OS keychain"), for results and errors.
	StoreName func() string
	Log       *slog.Logger
}

// PlaceSecrets opens the secret store for the servers of todo that carry secrets
// and says in results where their secrets go. When no store is usable those servers
// stay where they are (status "stayed", with the reason and the fix), and the
// others, which need no store, go ahead: it returns the servers that can be
// imported. A dry run calls it too, so that what it promises was checked.
func (im *Importer) PlaceSecrets(ctx context.Context, results []ImportResult, todo []*Imported) []*Imported {
	if !slices.ContainsFunc(todo, func(i *Imported) bool { return len(i.Secrets) > 0 }) {
		return todo
	}
	_, err := im.Store(ctx)
	var keep []*Imported
	for _, s := range todo {
		i := slices.IndexFunc(results, func(r ImportResult) bool { return r.Original == s.Original })
		switch {
		case len(s.Secrets) == 0:
			keep = append(keep, s)
		case err == nil:
			results[i].Store = im.StoreName()
			keep = append(keep, s)
		default:
			msg, fix := splitFix(err.Error())
			results[i].Status = StatusStayed
			results[i].Error = "its secrets cannot be stored: " + msg
			results[i].Fix = fix
		}
	}
	return keep
}

// splitFix parts an error from the secrets package into its first line and the
// "To fix: ..." advice (or the rest).
func splitFix(s string) (msg, fix string) {
	msg, rest, _ := strings.Cut(s, "\n")
	if _, f, ok := strings.Cut(s, "To fix: "); ok {
		return msg, f
	}
	if rest != "" {
		return msg, rest
	}
	return msg, "see the message above"
}

// Import stores the secrets of servers and writes the servers into the config,
// pinned strict (package pins), all or nothing: on a failure the secrets stored
// are deleted again. It returns
// the names of the secrets stored, for Undo.
func (im *Importer) Import(ctx context.Context, servers []*Imported) ([]string, error) {
	all := map[string]string{}
	for _, s := range servers {
		maps.Copy(all, s.Secrets)
	}
	var stored []string
	if len(all) > 0 {
		store, err := im.Store(ctx)
		if err != nil {
			return nil, fmt.Errorf("the servers to import carry secrets (tokens in their env or headers), and they cannot be stored, so nothing was written: %w", err)
		}
		for _, name := range slices.Sorted(maps.Keys(all)) {
			if err := store.Set(ctx, name, all[name]); err != nil {
				im.deleteSecrets(ctx, stored)
				return nil, fmt.Errorf("storing the secret %s in %s, so nothing was written: %w", name, im.StoreName(), err)
			}
			stored = append(stored, name)
		}
	}
	err := config.Edit(im.Config, func(d config.Document) error {
		for _, s := range servers {
			if s.Server.Pin == "" {
				s.Server.Pin = config.PinStrict // someone else wrote it: a changed tool waits for approval
			}
			if err := d.SetServer(s.Name, s.Server); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		im.deleteSecrets(ctx, stored)
		return nil, err
	}
	return stored, nil
}

// Undo takes imported servers out of the config again and deletes their secrets.
func (im *Importer) Undo(ctx context.Context, servers []*Imported, stored []string) {
	err := config.Edit(im.Config, func(d config.Document) error {
		for _, s := range servers {
			d.RemoveServer(s.Name)
		}
		return nil
	})
	if err != nil {
		im.logger().Warn("could not take the imported servers out of the config again; remove them with nexus remove", "err", err)
	}
	im.deleteSecrets(ctx, stored)
}

func (im *Importer) deleteSecrets(ctx context.Context, names []string) {
	if len(names) == 0 {
		return
	}
	store, err := im.Store(ctx)
	if err != nil {
		return
	}
	for _, n := range names {
		if err := store.Delete(ctx, n); err != nil {
			im.logger().Warn("could not delete a secret", "name", n, "err", err)
		}
	}
}

func (im *Importer) logger() *slog.Logger {
	if im.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return im.Log
}

// NotChosen is the reason a server stayed in the client when the user kept it there.
const NotChosen = "not chosen to move"

// Stayed is a server of the client that still runs in the client, and why.
type Stayed struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Connection is what connecting a client did (or, in a dry run, would do).
type Connection struct {
	Changed bool
	Created bool
	Backup  string
	Diff    string
	Moved   []ImportResult
	Stayed  []Stayed
}

// ConnectOptions say how to connect a client.
type ConnectOptions struct {
	Format Format
	// Move names the client's servers to move behind Nexus.
	Move   []string
	DryRun bool
	// Config is the Nexus config the moved servers join, and ConfigErr why it
	// could not be loaded: with servers to move, a broken config stops everything.
	Config    *config.Config
	ConfigErr error
}

// Connect adds the Nexus entry to the client file at path and moves the servers
// opts.Move names behind Nexus, in an order that leaves nothing half done:
//  1. a dry run of the client edit, which refuses a file it cannot edit;
//  2. the import planned and the secret store checked; a server whose secrets
//     cannot be stored stays in the client;
//  3. the servers and secrets written into Nexus;
//  4. the client file written (after its backup); if that fails, step 3 is undone.
func (im *Importer) Connect(ctx context.Context, path string, entry Entry, opts ConnectOptions) (*Connection, error) {
	servers, err := clientServers(path, opts.Format, entry.Name)
	if err != nil {
		return nil, err
	}
	for _, m := range opts.Move {
		i := slices.IndexFunc(servers, func(s Imported) bool { return s.Original == m })
		if i < 0 {
			return nil, fmt.Errorf("%s has no server %q; it has: %s", path, m, strings.Join(originals(servers), ", "))
		}
		if servers[i].Err != nil {
			return nil, fmt.Errorf("%s cannot run behind Nexus (leave it in the client, or fix it): %w", m, servers[i].Err)
		}
	}
	move := slices.Clone(opts.Move)
	setup := func(dry bool) (*Result, error) {
		return Setup(path, entry, SetupOptions{Format: opts.Format, DryRun: dry, Move: move})
	}
	res, err := setup(true)
	if err != nil {
		return nil, err
	}
	if opts.ConfigErr != nil && len(res.Moved) > 0 {
		return nil, fmt.Errorf("the Nexus config is broken, so no server can move into it and nothing was written; fix it first (nexus doctor): %w", opts.ConfigErr)
	}
	var results []ImportResult
	var todo []*Imported
	if len(res.Moved) > 0 {
		if results, todo, err = PlanImport(opts.Config, res.Moved); err != nil {
			return nil, err
		}
		todo = im.PlaceSecrets(ctx, results, todo)
		held := false
		for _, r := range results {
			if r.Status == StatusStayed {
				move = slices.DeleteFunc(move, func(m string) bool { return m == r.Original })
				held = true
			}
		}
		if held {
			if res, err = setup(true); err != nil {
				return nil, err
			}
		}
	}
	out := &Connection{Changed: res.Changed, Created: res.Created, Diff: res.Diff, Moved: results}
	if !opts.DryRun && res.Changed {
		var stored []string
		if len(todo) > 0 {
			if stored, err = im.Import(ctx, todo); err != nil {
				return nil, err
			}
		}
		written, err := setup(false)
		if err != nil {
			if len(todo) > 0 {
				im.Undo(ctx, todo, stored)
			}
			return nil, fmt.Errorf("%w\n(the Nexus config is as it was)", err)
		}
		out.Backup, out.Diff = written.Backup, written.Diff
	}
	for _, s := range servers {
		if slices.Contains(move, s.Original) {
			continue
		}
		reason := NotChosen
		if i := slices.IndexFunc(results, func(r ImportResult) bool { return r.Original == s.Original }); i >= 0 {
			reason = results[i].Error
		} else if s.Err != nil {
			reason = "it cannot run behind Nexus: " + s.Err.Error()
		}
		out.Stayed = append(out.Stayed, Stayed{Name: s.Original, Reason: reason})
	}
	return out, nil
}

// Movable lists the servers of the client file at path that can move behind
// Nexus, leaving out the Nexus entry itself (named skip). A missing file has none.
func Movable(path string, format Format, skip string) ([]string, error) {
	servers, err := clientServers(path, format, skip)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range servers {
		if s.Err == nil {
			out = append(out, s.Original)
		}
	}
	return out, nil
}

// clientServers reads the servers of the client file at path, without the one
// named skip; a missing file has none.
func clientServers(path string, format Format, skip string) ([]Imported, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	servers, err := ReadServersAs(path, format)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(servers, func(s Imported) bool { return s.Original == skip }), nil
}

func originals(servers []Imported) []string {
	out := make([]string, 0, len(servers))
	for _, s := range servers {
		out = append(out, s.Original)
	}
	return out
}
