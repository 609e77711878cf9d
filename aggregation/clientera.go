package aggregation

import (
	"context"
	"encoding/json"
)

// A session speaks its client's protocol era through a clientEra, chosen once,
// when the session is made: legacyClient for a session opened with initialize
// (2025-11-25 and earlier), a *requestScope for one 2026-07-28 request, which is
// served as a session that lasts as long as the request and holds what is the
// request's alone: its id and its call (the request's scope). Everything the era
// changes in how the gateway serves a client is a method here, so the rest of
// the package asks a session's era what to do, never which era it is. The child
// side's counterpart is upstream.Dialect.
type clientEra interface {
	// auditName names the session in the audit record: a stateless request
	// is named by its JSON-RPC id.
	auditName(sessionID string) string
	// lasting reports a session that outlives its requests: over HTTP it is
	// counted against the session bounds, expired when idle and closed when
	// its token is revoked; a "client" server keeps a connection for it; a
	// shared child is kept in step with its roots. A request is none of these:
	// each would cost it a round of its own.
	lasting() bool
	// extensions are the extensions the client declared that a modern child
	// is told of in the client's requests (tasks_ext.go).
	extensions(caps clientCaps) []string
	// streamEndsWithAnswer reports that the stream a request's answer goes on
	// ends with it, on front: what the child sends for the request must come
	// before (the trailing of send's catch-up).
	streamEndsWithAnswer(front string) bool
	// takesInputRequired reports a client that is handed a child's
	// InputRequiredResult as it is, and retries with the answers itself; a
	// legacy client is asked by the gateway instead (requestInput).
	takesInputRequired() bool
	// ask sends the client a request a child made during its call (sampling,
	// elicitation, roots) on s's stream r, and waits for the answer.
	ask(ctx context.Context, s *session, r sink, method string, params json.RawMessage) (json.RawMessage, *RPCError)
}

// legacyClient is the era of a session opened with initialize.
type legacyClient struct{}

func (legacyClient) auditName(id string) string             { return id }
func (legacyClient) lasting() bool                          { return true }
func (legacyClient) extensions(clientCaps) []string         { return nil }
func (legacyClient) streamEndsWithAnswer(front string) bool { return front == frontHTTP }
func (legacyClient) takesInputRequired() bool               { return false }
func (legacyClient) ask(ctx context.Context, s *session, r sink, method string, params json.RawMessage) (json.RawMessage, *RPCError) {
	return s.request(ctx, r, method, params)
}

// requestScope is the era and the scope of one 2026-07-28 request (modern.go).
type requestScope struct {
	id json.RawMessage
	// flight is the request's call when it runs as one (mrtr.go), set before
	// the call starts.
	flight *flight
}

// scope is the scope of the 2026-07-28 request s serves, nil for a session
// opened with initialize: what a step of the modern era alone (listen, a
// flight) reads of its request.
func (s *session) scope() *requestScope {
	q, _ := s.era.(*requestScope)
	return q
}

func (q *requestScope) auditName(id string) string {
	if len(q.id) == 0 {
		return id
	}
	return "request " + string(q.id)
}

func (*requestScope) lasting() bool                    { return false }
func (*requestScope) streamEndsWithAnswer(string) bool { return true }
func (*requestScope) takesInputRequired() bool         { return true }

func (*requestScope) extensions(caps clientCaps) []string {
	if caps.tasks {
		return []string{tasksExtension} // its client takes tasks
	}
	return nil
}

// ask: a call that runs as a flight answers its request with an
// InputRequiredResult and waits for the client's retry.
func (q *requestScope) ask(ctx context.Context, s *session, r sink, method string, params json.RawMessage) (json.RawMessage, *RPCError) {
	if q.flight != nil {
		return q.flight.ask(ctx, method, params)
	}
	return s.request(ctx, r, method, params)
}
