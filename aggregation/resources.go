package aggregation

import (
	"encoding/json"
	"slices"
)

// resourceIndex names and routes the resources of a set of servers: a URI or
// template only one of them lists keeps its name, one that several list is given
// once per owner in its namespaced form (uris.go). Each view has one for the servers
// its agent may read, so that an agent that sees one of two servers sharing a URI
// sees it as it would connected to that server alone; the manifest has one for
// every server, which routes what no view names (to be refused by policy).
type resourceIndex struct {
	resources []resource           // with client and listed set
	byURI     map[string]*resource // by the URI the client is given
	// sharedURIs are the URIs two or more of the servers list, with those servers.
	sharedURIs map[string][]string
	templates  []resourceTemplate // with client, listed and shared set
	servers    []string           // the servers that serve resources
	// fallback is the server that serves every URI nothing else claims: the only
	// server of all that serves resources, when it is among these.
	fallback string
	// namespacing says some URI or template is namespaced: only then can what a
	// server sends name a URI the client must spell differently.
	namespacing bool
	// toolListed holds the tools whose listing names a shared resource URI
	// (_meta.ui.resourceUri), rewritten; the others are listed as encoded.
	toolListed map[*Tool]json.RawMessage
}

// newResourceIndex indexes the resources and templates of the servers of m for
// which keep is true, and the listings of their tools that name a shared URI.
func newResourceIndex(m *manifest, keep func(server string) bool) *resourceIndex {
	x := &resourceIndex{byURI: map[string]*resource{}}
	for _, s := range m.resourceServers {
		if keep(s) {
			x.servers = append(x.servers, s)
		}
	}
	if len(m.resourceServers) == 1 && keep(m.resourceServers[0]) {
		x.fallback = m.resourceServers[0]
	}
	owners := map[string][]string{}
	for _, r := range m.resources {
		if keep(r.server) {
			x.resources = append(x.resources, r)
			owners[r.uri] = append(owners[r.uri], r.server)
		}
	}
	for u, servers := range owners {
		if len(servers) > 1 {
			if x.sharedURIs == nil {
				x.sharedURIs = map[string][]string{}
			}
			x.sharedURIs[u] = servers
			x.namespacing = true
		}
	}
	for i := range x.resources {
		r := &x.resources[i]
		r.client, r.listed = r.uri, r.raw
		if len(owners[r.uri]) > 1 {
			r.client = namespaced(r.server, r.uri)
			r.listed = setField(r.raw, "uri", r.client)
		}
		x.byURI[r.client] = r
	}
	patterns := map[string]int{}
	for _, t := range m.templates {
		if keep(t.server) {
			x.templates = append(x.templates, t)
			patterns[t.pattern]++
		}
	}
	for i := range x.templates {
		t := &x.templates[i]
		t.client, t.listed, t.shared = t.pattern, t.raw, patterns[t.pattern] > 1
		if t.shared {
			x.namespacing = true
			t.client = namespaced(t.server, t.pattern)
			t.listed = setField(t.raw, "uriTemplate", t.client)
		}
	}
	if x.namespacing {
		for _, t := range m.tools {
			if !keep(t.Server) {
				continue
			}
			if out := rewriteURIs(t.listed, x.uriFixer(t.Server)); string(out) != string(t.listed) {
				if x.toolListed == nil {
					x.toolListed = map[*Tool]json.RawMessage{}
				}
				x.toolListed[t] = out
			}
		}
	}
	return x
}

// listedTool is t as tools/list serves it.
func (x *resourceIndex) listedTool(t *Tool) json.RawMessage {
	if raw, ok := x.toolListed[t]; ok {
		return raw
	}
	return t.listed
}

// route finds where a client's resource URI goes: the server and the URI that
// server knows. In order: a URI a client was given (listed as it is, or
// namespaced); a namespaced form of any URI, for a server that serves resources
// (the expansion of a namespaced template, a link a result was rewritten to); the
// one server whose template matches (a template only one server lists is
// preferred: that is the one the client saw bare); the only server of all that
// serves resources (servers serve URIs they do not list). A URI several servers
// could own is not guessed: its candidates, in their namespaced forms, come back
// instead, and server is "".
func (x *resourceIndex) route(uri string) (server, childURI string, candidates []string) {
	if r := x.byURI[uri]; r != nil {
		return r.server, r.uri, nil
	}
	if s, orig, ok := splitNamespaced(uri); ok && slices.Contains(x.servers, s) {
		return s, orig, nil
	}
	if servers := x.sharedURIs[uri]; servers != nil {
		return "", "", namespacedAll(servers, uri)
	}
	var shared []string // servers whose shared template matches
	for _, t := range x.templates {
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
	case x.fallback != "":
		return x.fallback, uri, nil
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
func (x *resourceIndex) uriFixer(server string) func(string) string {
	return func(uri string) string {
		if _, _, candidates := x.route(uri); candidates != nil {
			if to := namespaced(server, uri); slices.Contains(candidates, to) {
				return to
			}
		}
		return uri
	}
}

// clientURIs rewrites what server sent (a tool result, a resource's contents) so
// that every resource URI in it the client must namespace is namespaced.
func (x *resourceIndex) clientURIs(server string, raw json.RawMessage) json.RawMessage {
	if !x.namespacing {
		return raw
	}
	return rewriteURIs(raw, x.uriFixer(server))
}

// templateOwner is the server that listed a resource template, by the pattern a
// client was given, and the pattern as that server wrote it.
func (x *resourceIndex) templateOwner(pattern string) (server, childPattern string, ok bool) {
	for _, t := range x.templates {
		if t.client == pattern {
			return t.server, t.pattern, true
		}
	}
	return "", "", false
}
