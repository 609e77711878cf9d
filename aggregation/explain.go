package aggregation

import (
	"context"
	"strings"

	"github.com/nexus-mcp/nexus/policy"
)

// Explained is one policy decision for `nexus policy show|explain`: a tool, a prompt,
// or the resources (and templates) of a server.
type Explained struct {
	Kind string // "tool", "prompt" or "resources"
	// Name is the tool's canonical name, "<server>.<prompt>", or the server whose
	// resources are decided.
	Name string
	policy.Decision
}

// Explain decides everything the servers offer for agent: every tool, every prompt,
// and the resources of every server that serves them, in that order.
func (g *Gateway) Explain(agent string) []Explained {
	m, pol := g.lists.current(), g.pol.Load()
	var out []Explained
	for _, t := range m.tools {
		out = append(out, Explained{"tool", t.Canonical, pol.Decide(agent, t.policyTool())})
	}
	for _, p := range m.prompts {
		out = append(out, Explained{"prompt", p.server + "." + p.name, pol.DecideItem(agent, p.server, p.name)})
	}
	for _, s := range m.resourceServers {
		out = append(out, Explained{"resources", s, pol.DecideItem(agent, s, "")})
	}
	return out
}

// ExplainName decides one name for agent: a tool (wire or canonical name, or the
// child's own name as a call accepts it), a prompt (wire name or
// "<server>.<prompt>"), or a resource URI. An unknown name gets the error a call
// would.
func (g *Gateway) ExplainName(ctx context.Context, agent, name string) (Explained, error) {
	pol := g.pol.Load()
	t, err := g.resolveCall(ctx, operator(), name) // the operator asks: every tool is named
	if err == nil {
		return Explained{"tool", t.Canonical, pol.Decide(agent, t.policyTool())}, nil
	}
	m := g.lists.current()
	for _, p := range m.prompts {
		if p.wire == name || p.server+"."+p.name == name {
			return Explained{"prompt", p.server + "." + p.name, pol.DecideItem(agent, p.server, p.name)}, nil
		}
	}
	if strings.Contains(name, ":") {
		if s, ok := m.resourceOwner(name); ok {
			return Explained{"resources", s, pol.DecideItem(agent, s, "")}, nil
		}
	}
	return Explained{}, err
}
