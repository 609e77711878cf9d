package aggregation

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"unicode/utf8"

	"github.com/nexus-mcp/nexus/internal/suggest"
)

// manifest is everything the children offer, merged: tools, prompts, resources and
// resource templates. It is immutable; a new one replaces the old on every change,
// so readers never lock.
type manifest struct {
	tools     []*Tool          // sorted by canonical name
	byName    map[string]*Tool // by wire name and by canonical name
	prompts   []prompt         // in server order
	byPrompt  map[string]*prompt
	resources []resource           // every server's, in server order
	byURI     map[string]*resource // by the URI the client is given
	// sharedURIs are the URIs two or more servers list, with those servers: each
	// is given to clients in its namespaced form, once per owner (uris.go).
	sharedURIs map[string][]string
	// namespacing says some URI or template is namespaced: only then can what a
	// server sends name a URI the client must spell differently.
	namespacing bool
	templates   []resourceTemplate // every server's, in server order
	servers     []string           // servers with at least one item, sorted
	// resourceServers are the servers that declared the resources capability.
	resourceServers []string
	// byChildName holds the tools by the child's own name: an MCP App calls its
	// server's tools by those names.
	byChildName map[string][]*Tool
	// toolListed holds the tools whose listing names a shared resource URI
	// (_meta.ui.resourceUri), rewritten; the others are listed as encoded.
	toolListed map[*Tool]json.RawMessage
}

// buildManifest merges the servers' offers. A wire name claimed twice (two servers
// exposing bare names, say) keeps the first server's tool, in server-name order, and
// reports the other; a prompt name claimed twice keeps the first too. A resource URI
// or template that several servers list is kept for each, namespaced (uris.go).
func buildManifest(perServer map[string][]*Tool, perExtras map[string]extras) (*manifest, []error) {
	m := &manifest{byName: map[string]*Tool{}, byPrompt: map[string]*prompt{}, byURI: map[string]*resource{},
		byChildName: map[string][]*Tool{}}
	var errs []error
	servers := make([]string, 0, len(perServer))
	for s := range perServer {
		servers = append(servers, s)
	}
	sort.Strings(servers)
	for _, s := range servers {
		for _, t := range perServer[s] {
			if prev, ok := m.byName[t.Wire]; ok {
				errs = append(errs, fmt.Errorf("tool %s and tool %s both go by %q on the wire; give one of the servers a prefix", prev.Canonical, t.Canonical, t.Wire))
				continue
			}
			m.byName[t.Wire] = t
			m.byName[t.Canonical] = t
			m.byChildName[t.Name] = append(m.byChildName[t.Name], t)
			m.tools = append(m.tools, t)
		}
		ex := perExtras[s]
		for _, p := range ex.prompts {
			if _, taken := m.byPrompt[p.wire]; !taken {
				m.prompts = append(m.prompts, p)
				m.byPrompt[p.wire] = nil // filled below, once the slice stops growing
			}
		}
		listed := map[string]bool{} // a server that lists a URI twice has it once
		for _, r := range ex.resources {
			if !listed[r.uri] {
				listed[r.uri] = true
				m.resources = append(m.resources, r)
			}
		}
		patterns := map[string]bool{}
		for _, t := range ex.templates {
			if !patterns[t.pattern] {
				patterns[t.pattern] = true
				m.templates = append(m.templates, t)
			}
		}
		if ex.servesResources {
			m.resourceServers = append(m.resourceServers, s)
		}
		if len(perServer[s]) > 0 || ex.servesResources || len(ex.prompts)+len(ex.resources)+len(ex.templates) > 0 {
			m.servers = append(m.servers, s)
		}
	}
	for i := range m.prompts {
		m.byPrompt[m.prompts[i].wire] = &m.prompts[i]
	}
	m.namespaceResources()
	m.rewriteToolListings()
	sort.Slice(m.tools, func(i, j int) bool { return m.tools[i].Canonical < m.tools[j].Canonical })
	return m, errs
}

// lookup resolves a name a client sent: the wire name or the canonical name, exactly.
func (m *manifest) lookup(name string) *Tool { return m.byName[name] }

// namespaceResources gives each resource and template the URI (or pattern) clients
// see: its own when only its server lists it, else its namespaced form.
func (m *manifest) namespaceResources() {
	owners := map[string][]string{}
	for _, r := range m.resources {
		owners[r.uri] = append(owners[r.uri], r.server)
	}
	for u, servers := range owners {
		if len(servers) > 1 {
			if m.sharedURIs == nil {
				m.sharedURIs = map[string][]string{}
			}
			m.sharedURIs[u] = servers
			m.namespacing = true
		}
	}
	for i := range m.resources {
		r := &m.resources[i]
		r.client, r.listed = r.uri, r.raw
		if len(owners[r.uri]) > 1 {
			r.client = namespaced(r.server, r.uri)
			r.listed = setField(r.raw, "uri", r.client)
		}
		m.byURI[r.client] = r
	}
	patterns := map[string]int{}
	for _, t := range m.templates {
		patterns[t.pattern]++
	}
	for i := range m.templates {
		t := &m.templates[i]
		t.client, t.listed, t.shared = t.pattern, t.raw, patterns[t.pattern] > 1
		if t.shared {
			m.namespacing = true
			t.client = namespaced(t.server, t.pattern)
			t.listed = setField(t.raw, "uriTemplate", t.client)
		}
	}
}

