package aggregation

import (
	"crypto/sha256"
	"encoding/json"
	"sync"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/policy"
)

// view is what one agent sees of the manifest: its lists, encoded once, and their
// fingerprints, which tell a session whether its lists changed. A view is built on
// first use for one (manifest, policy) pair and shared by every session of the agent,
// so a tools/list costs a map lookup, not a policy pass.
type view struct {
	tools, prompts, resources, templates json.RawMessage // encoded list results
	toolsFP, promptsFP, resourcesFP      [sha256.Size]byte
	// sees holds the servers with at least one item visible to the agent: their log
	// messages reach the agent's sessions.
	sees map[string]bool
	// readable holds the servers whose resources the agent may list, read and
	// subscribe to.
	readable map[string]bool
	// res names and routes the resources of the readable servers.
	res *resourceIndex
	// search is set when the agent's toolset is search mode: tools then holds
	// its pins and the two search tools, and search indexes the rest.
	search *searchView
	// allTools is how many tools the agent may call and allBytes the size of
	// the tools/list that would list them all: what search mode saves.
	allTools, allBytes int
}

// views caches one view per agent for the current manifest and policy.
type views struct {
	mu      sync.Mutex
	man     *manifest
	pol     *policy.Policy
	cfg     *config.Config // whose toolsets the views follow
	byAgent map[string]*view
}

// maxCachedViews bounds the cache: agent names come from configured tokens and from
// stdio clients' self-reported names, so there are few, but nothing should grow
// without bound on a client's say-so.
const maxCachedViews = 1024

func (g *Gateway) view(agent string) *view {
	man, pol, cfg := g.lists.current(), g.pol.Load(), g.cfg.Load()
	vs := &g.views
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if vs.man != man || vs.pol != pol || vs.cfg != cfg || len(vs.byAgent) >= maxCachedViews {
		vs.man, vs.pol, vs.cfg, vs.byAgent = man, pol, cfg, map[string]*view{}
	}
	if v := vs.byAgent[agent]; v != nil {
		return v
	}
	v := buildView(man, pol, agent, g.searchOptions(cfg, agent))
	vs.byAgent[agent] = v
	return v
}

// searchOptions are what the agent's view needs to build its tool search.
func (g *Gateway) searchOptions(cfg *config.Config, agent string) searchOptions {
	return searchOptions{set: cfg.ToolsetFor(agent), embedder: g.searchEmbedder, text: g.text}
}

func buildView(m *manifest, pol *policy.Policy, agent string, so searchOptions) *view {
	v := &view{sees: map[string]bool{}, readable: map[string]bool{}}
	for _, s := range m.servers {
		if pol.DecideItem(agent, s, "").Allowed {
			v.readable[s] = true
			v.sees[s] = true
		}
	}
	v.res = newResourceIndex(m, func(s string) bool { return v.readable[s] })
	var tools, prompts, resources, templates []json.RawMessage
	var callable []*Tool
	for _, t := range m.tools {
		if pol.Decide(agent, t.policyTool()).Allowed {
			tools = append(tools, v.res.listedTool(t))
			callable = append(callable, t)
			v.sees[t.Server] = true
		}
	}
	for _, p := range m.prompts {
		if pol.DecideItem(agent, p.server, p.name).Allowed {
			prompts = append(prompts, p.raw)
			v.sees[p.server] = true
		}
	}
	for _, r := range v.res.resources {
		resources = append(resources, r.listed)
	}
	for _, t := range v.res.templates {
		templates = append(templates, t.listed)
	}
	v.tools = listResult("tools", tools)
	v.allTools, v.allBytes = len(tools), len(v.tools)
	if so.set.Search() {
		var servers []string
		for _, s := range m.servers {
			if v.sees[s] {
				servers = append(servers, s)
			}
		}
		v.search = newSearchView(so, callable, tools, servers)
		v.tools = listResult("tools", v.search.base)
	}
	v.prompts = listResult("prompts", prompts)
	v.resources = listResult("resources", resources)
	v.templates = listResult("resourceTemplates", templates)
	v.toolsFP = sha256.Sum256(v.tools)
	v.promptsFP = sha256.Sum256(v.prompts)
	both := append(append([]byte{}, v.resources...), v.templates...)
	v.resourcesFP = sha256.Sum256(both)
	return v
}

// listResult encodes {"<field>": [items...]} from items already encoded.
func listResult(field string, items []json.RawMessage) json.RawMessage {
	n := len(field) + 8
	for _, it := range items {
		n += len(it) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"`...)
	b = append(b, field...)
	b = append(b, `":[`...)
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, "]}"...)
}
