package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/oauth"
)

// Outgoing is what a client's request carries to its server besides its
// params.
type Outgoing struct {
	// Extensions are the extensions its client declared, which a modern
	// server is told of for this request alone; a legacy one is not.
	Extensions []string
	// BeforeWrite is run just before the request is written (a gate); nil
	// lets it go. An error of it that is NotSent stops the request unsent and
	// is returned as it is.
	BeforeWrite func() (release func(), err error)
}

// NotSent marks an error met before a request was written (a BeforeWrite's
// refusal, params that could not be encoded): nothing reached the server, so
// nothing is wrong with the connection.
type NotSent interface {
	error
	NotSent()
}

// ErrSessionLost is what a request fails with when a remote server answered
// that it does not know the connection's session (HTTP 404, or an error
// saying so): the server restarted or expired the session, and did not
// process the request, so it may be sent again once a new session is made.
var ErrSessionLost = errors.New("the server no longer knows the session")

// A BrokenError is a request that failed on Conn for a reason RequestID names
// no other way: a connection reset, an HTTP status other than a forgotten
// session's, an answer that does not decode. Its caller may hold Conn in
// doubt (Doubt).
type BrokenError struct {
	Conn *Conn
	Err  error
}

func (e *BrokenError) Error() string { return e.Err.Error() }
func (e *BrokenError) Unwrap() error { return e.Err }

// Request sends one request of Nexus's own to the server and returns its raw
// result (RequestWith).
func (c *Conn) Request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	return c.RequestWith(ctx, method, params, Outgoing{})
}

// RequestWith sends one request to the server and returns its raw result,
// the server's as it sent it (an input_required one included). Its id is the
// connection's next (NextID). A request the connection's era has no method
// for is answered by the connection itself (Dialect.Local).
func (c *Conn) RequestWith(ctx context.Context, method string, params any, out Outgoing) (json.RawMessage, error) {
	if raw, ok, err := c.Dialect().Local(ctx, method, params); ok {
		return raw, err
	}
	return c.RequestID(ctx, c.NextID(), method, params, out)
}

// RequestID is RequestWith, with the id given and no local answer. Its
// errors say what happened to the connection: ErrSessionLost (it ended, for a
// new session), ErrGone (it ended), an *oauth.LoginError (one without a scope
// ends it), the request's own context's cause (the server is told to stop),
// a NotSent error (the request never written), the server's *jsonrpc.Error,
// or else a *BrokenError.
func (c *Conn) RequestID(ctx context.Context, id json.RawMessage, method string, params any, out Outgoing) (json.RawMessage, error) {
	defer c.Begin()()
	resp, err := c.roundTrip(ctx, id, method, params, out)
	if err != nil {
		if errors.Is(err, transport.ErrSessionTerminated) {
			return nil, c.sessionLost(err)
		}
		if ctx.Err() != nil {
			c.Dialect().Cancel(id, context.Cause(ctx))
			return nil, context.Cause(ctx)
		}
		if errors.Is(err, transport.ErrTransportClosed) {
			c.Lose(nil)
			return nil, ErrGone
		}
		if le := (*oauth.LoginError)(nil); errors.As(err, &le) {
			if le.Scope == "" {
				// No request can go through until a person logs in: end the
				// connection, and the next attempt says the server needs one.
				c.Lose(le)
			}
			return nil, le // a step-up fails this call only
		}
		if notSent := NotSent(nil); errors.As(err, &notSent) {
			return nil, err // refused by the gate, or not encoded: nothing was sent
		}
		return nil, &BrokenError{Conn: c, Err: err}
	}
	if resp.Error != nil {
		if c.Transport.Remote() && unknownSession(resp.Error.Message) {
			return nil, c.sessionLost(errors.New(resp.Error.Message))
		}
		return nil, resp.Error
	}
	return resp.Result, nil
}

// roundTrip sends one request as the connection's era wants it
// (Dialect.Encode). The transport runs the request's BeforeWrite.
func (c *Conn) roundTrip(ctx context.Context, id json.RawMessage, method string, params any, out Outgoing) (*jsonrpc.Message, error) {
	req := Request{ID: id, Method: method, Params: params}
	if err := c.Dialect().Encode(&req, out.Extensions); err != nil {
		return nil, unsent{err}
	}
	return c.Transport.Send(ctx, req, out.BeforeWrite)
}

// sessionLost ends the connection, which its owner replaces with a new
// session at once, and returns the error the request failed with.
func (c *Conn) sessionLost(err error) error {
	err = fmt.Errorf("%w: %v", ErrSessionLost, err)
	c.Lose(err)
	return err
}

// unknownSession reports whether a remote server's error says it refused the
// request for its session id, before processing it: mcp-go answers 404, the
// TypeScript SDK 400 with "Bad Request: No valid session ID provided" (404
// "Session not found" in later versions).
func unknownSession(msg string) bool {
	low := strings.ToLower(msg)
	for _, s := range []string{"no valid session id", "session not found", "unknown session", "invalid session id"} {
		if strings.Contains(low, s) {
			return true
		}
	}
	return false
}

// sendCancel tells the server to stop working on a request the caller gave
// up on (Dialect.Cancel says when).
func (c *Conn) sendCancel(id json.RawMessage, cause error) {
	reason := "cancelled"
	if cause != nil {
		reason = cause.Error()
	}
	ctx, done := context.WithTimeout(context.Background(), time.Second)
	defer done()
	_ = c.Transport.Notify(ctx, "notifications/cancelled", map[string]any{"requestId": id, "reason": reason})
}

// Doubt is what a broken request does to its connection: a remote one is
// held for a ping's verdict (Doubts), a local one ended.
func (c *Conn) Doubt() {
	if !c.Transport.Remote() {
		c.Lose(nil)
		return
	}
	c.Doubts.Raise()
}

// CatchUp is the step between a server's answer and its caller's: what the
// server sent before its answer (the call's last progress, a log message)
// reaches the caller first, as it would directly. For a caller whose stream
// ends with the answer (trailing), the server is first let write what it may
// still write for a request it answered (Dialect.Flush); then the answer
// waits, at most SettleWait, until the notifications that arrived before it
// are routed. Otherwise, with none waiting, it costs one lock.
func (c *Conn) CatchUp(ctx context.Context, trailing bool) {
	if trailing {
		c.Dialect().Flush(ctx)
	}
	c.Backlog.Settle(ctx)
}
