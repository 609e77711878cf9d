package aggregation

import (
	"context"

	"github.com/nexus-mcp/nexus/policy"
	"github.com/nexus-mcp/nexus/upstream"
)

// The write gate makes a policy change final the moment Reload returns: no call
// decided under the old policy reaches a child afterwards. A call checks the policy
// again just before its request is written to the child, holding the gate's read
// lock until the bytes are written; Reload swaps the policy under the write lock, so
// it waits only for writes in progress (microseconds), never for calls.
//
// The check is the request's BeforeWrite (upstream.Outgoing): a stdio child's transport
// runs it and writes in one step. For HTTP and SSE children the request is sent by
// mcp-go's transport, so the check happens just before it is handed over: a call
// already being sent when the policy changes may still arrive.

// errRevoked is what a call gets when the policy changed under it and no longer
// allows it; it is answered with the refusal.
type errRevoked struct{ decision policy.Decision }

func (e *errRevoked) Error() string { return "the policy changed and no longer allows this call" }

// NotSent says the request it stopped was never written: the connection is
// not doubted for it (upstream.RequestID).
func (*errRevoked) NotSent() {}

var _ upstream.NotSent = (*errRevoked)(nil)

// writeGate is the BeforeWrite of c's request: when the policy changed since c was
// decided, it is decided again, and a refusal stops the write. release must be
// called once the bytes are written.
func (g *Gateway) writeGate(ctx context.Context, c *toolCall) func() (release func(), err error) {
	return func() (func(), error) {
		g.gate.RLock()
		if pol := g.pol.Load(); pol != c.pol {
			if d := g.decide(ctx, pol, c.agent, c.tool); !d.Allowed {
				g.gate.RUnlock()
				return nil, &errRevoked{d}
			}
		}
		return g.gate.RUnlock, nil
	}
}

// swapPolicy installs a new policy once no request is being written under the old.
func (g *Gateway) swapPolicy(pol *policy.Policy) {
	g.gate.Lock()
	g.pol.Store(pol)
	g.gate.Unlock()
}
