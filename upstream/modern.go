package upstream

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
)

// ModernMeta is what a 2026-07-28 request says of its client in its _meta:
// the era has no session to say it once, so every request says it.
type ModernMeta struct {
	Version      string // the protocol version the request speaks
	Client       mcp.Implementation
	Capabilities mcp.ClientCapabilities
	// Extensions are declared beside Capabilities, for this request alone.
	Extensions []string
	// LogLevel, when not "", asks the server to log at that level.
	LogLevel string
}

// ModernParams is params (JSON text, a value to encode, or nil) with m merged
// into its _meta. The caller's own _meta keys (a progress token) are kept;
// params that are not an object, or a _meta that is not one, cannot carry it.
func ModernParams(params any, m ModernMeta) (json.RawMessage, error) {
	var raw json.RawMessage
	switch p := params.(type) {
	case nil:
	case json.RawMessage:
		raw = p
	default:
		b, err := json.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("encoding the params: %w", err)
		}
		raw = b
	}
	fields := map[string]json.RawMessage{}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &fields); err != nil {
			return nil, fmt.Errorf("params that are not an object cannot carry _meta: %w", err)
		}
	}
	meta := map[string]json.RawMessage{}
	if v, ok := fields["_meta"]; ok && string(v) != "null" {
		if err := json.Unmarshal(v, &meta); err != nil {
			return nil, fmt.Errorf("the params' _meta is not an object: %w", err)
		}
	}
	set := func(k string, v any) {
		if b, err := json.Marshal(v); err == nil {
			meta[k] = b
		}
	}
	set(mcp.MetaKeyProtocolVersion, m.Version)
	set(mcp.MetaKeyClientInfo, m.Client)
	caps := m.Capabilities
	if len(m.Extensions) > 0 {
		caps.Extensions = maps.Clone(caps.Extensions)
		if caps.Extensions == nil {
			caps.Extensions = map[string]any{}
		}
		for _, e := range m.Extensions {
			caps.Extensions[e] = map[string]any{}
		}
	}
	set(mcp.MetaKeyClientCapabilities, caps)
	if m.LogLevel != "" {
		set(mcp.MetaKeyLogLevel, m.LogLevel)
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	fields["_meta"] = b
	return json.Marshal(fields)
}

// StandardHeaders are the HTTP headers a 2026-07-28 request of method carries:
// MCP-Protocol-Version, Mcp-Method and, for a call, a read or a prompt,
// Mcp-Name; nil for a method that has none. A call of a tool whose schema
// mirrors arguments into headers (x-mcp-header) carries those too, which the
// server checks against the body: tool gives the server's definition of a
// tool by name, nil for one that mirrors nothing.
func StandardHeaders(version, method string, params json.RawMessage, tool func(name string) *mcp.Tool) http.Header {
	std := mcp.StandardHeaders(version, mcp.MCPMethod(method), params)
	if len(std) == 0 {
		return nil
	}
	h := make(http.Header, len(std)+1)
	for k, v := range std {
		h.Set(k, v)
	}
	h.Set(mcp.HeaderProtocolVersion, version)
	if mcp.MCPMethod(method) == mcp.MethodToolsCall && tool != nil {
		var call struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(params, &call) == nil {
			if t := tool(call.Name); t != nil {
				for k, v := range mcp.GenerateParamHeaders(t, params) {
					h.Set(k, v)
				}
			}
		}
	}
	return h
}
