package aggregation

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/nexus-mcp/nexus/policy"
)

// The write gate makes a policy change final the moment Reload returns: no call
// decided under the old policy reaches a child afterwards. A call checks the policy
// again just before its request is written to the child, holding the gate's read
// lock until the bytes are written; Reload swaps the policy under the write lock, so
// it waits only for writes in progress (microseconds), never for calls.
//
// For stdio children the check and the write are one step. For HTTP and SSE children
// the request is sent by mcp-go's transport, so the check happens just before it is
// handed over: a call already being sent when the policy changes may still arrive.

type writeGateKey struct{}

// writeGate is one call's hold on the gate.
type writeGate struct {
	g     *Gateway
	pol   *policy.Policy // the policy the call was decided under
	agent string
	tool  *Tool
	rec   *Call // the call's record: a refusal at the gate is the call's decision
}

// errRevoked is what a call gets when the policy changed under it and no longer
// allows it; it is answered with the refusal.
type errRevoked struct{ refusal json.RawMessage }

func (e *errRevoked) Error() string { return "the policy changed and no longer allows this call" }

func withWriteGate(ctx context.Context, g *Gateway, pol *policy.Policy, agent string, t *Tool, rec *Call) context.Context {
	return context.WithValue(ctx, writeGateKey{}, &writeGate{g: g, pol: pol, agent: agent, tool: t, rec: rec})
}

// enter takes the gate before a call's request is written: when the policy changed
// since the call was decided, it is decided again, and a refusal stops the write.
// The caller must call leave once the bytes are written (or the write failed).
func enter(ctx context.Context) error {
	w, _ := ctx.Value(writeGateKey{}).(*writeGate)
	if w == nil {
		return nil
	}
	w.g.gate.RLock()
	if pol := w.g.pol.Load(); pol != w.pol {
		if refused := w.g.decide(ctx, pol, w.agent, w.tool, w.rec); refused != nil {
			w.g.gate.RUnlock()
			return &errRevoked{refused}
		}
	}
	return nil
}

func leave(ctx context.Context) {
	if w, _ := ctx.Value(writeGateKey{}).(*writeGate); w != nil {
		w.g.gate.RUnlock()
	}
}

// swapPolicy installs a new policy once no request is being written under the old.
func (g *Gateway) swapPolicy(pol *policy.Policy) {
	g.gate.Lock()
	g.pol.Store(pol)
	g.gate.Unlock()
}

// asRevoked returns the refusal of a call stopped at the gate.
func asRevoked(err error) (json.RawMessage, bool) {
	var r *errRevoked
	if errors.As(err, &r) {
		return r.refusal, true
	}
	return nil, false
}