// rewriteToolListings rewrites the UI resource URI of each tool whose server must be
// reached through a namespaced URI.
func (m *manifest) rewriteToolListings() {
	if !m.namespacing {
		return
	}
	for _, t := range m.tools {
		if out := rewriteURIs(t.listed, m.uriFixer(t.Server)); string(out) != string(t.listed) {
			if m.toolListed == nil {
				m.toolListed = map[*Tool]json.RawMessage{}
			}
			m.toolListed[t] = out
		}
	}
}

// listedTool is t as tools/list serves it.
func (m *manifest) listedTool(t *Tool) json.RawMessage {
	if raw, ok := m.toolListed[t]; ok {
		return raw
	}
	return t.listed
}

// routeResource finds where a client's resource URI goes: the server and the URI
// that server knows. In order: a URI a client was given (listed as it is, or
// namespaced); a namespaced form of any URI, for a server that serves resources
// (the expansion of a namespaced template, a link a result was rewritten to); the
// one server whose template matches (a template only one server lists is
// preferred: that is the one the client saw bare); the only server that serves
// resources at all (servers serve URIs they do not list). A URI several servers
// could own is not guessed: its candidates, in their namespaced forms, come back
// instead, and server is "".
func (m *manifest) routeResource(uri string) (server, childURI string, candidates []string) {
	if r := m.byURI[uri]; r != nil {
		return r.server, r.uri, nil
	}
	if s, orig, ok := splitNamespaced(uri); ok && slices.Contains(m.resourceServers, s) {
		return s, orig, nil
	}
	if servers := m.sharedURIs[uri]; servers != nil {
		return "", "", namespacedAll(servers, uri)
	}
	var shared []string // servers whose shared template matches
	for _, t := range m.templates {
		if !t.tmpl.Regexp().MatchString(uri) {
			continue
		}
		if !t.shared {
			return t.server, uri, nil
		}
		if !slices.Contains(shared, t.server) {
			shared = append(shared, t.server)
		}
	}
	switch {
	case len(shared) == 1:
		return shared[0], uri, nil
	case len(shared) > 1:
		return "", "", namespacedAll(shared, uri)
	case len(m.resourceServers) == 1:
		return m.resourceServers[0], uri, nil
	}
	return "", "", nil
}

func namespacedAll(servers []string, uri string) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = namespaced(s, uri)
	}
	return out
}

// uriFixer returns what rewriteURIs needs for what server sent: a URI that would
// not reach server as it is, because several servers could own it, becomes the
// server's namespaced form; every other URI is left alone.
func (m *manifest) uriFixer(server string) func(string) string {
	return func(uri string) string {
		if _, _, candidates := m.routeResource(uri); candidates != nil {
			if to := namespaced(server, uri); slices.Contains(candidates, to) {
				return to
			}
		}
		return uri
	}
}

// clientURIs rewrites what server sent (a tool result, a resource's contents) so
// that every resource URI in it the client must namespace is namespaced.
func (m *manifest) clientURIs(server string, raw json.RawMessage) json.RawMessage {
	if !m.namespacing {
		return raw
	}
	return rewriteURIs(raw, m.uriFixer(server))
}

// bareTool is the tool a child calls name, among the servers the agent's view sees:
// nil when there is none, an error listing the candidates' wire names when there
// are several (a guess could run the wrong server's tool).
func (m *manifest) bareTool(v *view, name string) (*Tool, *RPCError) {
	var found []*Tool
	for _, t := range m.byChildName[name] {
		if v.sees[t.Server] {
			found = append(found, t)
		}
	}
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return found[0], nil
	}
	names := make([]string, len(found))
	for i, t := range found {
		names[i] = t.Wire
	}
	return nil, &RPCError{Code: codeInvalidParams, Message: fmt.Sprintf("tool name %s is ambiguous: several servers have a tool of that name; call one of %s", quoted(name), quoteJoin(names)),
		Data: map[string]any{"candidates": names}}
}

// resourceOwner is the server a client's URI goes to, when exactly one does.
func (m *manifest) resourceOwner(uri string) (string, bool) {
	s, _, _ := m.routeResource(uri)
	return s, s != ""
}

// templateOwner is the server that listed a resource template, by the pattern a
// client was given, and the pattern as that server wrote it.
func (m *manifest) templateOwner(pattern string) (server, childPattern string, ok bool) {
	for _, t := range m.templates {
		if t.client == pattern {
			return t.server, t.pattern, true
		}
	}
	return "", "", false
}

// suggest returns up to three known names (wire or canonical) close to name,
// for "did you mean".
func (m *manifest) suggest(name string) []string {
	if len(name) > suggest.MaxInput {
		return nil
	}
	names := make([]string, 0, 2*len(m.tools))
	for _, t := range m.tools {
		names = append(names, t.Wire, t.Canonical)
	}
	return suggest.Nearest(name, names, 3)
}

// quoted quotes a client-supplied name for an error message, cut to a bounded
// prefix: an error must not echo megabytes back.
func quoted(name string) string {
	const keep = 80
	if len(name) <= keep {
		return fmt.Sprintf("%q", name)
	}
	cut := name[:keep]
	for len(cut) > 0 && !utf8.ValidString(cut) {
		cut = cut[:len(cut)-1]
	}
	return fmt.Sprintf("%q… (%d bytes)", cut, len(name))
}
