package aggregation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/upstream"
)

// This file holds what the gateway keeps of a child's protocol era: which
// era each connection speaks is settled by its handshake
// (upstream.Handshake), and the era found is remembered in child.eras.

// eraKey is what a remembered era belongs to: the process as launched (stdio),
// the URL (HTTP).
func eraKey(s *config.Server) string {
	if s.Transport == config.TransportStdio {
		return launchKey(s)
	}
	return s.Transport + " " + s.URL
}

// handshake settles the era of cn and performs its opening: initialize for a
// legacy child, server/discover for a modern one. owner is the client session
// the connection serves; its connection reuses a remembered modern era without
// asking the child again.
func (c *child) handshake(ctx context.Context, cn *conn, owner *session) error {
	cfg := c.config()
	h := upstream.Handshake{Server: cfg, Eras: &c.eras, Key: eraKey(cfg), Reuse: owner != nil,
		Info: nexusInfo(), Declared: cn.Declared, Meta: cn.modernMeta, ProbeWait: c.probeWait, Log: c.log}
	return h.Open(ctx, cn.Conn)
}

// modern reports whether cn speaks the stateless protocol (2026-07-28 and
// later): no session, every request carries its _meta, changes arrive on a
// subscriptions/listen stream, and the child never sends requests back.
func (cn *conn) modern() bool { return mcp.IsModernProtocol(cn.Version()) }

// dialect is how cn speaks its child's era (dialect.go).
func (cn *conn) dialect() dialect {
	if cn.modern() {
		return modernDialect{cn}
	}
	return legacyDialect{cn}
}

// nexusInfo is who Nexus says it is to its children.
func nexusInfo() mcp.Implementation { return mcp.Implementation{Name: "nexus", Version: Version} }

// modernMeta is what cn's requests at version say of their client: Nexus, the
// capabilities cn declares, the level its child is asked to log at.
func (cn *conn) modernMeta(version string) upstream.ModernMeta {
	return upstream.ModernMeta{Version: version, Client: nexusInfo(), Capabilities: cn.Declared, LogLevel: cn.logLevel()}
}

// logLevel is the level a modern child is asked to log at: its client
// session's, for a session's own connection; the most verbose any session set,
// for a shared one (see forwardSharedLevel).
func (cn *conn) logLevel() string {
	if cn.owner != nil {
		if l := cn.owner.level.Load(); l != levelUnset && int(l) < len(logLevels) {
			return logLevels[l]
		}
		return ""
	}
	cn.levelMu.Lock()
	defer cn.levelMu.Unlock()
	return cn.sharedLevel
}

// paramHeaderTool is the child's definition of the tool it calls name when its
// schema mirrors arguments into headers (x-mcp-header), nil otherwise.
func (c *child) paramHeaderTool(name string) *mcp.Tool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.headerTools[name]
}

// headerToolsOf decodes, once per listing, the tools whose schema mirrors arguments
// into headers; nil when none does.
func headerToolsOf(raws []json.RawMessage) map[string]*mcp.Tool {
	var out map[string]*mcp.Tool
	for _, raw := range raws {
		if !bytes.Contains(raw, []byte("x-mcp-header")) {
			continue
		}
		var t mcp.Tool
		if json.Unmarshal(raw, &t) != nil {
			continue
		}
		if out == nil {
			out = map[string]*mcp.Tool{}
		}
		out[t.Name] = &t
	}
	return out
}

// describeProtocol says a protocol version and how it is spoken, for people:
// "2026-07-28 (stateless)", "2025-11-25 (session)".
func describeProtocol(version string) string {
	switch {
	case version == "":
		return ""
	case mcp.IsModernProtocol(version):
		return version + " (stateless)"
	}
	return version + " (session)"
}

// modernLocal answers the legacy requests the modern era has no method for, so
// that the gateway's routes need not know a child's era: logging/setLevel sets
// the level later requests carry in _meta, resources/subscribe and
// resources/unsubscribe change the listen stream, ping asks server/discover.
// ok is false for every other method, which goes to the child.
func (cn *conn) modernLocal(ctx context.Context, method string, params any) (raw json.RawMessage, ok bool, err error) {
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
			return &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("the params of %s: %v", method, err)}
		}
		return nil
	}
	empty := json.RawMessage(`{}`)
	switch mcp.MCPMethod(method) {
	case mcp.MethodSetLogLevel:
		if err := decode(); err != nil {
			return nil, true, err
		}
		cn.levelMu.Lock()
		cn.sharedLevel = p.Level
		cn.levelMu.Unlock()
		return empty, true, nil
	case mcp.MethodResourcesSubscribe, mcp.MethodResourcesUnsubscribe:
		if err := decode(); err != nil {
			return nil, true, err
		}
		if mcp.MCPMethod(method) == mcp.MethodResourcesSubscribe {
			err = cn.Listen.Subscribe(ctx, p.URI)
		} else {
			cn.Listen.Unsubscribe(p.URI)
		}
		if err != nil {
			return nil, true, err
		}
		return empty, true, nil
	case mcp.MethodPing:
		if _, err := cn.requestID(ctx, cn.NextID(), string(mcp.MethodServerDiscover), map[string]any{}, outgoing{}); err != nil {
			return nil, true, err
		}
		return empty, true, nil
	}
	return nil, false, nil
}

// knownCaps are the capabilities the child declared: its live connection's, or
// the ones last found while it is down. ok is false before it ever answered.
func (c *child) knownCaps() (caps mcp.ServerCapabilities, ok bool) {
	c.mu.Lock()
	cn := c.conn
	c.mu.Unlock()
	if cn != nil {
		return cn.Caps, true
	}
	if e := c.eras.Get(eraKey(c.config())); e != nil {
		return e.Caps, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.said != nil { // an idle server: what it said last run
		return c.said.Capabilities, true
	}
	return caps, false
}
