package aggregation

import (
	"fmt"
	"github.com/nexus-mcp/nexus/internal/suggest"
	"sort"
	"unicode/utf8"
)

// manifest is everything the children offer, merged: tools, prompts, resources and
// resource templates. It is immutable; a new one replaces the old on every change,
// so readers never lock.
type manifest struct {
	tools     []*Tool          // sorted by canonical name
	byName    map[string]*Tool // by wire name and by canonical name
	prompts   []prompt         // in server order
	byPrompt  map[string]*prompt
	resources []resource
	byURI     map[string]*resource
	templates []resourceTemplate
	servers   []string // servers with at least one item, sorted
	// resourceServers are the servers that declared the resources capability.
	resourceServers []string
}

// buildManifest merges the servers' offers. A wire name claimed twice (two servers
// exposing bare names, say) keeps the first server's tool, in server-name order, and
// reports the other; a resource URI or prompt name claimed twice keeps the first too.
func buildManifest(perServer map[string][]*Tool, perExtras map[string]extras) (*manifest, []error) {
	m := &manifest{byName: map[string]*Tool{}, byPrompt: map[string]*prompt{}, byURI: map[string]*resource{}}
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
			m.tools = append(m.tools, t)
		}
		ex := perExtras[s]
		for _, p := range ex.prompts {
			if _, taken := m.byPrompt[p.wire]; !taken {
				m.prompts = append(m.prompts, p)
				m.byPrompt[p.wire] = nil // filled below, once the slice stops growing
			}
		}
		for _, r := range ex.resources {
			if _, taken := m.byURI[r.uri]; !taken {
				m.resources = append(m.resources, r)
				m.byURI[r.uri] = nil
			}
		}
		m.templates = append(m.templates, ex.templates...)
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
	for i := range m.resources {
		m.byURI[m.resources[i].uri] = &m.resources[i]
	}
	sort.Slice(m.tools, func(i, j int) bool { return m.tools[i].Canonical < m.tools[j].Canonical })
	return m, errs
}

// lookup resolves a name a client sent: the wire name or the canonical name, exactly.
func (m *manifest) lookup(name string) *Tool { return m.byName[name] }

// resourceOwner is the server that serves uri: the one that listed it, else the one
// whose template matches it (the first, in server order), else the only server that
// serves resources at all (servers may serve URIs they do not list).
func (m *manifest) resourceOwner(uri string) (string, bool) {
	if r := m.byURI[uri]; r != nil {
		return r.server, true
	}
	for _, t := range m.templates {
		if t.tmpl.Regexp().MatchString(uri) {
			return t.server, true
		}
	}
	if len(m.resourceServers) == 1 {
		return m.resourceServers[0], true
	}
	return "", false
}

// templateOwner is the server that listed a resource template, by its pattern.
func (m *manifest) templateOwner(pattern string) (string, bool) {
	for _, t := range m.templates {
		if t.pattern == pattern {
			return t.server, true
		}
	}
	return "", false
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
