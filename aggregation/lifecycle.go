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
func (c *child) saveLists(cn *conn, raws []json.RawMessage, ex extras) {
	file := c.listsFile()
	if file == "" || cn.owner != nil {
		return
	}
	c.writeLists(file, savedLists{Launch: listsKey(c.config()), Saved: time.Now().UTC(), Capabilities: cn.Caps,
		Instructions: cn.Instructions, AsksRoots: cn.AskedRoots() || c.rootsAtStart.Load(), Tools: raws, Listed: ex.listed})
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
	c.mu.Lock()
	cn, raws, ex, said := c.conn, c.raws, c.extras, c.said
	c.mu.Unlock()
	switch {
	case cn != nil && raws != nil:
		c.saveLists(cn, raws, ex)
	case said != nil && !said.AsksRoots:
		updated := *said
		updated.AsksRoots = true
		c.writeLists(file, updated)
	}
}

// restoreLists shows the lists the server gave last time, and reports whether
// there were any for the way it is launched now.
func (c *child) restoreLists() bool {
	file := c.listsFile()
	if file == "" {
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
	c.set(nil, saved.Tools, c.extrasFrom(saved.Capabilities.Resources != nil, saved.Listed), StateIdle, nil, time.Time{})
	c.log.Info("child idle", "tools", len(saved.Tools), "listed", "as it listed last run; it starts on the first request that needs it")
	return true
}

// setState changes the child's state (and its error) and keeps its lists: an
// idle child's tools stay listed, and nothing is decoded again.
func (c *child) setState(state State, err error) {
	c.mu.Lock()
	c.state, c.lastErr, c.nextRetry = state, err, time.Time{}
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// wake asks an idle child to start.
func (c *child) wake() {
	select {
	case c.wakec <- struct{}{}:
	default:
	}
}

// idle keeps the child idle (its lists shown, no process) until a request needs
// it, and reports false when ctx ended first. stopped is when it was stopped,
// zero for a server not started yet.
func (c *child) idle(ctx context.Context, stopped time.Time) bool {
	// A wake already waiting is a request that came as the child stopped: it
	// starts the child again at once.
	c.mu.Lock()
	if c.idleSince.IsZero() || stopped.IsZero() {
		c.idleSince = stopped
	}
	c.mu.Unlock()
	c.setState(StateIdle, nil)
	c.settle()
	c.log.Debug("server idle", "stopped", !stopped.IsZero())
	select {
	case <-ctx.Done():
		return false
	case <-c.wakec:
	}
	c.setState(StateConnecting, nil) // its tools stay listed while it starts
	return true
}

// Why watch returned.
type watchEnd int

const (
	endShutdown watchEnd = iota // the gateway is stopping the child
	endExited                   // the connection ended on its own
	endIdle                     // unused for its idle timeout
	endRecycle                  // past its maximum lifetime, between calls
)

// watch waits while the child's connection serves, and says why it stopped.
func (c *child) watch(ctx context.Context, cn *conn, started time.Time) watchEnd {
	var tick <-chan time.Time
	if c.config().Transport == config.TransportStdio && cn.owner == nil {
		t := time.NewTicker(lifecycleCheck)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return endShutdown
		case <-cn.Done():
			return endExited
		case <-tick:
		}
		life := c.events.lifecycle(c.config()) // a reload may have changed it
		if c.busy(cn) {
			continue
		}
		if life.MaxLifetime > 0 && time.Since(started) >= life.MaxLifetime {
			return endRecycle
		}
		if life.IdleTimeout > 0 && time.Since(cn.LastUsed()) >= life.IdleTimeout {
			return endIdle
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

// retire takes cn out of service (state is what the child is meanwhile), lets a
// request that took it just before finish, up to the server's call timeout, and
// closes it.
func (c *child) retire(ctx context.Context, cn *conn, state State, why error) {
	c.mu.Lock()
	raws, ex := c.raws, c.extras
	c.mu.Unlock()
	c.saveLists(cn, raws, ex) // with what was learnt since, as whether it asks for roots
	c.mu.Lock()
	c.conn = nil
	if state == StateIdle {
		c.idleSince = time.Now()
	}
	c.mu.Unlock()
	c.setState(state, why)
	deadline := time.Now().Add(c.config().CallTimeout())
	for !cn.Idle() && time.Now().Before(deadline) {
		if !sleep(ctx, 10*time.Millisecond) {
			break
		}
	}
	cn.Close()
	<-cn.Done()
}

// errRecycled is why a recycled server restarts.
var errRecycled = errors.New("restarting: it ran for its maxLifetime")

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
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.conn != nil:
		return c.conn.Instructions
	case c.said != nil:
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
