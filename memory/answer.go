package memory

import (
	"context"
	"encoding/json"
)

// Outcome says what became of the request a Forward sent to the child. It
// decides what memory may conclude from a call: an answer can be stored, a
// mutating call that may have run invalidates, and a child that failed may
// be stood in for by a stale answer (Settings.StaleIfError).
type Outcome int

const (
	// Answered: the child answered, with a result (isError or not) or a
	// JSON-RPC error of its own.
	Answered Outcome = iota
	// NotSent: the request never reached the child (it is not running,
	// was removed, or the call was refused before the write). Nothing
	// ran, so nothing is invalidated.
	NotSent
	// Unknown: the request may have reached the child but no answer came
	// (a timeout, a cancellation, a child that died or a transport that
	// broke). The call may have run, so it invalidates like a success.
	Unknown
	// Refused: the gateway refused the call just before writing it (the
	// policy changed under it). Nothing ran, and nothing may stand in.
	Refused
)

// String names the outcome for logs.
func (o Outcome) String() string {
	switch o {
	case Answered:
		return "answered"
	case NotSent:
		return "not sent"
	case Unknown:
		return "unknown"
	case Refused:
		return "refused"
	}
	return "Outcome(?)"
}

// Answer is what a Forward produced: the raw CallToolResult the caller gets
// (the child's, or the gateway's own isError result when the child failed),
// and the facts memory needs about how it was made.
type Answer struct {
	Result  json.RawMessage
	Outcome Outcome
	// AskedClient reports that the child sent the client a request
	// (sampling, elicitation, roots) while the call was in flight: the
	// answer may be made of the caller's input, so it is never shared.
	AskedClient bool
	// Failure is the gateway's words for what went wrong when Outcome is
	// not Answered; a stale answer served instead carries it.
	Failure string
}

// Forward makes the child call of a tools/call. An error is a JSON-RPC
// error for the caller, returned by Call as it is.
type Forward func(ctx context.Context) (Answer, error)

// childFailed reports an answer that the child did not make: stale-if-error
// may stand in for it.
func (a Answer) childFailed() bool { return a.Outcome == NotSent || a.Outcome == Unknown }
