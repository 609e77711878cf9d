package aggregation

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/config"
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
	h := upstream.Handshake{Server: cfg, Eras: &c.eras, Key: eraKey(cfg), Reuse: owner != nil, ProbeWait: c.probeWait, Log: c.log}
	return h.Open(ctx, cn.Conn)
}

// nexusInfo is who Nexus says it is to its children.
func nexusInfo() mcp.Implementation { return mcp.Implementation{Name: "nexus", Version: Version} }

// paramHeaderTool is the child's definition of the tool it calls name when its
// schema mirrors arguments into headers (x-mcp-header), nil otherwise.
func (c *child) paramHeaderTool(name string) *mcp.Tool {
	return c.life.Lists().headerTools[name]
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

// knownCaps are the capabilities the child declared: its live connection's, or
// the ones last found while it is down. ok is false before it ever answered.
func (c *child) knownCaps() (caps mcp.ServerCapabilities, ok bool) {
	if cn, _ := c.life.Current(); cn != nil {
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
