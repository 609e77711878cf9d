package run

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/nexus-mcp/nexus/aggregation"
)

// reloader applies config edits to a serving gateway. An invalid edit is logged and
// ignored. A config file the running config was read from that has gone missing is
// not read as empty at once: an editor that saves by deleting and rewriting, or a
// sync tool, removes it for a moment, and an empty personal layer would stop every
// child, drop every agent token and serve loopback anonymously until it returned.
// The running config stays until the file returns or reload.missingGrace passes;
// then the gateway says so loudly and applies the config without it.
type reloader struct {
	e Env
	g *aggregation.Gateway
	// now is the clock (time.Now; a test may set another).
	now func() time.Time
	// recheck receives when a grace period ends: serve reloads then, even though
	// no file changed.
	recheck chan struct{}

	mu      sync.Mutex
	missing map[string]time.Time // file -> when it was first seen missing
	timer   *time.Timer
}

func newReloader(e Env, g *aggregation.Gateway) *reloader {
	return &reloader{e: e, g: g, now: time.Now, recheck: make(chan struct{}, 1), missing: map[string]time.Time{}}
}

// stop cancels a pending grace timer.
func (r *reloader) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.timer != nil {
		r.timer.Stop()
	}
}

// reload applies the config files as they are now, unless one the running config
// came from is missing and its grace has not passed.
func (r *reloader) reload() {
	if r.waitForMissing() {
		return
	}
	reload(r.e, r.g)
}

// waitForMissing reports whether the running config must stay because a file it
// was read from is missing, and schedules the recheck at the end of its grace.
func (r *reloader) waitForMissing() bool {
	running := r.g.Config()
	grace := running.Reload.Grace()
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	var gone []string
	for _, f := range running.Layers {
		if _, err := os.Stat(f); errors.Is(err, fs.ErrNotExist) {
			gone = append(gone, f)
		}
	}
	for f := range r.missing {
		if !slices.Contains(gone, f) {
			delete(r.missing, f) // back (or no longer part of the running config)
		}
	}
	wait := time.Duration(0)
	for _, f := range gone {
		since, seen := r.missing[f]
		if !seen {
			since = now
			r.missing[f] = now
			r.e.Logger.Warn("a config file is missing: the running config stays until it returns",
				"file", f, "grace", grace)
		}
		if left := since.Add(grace).Sub(now); left > 0 {
			wait = max(wait, left)
			continue
		}
		r.e.Logger.Error("a config file has been missing for longer than reload.missingGrace: applying the config without it (its servers stop, its agents and tokens are dropped)",
			"file", f, "missing_for", now.Sub(since).Round(time.Millisecond))
	}
	if wait == 0 {
		return false
	}
	if r.timer != nil {
		r.timer.Stop()
	}
	r.timer = time.AfterFunc(wait, func() {
		select {
		case r.recheck <- struct{}{}:
		default:
		}
	})
	return true
}
