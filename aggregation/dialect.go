package aggregation

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/internal/jsonwalk"
	"github.com/nexus-mcp/nexus/upstream"
)

// A connection speaks its child's protocol era through a dialect: legacyDialect
// in a session opened with initialize (2025-11-25 and earlier), modernDialect
// for a stateless child (2026-07-28 and later), whose every request carries its
// version, identity and capabilities. The handshake settles the era
// (upstream.Handshake); everything that era changes in how Nexus talks to the child
// afterwards is a method here, so the rest of the package asks a connection's
// dialect what to do, not which era it speaks.
type dialect interface {
	// opened runs once the handshake is over.
	opened(ctx context.Context)
	// received tidies the params of a notification of the child's before it
	// is routed.
	received(params json.RawMessage) json.RawMessage
	// local answers a request the era has no method for (a legacy one, which
	// the gateway's routes send whatever the era); ok false means the request
	// goes to the child.
	local(ctx context.Context, method string, params any) (raw json.RawMessage, ok bool, err error)
	// encode makes req, with extensions declared for it alone, what the child
	// reads.
	encode(req *upstream.Request, extensions []string) error
	// notify sends the child a notification without params.
	notify(method string)
	// cancel tells the child to stop working on request id.
	cancel(id json.RawMessage, cause error)
	// flush lets in what the child may still write for a request it has
	// answered (its last progress, a log message), for a caller whose stream
	// ends with the answer.
	flush(ctx context.Context)
	// keepsSession reports a child that holds its client's logging level and
	// roots between requests: Nexus sets them by requests of their own
	// (logging/setLevel, the roots/list it answers) and keeps them in step
	// with the caller. A stateless child reads both in each request's _meta.
	keepsSession() bool
	// extension reports that the child offers the extension name.
	extension(name string) bool
}

// legacyDialect is the dialect of a session opened with initialize.
type legacyDialect struct{ cn *conn }

func (legacyDialect) opened(context.Context)                          {}
func (legacyDialect) received(params json.RawMessage) json.RawMessage { return params }
func (legacyDialect) encode(*upstream.Request, []string) error        { return nil }
func (legacyDialect) keepsSession() bool                              { return true }
func (legacyDialect) extension(string) bool                           { return false }

func (legacyDialect) local(context.Context, string, any) (json.RawMessage, bool, error) {
	return nil, false, nil
}

func (d legacyDialect) notify(method string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = d.cn.Transport.Notify(ctx, method, nil)
}

func (d legacyDialect) cancel(id json.RawMessage, cause error) { d.cn.sendCancel(id, cause) }

// flush: a legacy child may write a request's progress and log messages after
// its answer (mcp-go writes them from another goroutine); ping round trips let
// them in first. One was seen to lose a message now and then on a loaded
// machine; two leave the child's writer twice the time.
func (d legacyDialect) flush(ctx context.Context) {
	for range 2 {
		_, _ = d.cn.request(ctx, string(mcp.MethodPing), nil)
	}
}

// modernDialect is the dialect of a stateless child.
type modernDialect struct{ cn *conn }

// opened opens the connection's listen stream, which carries what a legacy
// session's own stream does: list changes and resource updates.
func (d modernDialect) opened(ctx context.Context) { go d.cn.Listen.Run(ctx) }

// received drops the stream's subscription id: it is Nexus's, not its clients'.
func (modernDialect) received(params json.RawMessage) json.RawMessage {
	fields, err := jsonwalk.Members(params)
	if err != nil {
		return params
	}
	meta, err := jsonwalk.Members(fields["_meta"])
	if err != nil {
		return params
	}
	if _, ok := meta[mcp.MetaKeySubscriptionID]; !ok {
		return params
	}
	delete(meta, mcp.MetaKeySubscriptionID)
	if len(meta) == 0 {
		delete(fields, "_meta")
	} else {
		fields["_meta"] = jsonwalk.Object(meta)
	}
	return jsonwalk.Object(fields)
}

// local answers logging/setLevel, resources/(un)subscribe and ping
// (modernLocal).
func (d modernDialect) local(ctx context.Context, method string, params any) (json.RawMessage, bool, error) {
	return d.cn.modernLocal(ctx, method, params)
}

// encode merges Nexus's _meta into the params and, over HTTP, sets the
// standard headers.
func (d modernDialect) encode(req *upstream.Request, extensions []string) error {
	cn := d.cn
	m := cn.modernMeta(cn.Version())
	m.Extensions = extensions
	raw, err := upstream.ModernParams(req.Params, m)
	if err != nil {
		return fmt.Errorf("the params of %s: %w", req.Method, err)
	}
	req.Params, req.Header = raw, upstream.StandardHeaders(m.Version, req.Method, raw, cn.ParamTool)
	return nil
}

// notify sends nothing: such a child takes no notification from its client
// but cancellations (initialized and roots/list_changed went with the
// session).
func (modernDialect) notify(string) {}

// cancel: over HTTP, the child learns it from the request's stream closing.
func (d modernDialect) cancel(id json.RawMessage, cause error) {
	if _, ok := d.cn.Transport.MCP().(transport.HTTPConnection); ok {
		return
	}
	d.cn.sendCancel(id, cause)
}

// flush does nothing: the era has no ping to let a late message in with;
// the wait for what arrived before the answer (conn.catchUp) is all it gets.
func (modernDialect) flush(context.Context) {}

func (modernDialect) keepsSession() bool { return false }

func (d modernDialect) extension(name string) bool {
	_, ok := d.cn.Caps.Extensions[name]
	return ok
}
