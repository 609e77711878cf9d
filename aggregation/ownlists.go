package aggregation

import (
	"context"
	"maps"
	"sync"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/policy"
	"github.com/nexus-mcp/nexus/upstream"
)

// A server with "sessions": "client" gives each client session a connection of
// its own (clientconns.go), and may list different things on each: a resource that
// one client's connection created, a tool it turned on for that client alone. A
// client connected directly would see them in its lists; through Nexus it sees
// them too. When a session's connection says one of its lists changed, that list
// is read from the connection, and the session is shown it in place of the
// server's common one (read from the child's own connection) until the
// connection closes. A connection that never says its lists changed is taken to
// list what the child's own connection lists: reading every list of every new
// connection would cost each client session's first call four round trips.

// ownLists are what one session's connection to a server listed.
type ownLists struct {
	tools  []*Tool // nil: never read, the server's common tools stand
	extras *extras // nil: never read
}

// ownState holds a session's own lists, by server, and the manifest and view
// merged from them over the common ones, built again when the common manifest,
// the policy or the config changes.
type ownState struct {
	mu    sync.Mutex
	lists map[string]ownLists

	base *manifest // the common manifest man was merged over
	pol  *policy.Policy
	cfg  *config.Config
	man  *manifest
	view *view
}

// lists are the manifest and view the session is shown: its agent's, or, once one
// of its connections listed lists of its own, those merged with them.
func (s *session) lists() (*manifest, *view) {
	g := s.g
	s.own.mu.Lock()
	defer s.own.mu.Unlock()
	if len(s.own.lists) == 0 {
		return g.lists.current(), g.view(s.agent)
	}
	base, pol, cfg := g.lists.current(), g.pol.Load(), g.cfg.Load()
	if s.own.man != nil && s.own.base == base && s.own.pol == pol && s.own.cfg == cfg {
		return s.own.man, s.own.view
	}
	perServer, perExtras := maps.Clone(base.perServer), maps.Clone(base.perExtras)
	for server, l := range s.own.lists {
		if _, ok := perServer[server]; !ok {
			continue // no longer configured
		}
		if l.tools != nil {
			perServer[server] = l.tools
		}
		if l.extras != nil {
			perExtras[server] = *l.extras
		}
	}
	m, _ := buildManifest(perServer, perExtras) // a clash is the common manifest's too, and logged there
	s.own.base, s.own.pol, s.own.cfg, s.own.man = base, pol, cfg, m
	s.own.view = buildView(m, pol, s.agent, g.searchOptions(cfg, s.agent))
	return s.own.man, s.own.view
}

// view is the session's view (lists).
func (s *session) view() *view {
	_, v := s.lists()
	return v
}

// setOwn records what the session's connection to server listed; a nil part
// keeps what was recorded before.
func (s *session) setOwn(server string, tools []*Tool, ex *extras) {
	s.own.mu.Lock()
	defer s.own.mu.Unlock()
	if s.own.lists == nil {
		s.own.lists = map[string]ownLists{}
	}
	l := s.own.lists[server]
	if tools != nil {
		l.tools = tools
	}
	if ex != nil {
		l.extras = ex
	}
	s.own.lists[server] = l
	s.own.man = nil
}

// dropOwn forgets the session's own lists of server (its connection closed), and
// reports whether there were any.
func (s *session) dropOwn(server string) bool {
	s.own.mu.Lock()
	defer s.own.mu.Unlock()
	if _, ok := s.own.lists[server]; !ok {
		return false
	}
	delete(s.own.lists, server)
	s.own.man = nil
	return true
}

// manifestOf is the manifest a caller's session is shown; the common one for a
// call without a client.
func (g *Gateway) manifestOf(s *session) *manifest {
	if s == nil {
		return g.lists.current()
	}
	s.own.mu.Lock()
	none := len(s.own.lists) == 0
	s.own.mu.Unlock()
	if none { // the common case: no view needed to find a tool
		return g.lists.current()
	}
	m, _ := s.lists()
	return m
}

// relistOwn reads again, from a session's connection, the lists it said changed,
// and tells the session when what it is shown changed.
func (c *child) relistOwn(ctx context.Context, cn *conn, lists upstream.Lists) {
	var tools []*Tool
	var ex *extras
	if lists&upstream.ToolsList != 0 {
		raws, err := c.listTools(ctx, cn)
		if err != nil {
			c.log.Warn("re-listing a client session's tools failed", "agent", cn.owner.agent, "err", err)
		} else if tools = c.toolsFrom(raws); tools == nil {
			tools = []*Tool{} // listed, and empty
		}
	}
	if lists&upstream.OtherLists != 0 {
		listed := c.listExtras(ctx, cn)
		ex = &listed
	}
	if cn.Lost() || (tools == nil && ex == nil) {
		return
	}
	cn.owner.setOwn(c.name, tools, ex)
	c.events.sessionListsChanged(cn.owner)
}
