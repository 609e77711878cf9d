package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/internal/jsonwalk"
)

// A Dialect is how a connection speaks its server's protocol era: legacy in
// a session opened with initialize (2025-11-25 and earlier), modern for a
// stateless server (2026-07-28 and later), whose every request carries its
// version, identity and capabilities. The handshake settles the era
// (Handshake); everything the era changes in how Nexus talks to the server
// afterwards is a method here, so that the rest of Nexus asks a connection's
// dialect what to do, not which era it speaks.
type Dialect interface {
	// Opened runs once the handshake is over.
	Opened(ctx context.Context)
	// Received tidies the params of a notification of the server's before it
	// is routed.
	Received(params json.RawMessage) json.RawMessage
	// Local answers a request the era has no method for (a legacy one, which
	// the gateway's routes send whatever the era); ok false means the request
	// goes to the server.
	Local(ctx context.Context, method string, params any) (raw json.RawMessage, ok bool, err error)
	// Encode makes req, with extensions declared for it alone, what the
	// server reads.
	Encode(req *Request, extensions []string) error
	// Notify sends the server a notification without params.
	Notify(method string)
	// Cancel tells the server to stop working on request id.
	Cancel(id json.RawMessage, cause error)
	// Flush lets in what the server may still write for a request it has
	// answered (its last progress, a log message), for a caller whose stream
	// ends with the answer.
	Flush(ctx context.Context)
	// KeepsSession reports a server that holds its client's logging level and
	// roots between requests: Nexus sets them by requests of their own
	// (logging/setLevel, the roots/list it answers) and keeps them in step
	// with the caller. A stateless server reads both in each request's _meta.
	KeepsSession() bool
	// Extension reports that the server offers the extension name.
	Extension(name string) bool
}

// Modern reports whether the connection speaks the stateless protocol
// (2026-07-28 and later): no session, every request carries its _meta,
// changes arrive on a subscriptions/listen stream, and the server never sends
// requests back.
func (c *Conn) Modern() bool { return mcp.IsModernProtocol(c.Version()) }

// Dialect is how the connection speaks its server's era.
func (c *Conn) Dialect() Dialect {
	if c.Modern() {
		return modernDialect{c}
	}
	return legacyDialect{c}
}

// ModernMeta is what the connection's requests at version say of their
// client: Nexus (Info), the capabilities it declares, the level its server is
// asked to log at.
func (c *Conn) ModernMeta(version string) ModernMeta {
	return ModernMeta{Version: version, Client: c.Info, Capabilities: c.Declared, LogLevel: c.logLevel()}
}

// logLevel is the level a modern server is asked to log at: Level's, when
// set (a client session's connection), else the one logging/setLevel last set
// on the connection (a shared one).
func (c *Conn) logLevel() string {
	if c.Level != nil {
		return c.Level()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sharedLevel
}

// legacyDialect is the dialect of a session opened with initialize.
type legacyDialect struct{ c *Conn }

func (legacyDialect) Opened(context.Context)                          {}
func (legacyDialect) Received(params json.RawMessage) json.RawMessage { return params }
func (legacyDialect) Encode(*Request, []string) error                 { return nil }
func (legacyDialect) KeepsSession() bool                              { return true }
func (legacyDialect) Extension(string) bool                           { return false }

func (legacyDialect) Local(context.Context, string, any) (json.RawMessage, bool, error) {
	return nil, false, nil
}

func (d legacyDialect) Notify(method string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = d.c.Transport.Notify(ctx, method, nil)
}

func (d legacyDialect) Cancel(id json.RawMessage, cause error) { d.c.sendCancel(id, cause) }

// Flush: a legacy server may write a request's progress and log messages
// after its answer (mcp-go writes them from another goroutine); ping round
// trips let them in first. One was seen to lose a message now and then on a
// loaded machine; two leave the server's writer twice the time.
func (d legacyDialect) Flush(ctx context.Context) {
	for range 2 {
		_, _ = d.c.Request(ctx, string(mcp.MethodPing), nil)
	}
}

// modernDialect is the dialect of a stateless server.
type modernDialect struct{ c *Conn }

// Opened opens the connection's listen stream, which carries what a legacy
// session's own stream does: list changes and resource updates.
func (d modernDialect) Opened(ctx context.Context) { go d.c.Listen.Run(ctx) }

// Received drops the stream's subscription id: it is Nexus's, not its
// clients'.
func (modernDialect) Received(params json.RawMessage) json.RawMessage {
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

// Local answers the legacy requests the modern era has no method for, so
// that the gateway's routes need not know a server's era: logging/setLevel
// sets the level later requests carry in _meta, resources/subscribe and
// resources/unsubscribe change the listen stream, ping asks server/discover.
// ok is false for every other method, which goes to the server.
func (d modernDialect) Local(ctx context.Context, method string, params any) (raw json.RawMessage, ok bool, err error) {
	c := d.c
	var p struct {
		Level string `json:"level"`
		URI   string `json:"uri"`
	}
	decode := func() error {
		b, err := json.Marshal(params)
		if err == nil {
			err = json.Unmarshal(b, &p)
		}
		if err != nil {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("the params of %s: %v", method, err)}
		}
		return nil
	}
	empty := json.RawMessage(`{}`)
	switch mcp.MCPMethod(method) {
	case mcp.MethodSetLogLevel:
		if err := decode(); err != nil {
			return nil, true, err
		}
		c.mu.Lock()
		c.sharedLevel = p.Level
		c.mu.Unlock()
		return empty, true, nil
	case mcp.MethodResourcesSubscribe, mcp.MethodResourcesUnsubscribe:
		if err := decode(); err != nil {
			return nil, true, err
		}
		if mcp.MCPMethod(method) == mcp.MethodResourcesSubscribe {
			err = c.Listen.Subscribe(ctx, p.URI)
		} else {
			c.Listen.Unsubscribe(p.URI)
		}
		if err != nil {
			return nil, true, err
		}
		return empty, true, nil
	case mcp.MethodPing:
		if _, err := c.RequestID(ctx, c.NextID(), string(mcp.MethodServerDiscover), map[string]any{}, Outgoing{}); err != nil {
			return nil, true, err
		}
		return empty, true, nil
	}
	return nil, false, nil
}

// Encode merges Nexus's _meta into the params and, over HTTP, sets the
// standard headers.
func (d modernDialect) Encode(req *Request, extensions []string) error {
	c := d.c
	m := c.ModernMeta(c.Version())
	m.Extensions = extensions
	raw, err := ModernParams(req.Params, m)
	if err != nil {
		return fmt.Errorf("the params of %s: %w", req.Method, err)
	}
	req.Params, req.Header = raw, StandardHeaders(m.Version, req.Method, raw, c.ParamTool)
	return nil
}

// Notify sends nothing: such a server takes no notification from its client
// but cancellations (initialized and roots/list_changed went with the
// session).
func (modernDialect) Notify(string) {}

// Cancel: over HTTP, the server learns it from the request's stream closing.
func (d modernDialect) Cancel(id json.RawMessage, cause error) {
	if _, ok := d.c.Transport.MCP().(transport.HTTPConnection); ok {
		return
	}
	d.c.sendCancel(id, cause)
}

// Flush does nothing: the era has no ping to let a late message in with; the
// wait for what arrived before the answer (CatchUp) is all it gets.
func (modernDialect) Flush(context.Context) {}

func (modernDialect) KeepsSession() bool { return false }

func (d modernDialect) Extension(name string) bool {
	_, ok := d.c.Caps.Extensions[name]
	return ok
}
