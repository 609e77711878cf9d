package pins

import (
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// Guard reviews the listings of a running gateway's servers against the pin
// file, records what it sees there, and fails closed: while the file cannot be
// trusted, nothing of any server it guards is listed.
type Guard struct {
	path string
	log  *slog.Logger

	mu   sync.Mutex
	file *File
	err  error             // why the file cannot be trusted; nil when it can
	told map[string]string // per server, what was last logged of its review
}

// Open loads the pin file at path. A file that cannot be trusted is an error
// (serve refuses to start with it: *FileError names the file and line).
func Open(path string, log *slog.Logger) (*Guard, error) {
	f, err := Load(path)
	if err != nil {
		return nil, err
	}
	return &Guard{path: path, log: log, file: f, told: map[string]string{}}, nil
}

// Path is the pin file the guard keeps.
func (g *Guard) Path() string { return g.path }

// Reload reads the pin file again (after an approval, or an edit). A file that
// can no longer be trusted is logged and holds every tool until it is fixed.
func (g *Guard) Reload() error {
	f, err := Load(g.path)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		if g.err == nil || g.err.Error() != err.Error() {
			g.log.Error("the pin file cannot be trusted: no server's tools are listed until it is fixed", "err", err)
		}
		g.err = err
		return err
	}
	g.file, g.err = f, nil
	return nil
}

// Admit reviews one listing of server's tools (review) under mode, with the
// pins a team config layer ships (tool name -> sha256). A fresh listing (one the
// server just gave) is recorded in the pin file; one reviewed again, after a
// reload or an approval, is not: each gateway of a home writes only what its
// own servers list, so one's write, which makes the others reload, never makes
// them write in turn. It logs a server's held and unapproved tools when they
// change.
func (g *Guard) Admit(server string, mode Mode, team map[string]string, listed []json.RawMessage, fresh bool) Admission {
	if mode == Off {
		return Admission{Tools: listed}
	}
	l := newListing(listed)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return Admission{}
	}
	now := time.Now().UTC()
	if !fresh {
		a, _ := review(g.file.clone(), server, mode, team, l, now)
		g.tell(server, a)
		return a
	}
	a, changed := review(g.file, server, mode, team, l, now)
	if changed {
		// The file on disk may be newer (an approval this gateway has not
		// reloaded yet): what it says decides.
		var fromDisk Admission
		f, err := Update(g.path, func(f *File) (bool, error) {
			var changed bool
			fromDisk, changed = review(f, server, mode, team, l, now)
			return changed, nil
		})
		var fe *FileError
		switch {
		case errors.As(err, &fe):
			g.log.Error("the pin file cannot be trusted: no server's tools are listed until it is fixed", "err", err)
			g.err = err
			return Admission{}
		case err != nil:
			g.log.Warn("the pins of a server could not be saved; they hold in this gateway", "server", server, "err", err)
		default:
			g.file, a = f, fromDisk
		}
	}
	g.tell(server, a)
	return a
}

// tell logs a server's held and unapproved tools once per change.
func (g *Guard) tell(server string, a Admission) {
	held, loose := names(a.Held), names(a.Unapproved)
	key := strings.Join(held, ",") + "|" + strings.Join(loose, ",")
	if g.told[server] == key {
		return
	}
	g.told[server] = key
	if len(held) > 0 {
		g.log.Warn("tools held: they changed, are new or were renamed since they were approved, and are not listed until approved",
			"server", server, "tools", strings.Join(held, ", "), "see", "nexus tools diff "+server, "accept", "nexus tools approve "+server)
	}
	if len(loose) > 0 {
		g.log.Warn("tools listed without approval (pin: warn), with their approved hints: they changed, are new or were renamed",
			"server", server, "tools", strings.Join(loose, ", "), "see", "nexus tools diff "+server, "accept", "nexus tools approve "+server)
	}
}

// Err is why the pin file cannot be trusted, nil when it can.
func (g *Guard) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// Seen reports whether the pin file knows server: its tools were listed, or
// approved, before.
func (g *Guard) Seen(server string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.file.Servers[server] != nil
}

func names(cs []Change) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Tool
	}
	slices.Sort(out)
	return out
}
