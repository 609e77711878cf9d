package aggregation

import (
	"fmt"
	"sort"
	"unicode/utf8"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
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
	resources []resource         // every server's, in server order
	templates []resourceTemplate // every server's, in server order
	servers   []string           // servers with at least one item, sorted
	// resourceServers are the servers that declared the resources capability.
	resourceServers []string
	// res names and routes every server's resources together; each view has its
	// own for the servers its agent may read (resources.go).
	res *resourceIndex
	// byChildName holds the tools by the child's own name: an MCP App calls its
	// server's tools by those names.
	byChildName map[string][]*Tool
	// paramHeaders reports that a tool mirrors arguments into Mcp-Param headers:
	// without one, a modern call's headers need no check (params.go).
	paramHeaders bool
	// perServer and perExtras are what the manifest was merged from, never
	// changed after: a session shown lists of its own (ownlists.go) is merged
	// from them with its own in place of its server's.
	perServer map[string][]*Tool
	perExtras map[string]extras
}

// buildManifest merges the servers' offers. A wire name claimed twice (two servers
// exposing bare names, say) keeps the first server's tool, in server-name order, and
// reports the other; a prompt name claimed twice keeps the first too. A resource URI
// or template that several servers list is kept for each (resources.go names them).
func buildManifest(perServer map[string][]*Tool, perExtras map[string]extras) (*manifest, []error) {
	m := &manifest{byName: map[string]*Tool{}, byPrompt: map[string]*prompt{}, byChildName: map[string][]*Tool{},
		perServer: perServer, perExtras: perExtras}
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
			m.paramHeaders = m.paramHeaders || len(t.paramHeaders) > 0
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
	sort.Slice(m.tools, func(i, j int) bool { return m.tools[i].Canonical < m.tools[j].Canonical })
	m.res = newResourceIndex(m, func(string) bool { return true })
	return m, errs
}

// lookup resolves a name a client sent: the wire name or the canonical name, exactly.
func (m *manifest) lookup(name string) *Tool { return m.byName[name] }

// bareTool is the tool a child calls name, among the tools the audience may call:
// nil when there is none, an error listing the candidates' wire names when there
// are several (a guess could run the wrong server's tool).
func (m *manifest) bareTool(a audience, name string) (*Tool, *RPCError) {
	var found []*Tool
	for _, t := range m.byChildName[name] {
		if a.may(t) {
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
	return nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("tool name %s is ambiguous: several servers have a tool of that name; call one of %s", quoted(name), quoteJoin(names)),
		Data: map[string]any{"candidates": names}}
}

// resourceOwner is the server a client's URI goes to, when exactly one does, by
// the names every server's resources are given together (no agent's view).
func (m *manifest) resourceOwner(uri string) (string, bool) {
	s, _, _ := m.res.route(uri)
	return s, s != ""
}

// suggest returns up to three tools the audience may call whose names are close
// to name, for "did you mean": each tool once, by whichever of its names (wire or
// canonical) is closer.
func (m *manifest) suggest(a audience, name string) []string {
	if len(name) > suggest.MaxInput {
		return nil
	}
	names := make([]string, 0, 2*len(m.tools))
	of := make(map[string]*Tool, 2*len(m.tools))
	for _, t := range m.tools {
		if a.may(t) {
			names = append(names, t.Wire, t.Canonical)
			of[t.Wire], of[t.Canonical] = t, t
		}
	}
	const most = 3
	var out []string
	told := map[*Tool]bool{}
	for _, n := range suggest.Nearest(name, names, 2*most) {
		if t := of[n]; !told[t] && len(out) < most {
			told[t] = true
			out = append(out, n)
		}
	}
	return out
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
