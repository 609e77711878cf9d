package aggregation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/upstream"
)

// This file holds what keeps a stdio server from costing anything while nobody
// uses it (config.Lifecycle):
//
//   - A lazy server whose lists were seen before is not started with the gateway:
//     its lists come from what it listed last time, kept on disk under a
//     fingerprint of how it is launched, and it starts on the first request that
//     needs it (a call, a read, a prompt, a subscription). Its lists are read
//     again when it starts; a change goes out as list_changed, as for any child.
//   - A server with no request in flight, no subscription and no client session
//     for its idle timeout is stopped cleanly and is idle again: its tools stay
//     listed, and the next request starts it.
//   - A server running longer than its maximum lifetime is restarted between
//     calls.
//
// Stopping an idle server, or recycling one, is not a crash: it does not count
// towards giving up, and what memory remembers of it stays fresh.

// savedLists are a server's lists as kept on disk between runs.
type savedLists struct {
	// Launch is the fingerprint of how the server is launched (listsKey):
	// lists kept for another command line are never shown.
	Launch       string                 `json:"launch"`
	Saved        time.Time              `json:"saved"`
	Capabilities mcp.ServerCapabilities `json:"capabilities"`
	Instructions string                 `json:"instructions,omitempty"`
	// AsksRoots says the server asks its client for roots as it starts: a
	// client session's first call must wait for that while the server is idle
	// too (awaitRoots).
	AsksRoots bool              `json:"asksRoots,omitempty"`
	Tools     []json.RawMessage `json:"tools"`
	upstream.Listed
}

// listsKey fingerprints how a server is launched: transport, command, arguments,
// the names of its environment variables (never their values), working directory,
// URL, protocol pin and sessions. A server launched otherwise is another server.
func listsKey(s *config.Server) string {
	b, _ := json.Marshal([]any{s.Transport, s.Command, s.Args, slices.Sorted(maps.Keys(s.Env)), s.Cwd, s.URL,
		slices.Sorted(maps.Keys(s.Headers)), s.ProtocolVersion, s.PerClient()})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// listsFile is where the server's lists are kept, or "" when none are.
func (c *child) listsFile() string {
	if c.listsDir == "" {
		return ""
	}
	return filepath.Join(c.listsDir, c.name+".json")
}

// saveLists keeps what the child listed on its own connection, for the next run.
// A failure is logged: the next run then starts the server at once.
func (c *child) saveLists(cn *conn, l listing) {
	file := c.listsFile()
	if file == "" || !cn.Shared {
		return
	}
	c.writeLists(file, savedLists{Launch: listsKey(c.config()), Saved: time.Now().UTC(), Capabilities: cn.Caps,
		Instructions: cn.Instructions, AsksRoots: cn.AskedRoots() || c.rootsAtStart.Load(), Tools: l.raws, Listed: l.extras.listed})
}

// writeLists writes saved to file, and logs a failure: the next run then starts
// the server at once.
func (c *child) writeLists(file string, saved savedLists) {
	b, err := json.Marshal(saved)
	if err == nil {
		// A child that put a secret it was given into a description must
		// not have it written to disk.
		err = config.WriteFileAtomic(file, c.events.redactJSON(b), config.HomeFileMode)
	}
	if err != nil {
		c.log.Warn("keeping the server's lists for its next start failed; it will start with the gateway", "err", err)
	}
}

// resaveLists keeps the lists again with what was learnt since they were
// written: whether the server asks for roots as it starts.
func (c *child) resaveLists() {
	file := c.listsFile()
	if file == "" {
		return
	}
	cn, l := c.life.Current()
	c.mu.Lock()
	said := c.said
	c.mu.Unlock()
	switch {
	case cn != nil && l.raws != nil:
		c.saveLists(cn, l)
	case said != nil && !said.AsksRoots:
		updated := *said
		updated.AsksRoots = true
		c.writeLists(file, updated)
	}
}

// restoreLists shows the lists a lazy server gave last time, and reports
// whether there were any for the way it is launched now.
func (c *child) restoreLists() bool {
	file := c.listsFile()
	if file == "" || !c.events.lifecycle(c.config()).Lazy {
		return false
	}
	b, err := os.ReadFile(file)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			c.log.Warn("reading the server's lists failed; starting it", "err", err)
		}
		return false
	}
	var saved savedLists
	if err := json.Unmarshal(b, &saved); err != nil || saved.Tools == nil {
		c.log.Warn("the server's kept lists are unreadable; starting it", "file", file)
		return false
	}
	if saved.Launch != listsKey(c.config()) {
		return false // kept for another command line
	}
	c.mu.Lock()
	c.said = &saved
	c.mu.Unlock()
	if saved.AsksRoots {
		c.rootsAtStart.Store(true)
	}
	c.life.Set(nil, listing{raws: saved.Tools, extras: c.extrasFrom(saved.Capabilities.Resources != nil, saved.Listed)}, StateIdle, nil, time.Time{})
	c.log.Info("child idle", "tools", len(saved.Tools), "listed", "as it listed last run; it starts on the first request that needs it")
	return true
}

