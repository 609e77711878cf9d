package aggregation

import "github.com/nexus-mcp/nexus/policy"

// audience is whom a tool name is resolved for. An agent is told only of the
// tools its policy lets it call: a bare name is judged by those alone (a tool it
// may not call neither makes a name ambiguous nor is named as a candidate), and
// "did you mean" suggests only those. The operator (all: policy explain,
// Resolve) may be told of every tool.
type audience struct {
	pol   *policy.Policy
	agent string
	all   bool
}

// agentAudience is the audience of agent's calls under the current policy.
func (g *Gateway) agentAudience(agent string) audience {
	return audience{pol: g.pol.Load(), agent: agent}
}

// operator is the audience that is told of every tool.
func operator() audience { return audience{all: true} }

// may reports whether the audience may be told of t.
func (a audience) may(t *Tool) bool {
	return a.all || a.pol.Decide(a.agent, t.policyTool()).Allowed
}
