package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// children are the replay's MCP servers: one streamable HTTP server per
// recorded server, at /sN/mcp on one loopback listener, each with the
// tools the trace calls on it. A tool answers the call the replay expects
// next (expect) with that call's recorded output: its hash, padded to the
// recorded length, so a hit is checked against what the real tool said
// and the answer crossing the gateway has the recorded size.
type children struct {
	srv     *http.Server
	base    string
	servers map[string]string   // recorded server -> config name (sN)
	tools   map[string]toolSpec // recorded server + "\x00" + tool -> spec
	expect  atomic.Pointer[Call]
	calls   atomic.Int64 // tool calls the children answered
}

// toolSpec is one tool as a child lists it.
type toolSpec struct {
	server string // config name
	name   string // the child's name for it (tN: recorded names may be too long to prefix)
	rw     string // read, write or other
}

// recordedTool is a recorded call's tool name, with its action.
func recordedTool(c Call) string {
	if c.Action != nil && *c.Action != "" {
		return c.Tool + "__" + *c.Action
	}
	return c.Tool
}

func (ch *children) spec(c Call) toolSpec { return ch.tools[c.Server+"\x00"+recordedTool(c)] }

// startChildren serves the children of every server and tool calls use.
func startChildren(calls []Call) (*children, error) {
	ch := &children{servers: map[string]string{}, tools: map[string]toolSpec{}}
	byServer := map[string][]toolSpec{}
	props := map[string]map[string]any{}
	for _, c := range calls {
		s, ok := ch.servers[c.Server]
		if !ok {
			s = fmt.Sprintf("s%d", len(ch.servers))
			ch.servers[c.Server] = s
		}
		key := c.Server + "\x00" + recordedTool(c)
		t, ok := ch.tools[key]
		if !ok {
			t = toolSpec{server: s, name: fmt.Sprintf("t%d", len(ch.tools)), rw: c.RW}
			ch.tools[key] = t
			byServer[s] = append(byServer[s], t)
			props[t.name] = map[string]any{}
		}
		// The schema has the string arguments the trace passes, so free
		// text (query, q, text...) is compared by similarity as with the
		// real tool's schema.
		var args map[string]json.RawMessage
		if json.Unmarshal(c.Arguments, &args) == nil {
			for k, v := range args {
				if len(v) > 0 && v[0] == '"' {
					props[t.name][k] = map[string]string{"type": "string"}
				}
			}
		}
	}
	mux := http.NewServeMux()
	for s, tools := range byServer {
		ms := server.NewMCPServer(s, "1", server.WithToolCapabilities(false))
		for _, t := range tools {
			schema, _ := json.Marshal(map[string]any{"type": "object", "properties": props[t.name]})
			tool := mcp.Tool{Name: t.name, RawInputSchema: schema}
			no, yes := false, true
			switch t.rw {
			case "read":
				tool.Annotations = mcp.ToolAnnotation{ReadOnlyHint: &yes}
			case "write":
				tool.Annotations = mcp.ToolAnnotation{ReadOnlyHint: &no, DestructiveHint: &yes}
			}
			ms.AddTool(tool, ch.answer)
		}
		mux.Handle("/"+s+"/mcp", server.NewStreamableHTTPServer(ms, server.WithEndpointPath("/"+s+"/mcp")))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("replay children: %w", err)
	}
	ch.base = "http://" + l.Addr().String()
	ch.srv = &http.Server{Handler: mux}
	go ch.srv.Serve(l)
	return ch, nil
}

// answer is every tool's handler: the expected call's recorded output.
func (ch *children) answer(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	c := ch.expect.Load()
	if c == nil || ch.spec(*c).name != req.Params.Name {
		return nil, fmt.Errorf("replay child: unexpected call of %s", req.Params.Name)
	}
	ch.calls.Add(1)
	text := c.SHA1
	if pad := int(c.Chars) - len(text); pad > 0 {
		text += " " + strings.Repeat("x", pad-1)
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{mcp.NewTextContent(text)},
		StructuredContent: map[string]string{"sha1": c.SHA1, "session": c.Session},
		IsError:           c.IsError,
	}, nil
}

// config is a gateway config with the children as its servers: every
// tool may be called, every answer of a read-only tool is kept.
func (ch *children) config() []byte {
	type srv struct {
		URL string `json:"url"`
	}
	cfg := struct {
		Servers map[string]srv    `json:"servers"`
		TTL     map[string]string `json:"ttl"`
		Policy  map[string]any    `json:"policy"`
	}{Servers: map[string]srv{}, TTL: map[string]string{"*": "never"},
		Policy: map[string]any{"default": map[string]any{"allow": []string{"*"}}}}
	for _, s := range ch.servers {
		cfg.Servers[s] = srv{URL: ch.base + "/" + s + "/mcp"}
	}
	b, _ := json.Marshal(&cfg)
	return b
}

func (ch *children) close() { ch.srv.Close() }