// watch waits while the child's connection serves, and says why it stopped:
// a stdio server of its own is checked for being idle or past its lifetime.
func (c *child) watch(ctx context.Context, cn *conn, started time.Time) upstream.End {
	var tick <-chan time.Time
	if c.config().Transport == config.TransportStdio && cn.Shared {
		t := time.NewTicker(lifecycleCheck)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return upstream.EndShutdown
		case <-cn.Done():
			return upstream.EndExited
		case <-tick:
		}
		life := c.events.lifecycle(c.config()) // a reload may have changed it
		if c.busy(cn) {
			continue
		}
		if up := time.Since(started); life.MaxLifetime > 0 && up >= life.MaxLifetime {
			c.log.Info("recycling the server: it ran for its maxLifetime", "up", up.Round(time.Second))
			return upstream.EndRecycle
		}
		if unused := time.Since(cn.LastUsed()); life.IdleTimeout > 0 && unused >= life.IdleTimeout {
			c.log.Info("stopping the idle server", "idle", unused.Round(time.Second))
			return upstream.EndIdle
		}
	}
}

// lifecycleCheck is how often a running stdio server is checked for being idle or
// past its lifetime: a quarter of the least idle timeout.
const lifecycleCheck = 250 * time.Millisecond

// busy reports whether stopping the child now would lose something: a request in
// flight, a client's subscription, a client session's own connection.
func (c *child) busy(cn *conn) bool {
	return !cn.Idle() || c.ups.Len() > 0 || c.events.subscribed(c.name)
}

// describeIdle is an idle server's state in words.
func describeIdle(since time.Time) string {
	if since.IsZero() {
		return "idle (not started yet)"
	}
	return fmt.Sprintf("idle (stopped %s ago)", time.Since(since).Round(time.Second))
}

// StateText is the state in words: an idle server's says since when.
func (s Status) StateText() string {
	if s.State == StateIdle {
		return describeIdle(s.IdleSince)
	}
	return string(s.State)
}

// Up reports whether the server serves: it is ready, or idle and starts on the
// next request that needs it.
func (s Status) Up() bool { return s.State == StateReady || s.State == StateIdle }

// instructions are what the child told its client to read: the live
// connection's, or, while it is idle, what it said last run.
func (c *child) instructions() string {
	if cn, _ := c.life.Current(); cn != nil {
		return cn.Instructions
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.said != nil {
		return c.said.Instructions
	}
	return ""
}

// redactJSON removes secret values from JSON the gateway keeps on disk.
func (g *Gateway) redactJSON(b []byte) []byte { return g.redact(b) }

// lifecycle is the server's life as the config says now.
func (g *Gateway) lifecycle(s *config.Server) config.Lifecycle {
	if g.listsDir == "" {
		// Without a place to keep lists, a lazy server would be started at
		// once anyway; idle stops still apply.
		life := g.cfg.Load().Lifecycle(s)
		life.Lazy = false
		return life
	}
	return g.cfg.Load().Lifecycle(s)
}

// subscribed reports whether a client holds a subscription to a resource of
// server.
func (g *Gateway) subscribed(server string) bool {
	g.subs.mu.Lock()
	defer g.subs.mu.Unlock()
	for k, subs := range g.subs.m {
		if k.server == server && len(subs) > 0 {
			return true
		}
	}
	return false
}
