package aggregation

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/policy"
)

// Outcome is how a call ended, as an observer sees it.
type Outcome string

// Outcomes of a call. A small fixed set: metrics use it as a label.
const (
	OutcomeOK        Outcome = "ok"         // the child answered and the result is not an error
	OutcomeToolError Outcome = "tool_error" // a result with isError (the child's, or the gateway's: server down, exited)
	OutcomeRPCError  Outcome = "rpc_error"  // a JSON-RPC error (unknown tool, bad arguments, the child's error)
	OutcomeRefused   Outcome = "refused"    // the policy said no; nothing reached the child
	OutcomeTimeout   Outcome = "timeout"    // the child did not answer within its timeout
)

// Call is what an Observer learns of one finished call: who called what, what the
// policy decided and by which rule, how it ended, how long it took and what memory
// did. It is the gateway's one observation point: metrics, the audit trail and the
// status page all read it, rather than keeping counters along the path.
type Call struct {
	Start  time.Time
	Method string // "tools/call", "prompts/get" or "resources/read"
	// Agent is the session's agent; KnownAgent says whether the config names it
	// (agents or policy.agents) or it is anonymous: an unknown name must never
	// become a metric label.
	Agent      string
	KnownAgent bool
	// Tool is the canonical name (a prompt's or a resource's server.* for other
	// methods); Server its server. Both are "" when the name matched nothing.
	Tool, Server string
	// Requested is the name the client sent.
	Requested string
	// ReadOnly: the tool's effective annotations put it under @readonly.
	ReadOnly bool
	// Decided says whether the policy was asked (an unknown tool never gets there);
	// then Allowed, Rule, Origin and Source are its decision.
	Decided, Allowed     bool
	Rule, Origin, Source string
	Outcome              Outcome
	// Duration is the whole call; Child the time spent waiting for the child (zero
	// when memory answered or the call never reached it).
	Duration, Child time.Duration
	// Memory is memory's report: hit, semantic_hit, miss or bypass; "" when memory
	// is off or the call did not get that far.
	Memory string
	// Arguments are the client's arguments, as sent (not redacted: an observer that
	// keeps them redacts them). Only valid during Observe.
	Arguments json.RawMessage
	// Session is the client's session id, or the request's id for a stateless
	// (2026-07-28) request; Client and ClientVersion what the client said it
	// is. All "" for a call without a client session.
	Session, Client, ClientVersion string
	// Revision is the revision of the policy that decided (policy.Policy.Revision).
	Revision string
}

// Observer receives every finished call. Observe runs on the call's goroutine after
// the answer is known, so it must not block: an observer that writes somewhere slow
// queues the record and returns.
type Observer interface {
	Observe(*Call)
}

// observe hands a finished call to the observer, if there is one.
func (g *Gateway) observe(c *Call) {
	if g.observer == nil {
		return
	}
	c.Duration = time.Since(c.Start)
	c.KnownAgent = g.knownAgent(c.Agent)
	g.observer.Observe(c)
}

// knownAgent reports whether the config names agent, or it is anonymous.
func (g *Gateway) knownAgent(agent string) bool {
	if agent == policy.Anonymous {
		return true
	}
	cfg := g.cfg.Load()
	if _, ok := cfg.Agents[agent]; ok {
		return true
	}
	_, ok := cfg.Policy.Agents[agent]
	return ok
}

// decided copies a policy decision into the record.
func (c *Call) decided(d policy.Decision) {
	c.Decided, c.Allowed, c.Rule, c.Origin, c.Source, c.Revision = true, d.Allowed, d.Rule, d.Origin, d.Source, d.Revision
	if !d.Allowed {
		c.Outcome = OutcomeRefused
	}
}

// finish sets the outcome from the answer, unless a step already said (refused,
// timeout), and reads memory's report from the result.
func (c *Call) finish(raw json.RawMessage, rpcErr *RPCError) {
	if c.Outcome == "" {
		c.Outcome = answerOutcome(rpcErr != nil, raw)
	}
	if c.Memory == "" {
		c.Memory = cacheStatus(raw)
	}
}

// answerOutcome is the outcome of an answer no step judged: a JSON-RPC error
// (failed), a result with isError, or a result.
func answerOutcome(failed bool, result json.RawMessage) Outcome {
	switch {
	case failed:
		return OutcomeRPCError
	case isToolError(result):
		return OutcomeToolError
	}
	return OutcomeOK
}

// cacheReportPrefix is how memory's report begins in a result's _meta (memory
// writes it compact, see memory.MetaKey).
const cacheReportPrefix = `"` + memory.MetaKey + `":{"status":"`

// cacheStatus finds memory's report in a result without decoding the result: the
// last occurrence is the one memory spliced into _meta (a quote inside a string is
// escaped, so the pattern cannot come from a text).
func cacheStatus(raw json.RawMessage) string {
	i := bytes.LastIndex(raw, []byte(cacheReportPrefix))
	if i < 0 {
		return ""
	}
	rest := raw[i+len(cacheReportPrefix):]
	if j := bytes.IndexByte(rest, '"'); j > 0 && j < 32 {
		return string(rest[:j])
	}
	return ""
}

// isToolError reports whether a result says isError: true. The field is a
// top-level member; results are compact, so the check is a scan, not a decode.
func isToolError(raw json.RawMessage) bool {
	return bytes.Contains(raw, []byte(`"isError":true`))
}

// span starts a span of one step of a request. With tracing off it costs nothing:
// the span is a no-op value and ctx is returned as it is.
// Callers set attributes only when the span is recording.
func (g *Gateway) span(ctx context.Context, name string) (context.Context, trace.Span) {
	if !g.tracing {
		return ctx, noop.Span{}
	}
	return g.tracer.Start(ctx, name)
}

// endSpan records how a step ended and ends its span.
func endSpan(sp trace.Span, outcome Outcome) {
	if !sp.IsRecording() {
		sp.End()
		return
	}
	sp.SetAttributes(attribute.String("nexus.outcome", string(outcome)))
	if outcome != OutcomeOK && outcome != "" {
		sp.SetStatus(codes.Error, string(outcome))
	}
	sp.End()
}

// traceContext is W3C Trace Context (the traceparent and tracestate headers): what
// the HTTP front accepts from clients and passes to HTTP children. A value, not the
// otel global propagator: the gateway keeps no package-level state.
var traceContext = propagation.TraceContext{}

// withTrace makes the incoming traceparent, if any, the parent of what the request
// does.
func withTrace(r *http.Request) *http.Request {
	if r.Header.Get("traceparent") == "" {
		return r
	}
	return r.WithContext(traceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
}

// traceHeaders are the headers that carry ctx's span to an HTTP child.
func traceHeaders(ctx context.Context) map[string]string {
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	return carrier
}
