package aggregation

import (
	"fmt"
	"sync"
)

// agentPin is the agent a stdio connection started without --agent (or
// NEXUS_AGENT) speaks as: the first one its client names, at initialize or in a
// 2026-07-28 request's clientInfo. Every process that can write to the
// connection's stdin is the same user, and a clientInfo is whatever a client says
// it is, so a connection must not become another agent from one request to the
// next (initialized as bob, then a destructive call as alice): a request that
// names another agent is refused. Per-agent policy on stdio needs --agent.
type agentPin struct {
	mu    sync.Mutex
	agent string
}

// hold pins agent when nothing is pinned yet, and refuses another.
func (p *agentPin) hold(agent string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.agent {
	case "":
		p.agent = agent
		return nil
	case agent:
		return nil
	}
	return fmt.Errorf("this stdio connection speaks as agent %s, the first its client named; a request as %s is refused. A client's name does not prove who it is: per-agent policy on stdio needs --agent (or NEXUS_AGENT)", p.agent, agent)
}
