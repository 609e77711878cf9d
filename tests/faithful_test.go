package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// A faithful proxy, shown call by call: every method of real npm servers is made
// once directly and once through one `nexus serve` that has them all as children,
// and the two answers are compared after undoing what Nexus does on purpose (tool
// and prompt names under their server's, colliding URIs in their namespaced form,
// Nexus's own "nexus/" _meta keys). What still differs is in faithfulDifferences,
// each with its reason; the README's table says the same.

// faithfulDifferences are the differences a client may see, keyed by server,
// method and target. A difference not listed fails the test, and so does a listed
// one that no longer shows, so the list (and the README) stays true.
var faithfulDifferences = map[string]string{
	"everything initialize serverInfo":           "the client talks to Nexus: serverInfo is Nexus's, and each child's instructions are merged under its server's name",
	"everything-sse initialize serverInfo":       "the client talks to Nexus: serverInfo is Nexus's, and each child's instructions are merged under its server's name",
	"everything-http initialize serverInfo":      "the client talks to Nexus: serverInfo is Nexus's, and each child's instructions are merged under its server's name",
	"files initialize serverInfo":                "the client talks to Nexus: serverInfo is Nexus's, and each child's instructions are merged under its server's name",
	"memory-a initialize serverInfo":             "the client talks to Nexus: serverInfo is Nexus's, and each child's instructions are merged under its server's name",
	"memory-b initialize serverInfo":             "the client talks to Nexus: serverInfo is Nexus's, and each child's instructions are merged under its server's name",
	"app initialize serverInfo":                  "the client talks to Nexus: serverInfo is Nexus's, and each child's instructions are merged under its server's name",
	"everything prompts/get no-such-prompt":      "an unknown prompt is Nexus's own error: same code (-32602), Nexus's message",
	"everything-sse prompts/get no-such-prompt":  "an unknown prompt is Nexus's own error: same code (-32602), Nexus's message",
	"everything-http prompts/get no-such-prompt": "an unknown prompt is Nexus's own error: same code (-32602), Nexus's message",
	"everything-own initialize serverInfo":       "the client talks to Nexus: serverInfo is Nexus's, and each child's instructions are merged under its server's name",
	"everything-own tools/call no-such-tool":     "an unknown tool is Nexus's own error (-32602, before any routing): no child owns the name",
	"everything-own prompts/get no-such-prompt":  "an unknown prompt is Nexus's own error: same code (-32602), Nexus's message",
	"everything-own tools/call get-env":          "a child runs with the environment its config gives it, not the environment of whoever connects",
	"everything tools/call get-env":              "a child runs with the environment its config gives it, not the environment of whoever connects",
	"everything-sse tools/call no-such-tool":     "an unknown tool is Nexus's own error (-32602, before any routing): no child owns the name",
	"everything tools/call no-such-tool":         "an unknown tool is Nexus's own error (-32602, before any routing): no child owns the name",
	"everything-http tools/call no-such-tool":    "an unknown tool is Nexus's own error (-32602, before any routing): no child owns the name",
}

// peerCapabilities is what both clients declare where their transport can answer
// a server's requests, so a server lists the same capability-dependent tools to each.
var peerCapabilities = map[string]any{
	"sampling": map[string]any{}, "elicitation": map[string]any{}, "roots": map[string]any{"listChanged": true},
}

// rawPeer is an MCP client that keeps every answer as the JSON it was.
type rawPeer struct {
	fatalf func(format string, args ...any) // the test's Fatalf, where it runs
	tr     transport.Interface
	ids    atomic.Int64
	init   json.RawMessage
}

// answerPeerRequest answers what a server asks a client, the same way for both
// connections.
func answerPeerRequest(_ context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	var result any
	switch req.Method {
	case "sampling/createMessage":
		result = map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "sampled by the faithful client"}, "model": "faithful", "stopReason": "endTurn"}
	case "roots/list":
		result = map[string]any{"roots": []map[string]any{{"uri": "file:///faithful-root", "name": "faithful"}}}
	case "elicitation/create":
		result = map[string]any{"action": "decline"}
	case "ping":
		result = map[string]any{}
	default:
		return &transport.JSONRPCResponse{JSONRPC: "2.0", ID: req.ID, Error: &mcp.JSONRPCErrorDetails{Code: mcp.METHOD_NOT_FOUND, Message: req.Method}}, nil
	}
	b, err := json.Marshal(result)
	return &transport.JSONRPCResponse{JSONRPC: "2.0", ID: req.ID, Result: b}, err
}

// dialPeerWhen connects to tr and initializes it, when ready is not nil only
// once ready holds (see serveStdioReady).
func dialPeerWhen(t *testing.T, what string, tr transport.Interface, ready func() bool) *rawPeer {
	t.Helper()
	return startPeer(t, what, tr).dial(ready)
}

// startedPeer is a transport started (a stdio server's process running), not
// yet initialized.
type startedPeer struct {
	t            *testing.T
	what         string
	tr           transport.Interface
	life         context.Context
	capabilities map[string]any
}

// startPeer starts tr; dial initializes it. A test that talks to several servers
// one after another starts them all first, so their processes load side by side.
func startPeer(t *testing.T, what string, tr transport.Interface) startedPeer {
	t.Helper()
	// A transport that cannot carry a server's requests back (mcp-go's SSE
	// client) declares no capability that would make the server send one.
	capabilities := map[string]any{}
	if bt, ok := tr.(transport.BidirectionalInterface); ok {
		bt.SetRequestHandler(answerPeerRequest)
		capabilities = peerCapabilities
	}
	// The transport keeps the context Start is given for its whole life (an SSE
	// stream ends with it), so only the handshake in dial is bounded.
	life, end := context.WithCancel(context.Background())
	t.Cleanup(end)
	if err := tr.Start(life); err != nil {
		t.Fatalf("connecting to %s: %v", what, err)
	}
	t.Cleanup(func() { tr.Close() })
	return startedPeer{t: t, what: what, tr: tr, life: life, capabilities: capabilities}
}

// dial initializes the started peer, when ready is not nil only once ready holds
// (see serveStdioReady).
func (sp startedPeer) dial(ready func() bool) *rawPeer {
	t, what, tr, capabilities := sp.t, sp.what, sp.tr, sp.capabilities
	t.Helper()
	ctx, cancel := context.WithTimeout(sp.life, 60*time.Second)
	defer cancel()
	if ready != nil {
		eventually(t, 60*time.Second, what+" ready to initialize", ready)
	}
	p := &rawPeer{fatalf: t.Fatalf, tr: tr}
	res, rpcErr := p.request("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": capabilities,
		"clientInfo": map[string]any{"name": "faithful-test", "version": "1"}})
	if rpcErr != nil {
		t.Fatalf("initialize %s: %+v", what, rpcErr)
	}
	p.init = res
	if err := tr.SendNotification(ctx, mcp.JSONRPCNotification{JSONRPC: "2.0", Notification: mcp.Notification{Method: "notifications/initialized"}}); err != nil {
		t.Fatalf("initialized %s: %v", what, err)
	}
	return p
}

func (p *rawPeer) request(method string, params any) (json.RawMessage, *mcp.JSONRPCErrorDetails) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := p.tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(p.ids.Add(1)), Method: method, Params: params})
	if err != nil {
		return nil, &mcp.JSONRPCErrorDetails{Message: "transport: " + err.Error()}
	}
	return resp.Result, resp.Error
}

// list returns a list method's items, keyed by field key.
func (p *rawPeer) list(method, field, key string) map[string]map[string]any {
	res, rpcErr := p.request(method, map[string]any{})
	out := map[string]map[string]any{}
	if rpcErr != nil {
		return out
	}
	var m map[string][]map[string]any
	if err := json.Unmarshal(res, &m); err != nil {
		p.fatalf("%s: %v in %s", method, err, res)
	}
	for _, it := range m[field] {
		if k, ok := it[key].(string); ok {
			out[k] = it
		}
	}
	return out
}

// freePort is a port on 127.0.0.1 nothing listens on as it returns.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startHTTPPeer runs an npm server's HTTP transport on 127.0.0.1 until the test ends.
func startHTTPPeer(t *testing.T, node string, args ...string) int {
	t.Helper()
	port := freePort(t)
	loopback, _ := filepath.Abs(filepath.Join("testdata", "loopback.cjs"))
	cmd := exec.Command(node, append([]string{"-r", loopback}, args...)...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	// What the server says of its sessions is shown when the test fails.
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%v said:\n%s", args, stderr.String())
		}
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			return port
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v never listened on %d", args, port)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// brokeOnTheWay reports whether an answer through Nexus says the request's
// connection to the server failed (mcp-go's HTTP and SSE transports' words).
func brokeOnTheWay(res json.RawMessage, rpcErr *mcp.JSONRPCErrorDetails) bool {
	const broke = "failed to send request"
	return bytes.Contains(res, []byte(broke)) || rpcErr != nil && strings.Contains(rpcErr.Message, broke)
}

// nodeHTTPClient is a direct client's HTTP client for a Node server. It does not
// reuse a connection idle for 3 s, as the gateway does not: Node closes one after
// 5 s, and a request sent on it as it closes fails unread.
func nodeHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.IdleConnTimeout = 3 * time.Second
	return &http.Client{Transport: tr}
}

// probe is one request, written as a client of the server alone would send it.
type probe struct {
	method, target string
	params         map[string]any
	// volatile: the answer changes from call to call (a clock, file access
	// times), so only its shape is compared.
	volatile bool
	// asksClient: the server asks the client something during the call, so the
	// probe runs only where the direct transport can answer.
	asksClient bool
}

// faithfulServer is one child: how to reach it directly and what to ask it.
type faithfulServer struct {
	name   string         // its server name in Nexus
	config map[string]any // its entry in Nexus's config
	direct func(t *testing.T) transport.Interface
	probes []probe
}

// TestFaithfulProxy is the table of issue "A faithful proxy": server-everything on
// stdio (shared, and with an upstream session per client), SSE and streamable HTTP, the filesystem server, two memory servers and an
// MCP App, each method made directly and through Nexus.
func TestFaithfulProxy(t *testing.T) {
	t.Parallel()
	node, everything := everythingServer(t)
	_, filesystem := peerScript(t, "@modelcontextprotocol/server-filesystem/dist/index.js")
	_, memory := peerScript(t, "@modelcontextprotocol/server-memory/dist/index.js")
	_, app := peerScript(t, "@modelcontextprotocol/server-basic-react/dist/index.js")

	ssePort := startHTTPPeer(t, node, everything, "sse")
	httpPort := startHTTPPeer(t, node, everything, "streamableHttp")
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "notes.txt"), []byte("line one\nline two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	// Each memory server keeps its graph in a file: one file per connection,
	// so the direct and the proxied server start from the same empty graph.
	graphs := t.TempDir()
	graph := func(name string) []string {
		return []string{"MEMORY_FILE_PATH=" + filepath.Join(graphs, name+".jsonl")}
	}

	stdioDirect := func(env []string, args ...string) func(*testing.T) transport.Interface {
		return func(*testing.T) transport.Interface { return transport.NewStdio(node, env, args...) }
	}
	everythingProbes := append(commonProbes(),
		probe{method: "tools/call", target: "echo", params: map[string]any{"name": "echo", "arguments": map[string]any{"message": "faithful"}}},
		probe{method: "tools/call", target: "get-sum", params: map[string]any{"name": "get-sum", "arguments": map[string]any{"a": 2, "b": 3}}},
		probe{method: "tools/call", target: "get-tiny-image", params: map[string]any{"name": "get-tiny-image", "arguments": map[string]any{}}},
		probe{method: "tools/call", target: "get-annotated-message", params: map[string]any{"name": "get-annotated-message", "arguments": map[string]any{"messageType": "error", "includeImage": true}}},
		probe{method: "tools/call", target: "get-structured-content", params: map[string]any{"name": "get-structured-content", "arguments": map[string]any{"location": "Chicago"}}},
		probe{method: "tools/call", target: "get-resource-links", params: map[string]any{"name": "get-resource-links", "arguments": map[string]any{"count": 2}}},
		// The resource it returns says when it was made (to the second).
		probe{method: "tools/call", target: "get-resource-reference", params: map[string]any{"name": "get-resource-reference", "arguments": map[string]any{"resourceType": "Text", "resourceId": 2}}, volatile: true},
		probe{method: "tools/call", target: "get-env", params: map[string]any{"name": "get-env", "arguments": map[string]any{}}},
		probe{method: "tools/call", target: "trigger-long-running-operation", params: map[string]any{"name": "trigger-long-running-operation", "arguments": map[string]any{"duration": 1, "steps": 1}}},
		probe{method: "tools/call", target: "gzip-file-as-resource", params: map[string]any{"name": "gzip-file-as-resource", "arguments": map[string]any{"name": "hello.gz", "data": "data:text/plain;base64,aGVsbG8=", "outputType": "resource"}}},
		probe{method: "tools/call", target: "trigger-sampling-request", params: map[string]any{"name": "trigger-sampling-request", "arguments": map[string]any{"prompt": "hi", "maxTokens": 10}}, asksClient: true},
		probe{method: "tools/call", target: "trigger-elicitation-request", params: map[string]any{"name": "trigger-elicitation-request", "arguments": map[string]any{}}, asksClient: true},
		probe{method: "tools/call", target: "get-roots-list", params: map[string]any{"name": "get-roots-list", "arguments": map[string]any{}}, asksClient: true},
		probe{method: "tools/call", target: "simulate-research-query (no task)", params: map[string]any{"name": "simulate-research-query", "arguments": map[string]any{"topic": "proxies"}}},
		probe{method: "tools/call", target: "no-such-tool", params: map[string]any{"name": "no-such-tool", "arguments": map[string]any{}}},
		probe{method: "prompts/get", target: "simple-prompt", params: map[string]any{"name": "simple-prompt"}},
		probe{method: "prompts/get", target: "args-prompt", params: map[string]any{"name": "args-prompt", "arguments": map[string]any{"city": "Lyon", "state": "Rhône"}}},
		// Its embedded resource says when it was made (to the second), as above.
		probe{method: "prompts/get", target: "resource-prompt", params: map[string]any{"name": "resource-prompt", "arguments": map[string]any{"resourceType": "Text", "resourceId": "3"}}, volatile: true},
		probe{method: "prompts/get", target: "no-such-prompt", params: map[string]any{"name": "no-such-prompt"}},
		probe{method: "completion/complete", target: "completable-prompt", params: map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "completable-prompt"}, "argument": map[string]any{"name": "department", "value": "E"}}},
		probe{method: "resources/read", target: "demo://resource/dynamic/text/7", params: map[string]any{"uri": "demo://resource/dynamic/text/7"}, volatile: true},
		probe{method: "resources/read", target: "demo://resource/dynamic/blob/2", params: map[string]any{"uri": "demo://resource/dynamic/blob/2"}, volatile: true},
		probe{method: "resources/read", target: "demo://no-such-resource", params: map[string]any{"uri": "demo://no-such-resource"}},
		probe{method: "resources/subscribe", target: "demo://resource/dynamic/text/1", params: map[string]any{"uri": "demo://resource/dynamic/text/1"}},
		probe{method: "resources/unsubscribe", target: "demo://resource/dynamic/text/1", params: map[string]any{"uri": "demo://resource/dynamic/text/1"}},
		probe{method: "logging/setLevel", target: "debug", params: map[string]any{"level": "debug"}},
	)
	memoryProbes := append(commonProbes(),
		probe{method: "tools/call", target: "create_entities", params: map[string]any{"name": "create_entities", "arguments": map[string]any{"entities": []map[string]any{
			{"name": "Nexus", "entityType": "gateway", "observations": []string{"written in Go"}},
			{"name": "Claude", "entityType": "client", "observations": []string{"speaks MCP"}}}}}},
		probe{method: "tools/call", target: "create_relations", params: map[string]any{"name": "create_relations", "arguments": map[string]any{"relations": []map[string]any{{"from": "Claude", "to": "Nexus", "relationType": "connects to"}}}}},
		probe{method: "tools/call", target: "add_observations", params: map[string]any{"name": "add_observations", "arguments": map[string]any{"observations": []map[string]any{{"entityName": "Nexus", "contents": []string{"remembers reads"}}}}}},
		probe{method: "tools/call", target: "read_graph", params: map[string]any{"name": "read_graph", "arguments": map[string]any{}}},
		probe{method: "tools/call", target: "search_nodes", params: map[string]any{"name": "search_nodes", "arguments": map[string]any{"query": "gateway"}}},
		probe{method: "tools/call", target: "open_nodes", params: map[string]any{"name": "open_nodes", "arguments": map[string]any{"names": []string{"Claude"}}}},
		probe{method: "tools/call", target: "delete_observations", params: map[string]any{"name": "delete_observations", "arguments": map[string]any{"deletions": []map[string]any{{"entityName": "Nexus", "observations": []string{"written in Go"}}}}}},
		probe{method: "tools/call", target: "delete_relations", params: map[string]any{"name": "delete_relations", "arguments": map[string]any{"relations": []map[string]any{{"from": "Claude", "to": "Nexus", "relationType": "connects to"}}}}},
		probe{method: "tools/call", target: "delete_entities", params: map[string]any{"name": "delete_entities", "arguments": map[string]any{"entityNames": []string{"Claude"}}}},
		probe{method: "resources/read", target: "memory://knowledge-graph", params: map[string]any{"uri": "memory://knowledge-graph"}},
	)
	path := func(p string) string { return filepath.Join(root, p) }
	servers := []faithfulServer{
		{name: "everything", config: map[string]any{"command": node, "args": []string{everything, "stdio"}},
			direct: stdioDirect(nil, everything, "stdio"), probes: everythingProbes},
		// The same server with an upstream session per client: its roots are
		// always its client's.
		{name: "everything-own", config: map[string]any{"command": node, "args": []string{everything, "stdio"}, "sessions": "client"},
			direct: stdioDirect(nil, everything, "stdio"), probes: everythingProbes},
		{name: "everything-sse", config: map[string]any{"transport": "sse", "url": fmt.Sprintf("http://127.0.0.1:%d/sse", ssePort)},
			direct: func(t *testing.T) transport.Interface {
				tr, err := transport.NewSSE(fmt.Sprintf("http://127.0.0.1:%d/sse", ssePort), transport.WithHTTPClient(nodeHTTPClient()))
				if err != nil {
					t.Fatal(err)
				}
				return tr
			}, probes: everythingProbes},
		{name: "everything-http", config: map[string]any{"transport": "streamable-http", "url": fmt.Sprintf("http://127.0.0.1:%d/mcp", httpPort)},
			direct: func(t *testing.T) transport.Interface {
				tr, err := transport.NewStreamableHTTP(fmt.Sprintf("http://127.0.0.1:%d/mcp", httpPort), transport.WithContinuousListening(), transport.WithHTTPBasicClient(nodeHTTPClient()))
				if err != nil {
					t.Fatal(err)
				}
				return tr
			}, probes: everythingProbes},
		{name: "files", config: map[string]any{"command": node, "args": []string{filesystem, root}},
			direct: stdioDirect(nil, filesystem, root), probes: append(commonProbes(),
				probe{method: "tools/call", target: "list_allowed_directories", params: map[string]any{"name": "list_allowed_directories", "arguments": map[string]any{}}},
				probe{method: "tools/call", target: "read_text_file", params: map[string]any{"name": "read_text_file", "arguments": map[string]any{"path": path("notes.txt"), "head": 1}}},
				probe{method: "tools/call", target: "read_multiple_files", params: map[string]any{"name": "read_multiple_files", "arguments": map[string]any{"paths": []string{path("notes.txt"), path("missing.txt")}}}},
				probe{method: "tools/call", target: "write_file", params: map[string]any{"name": "write_file", "arguments": map[string]any{"path": path("sub/written.txt"), "content": "written\n"}}},
				probe{method: "tools/call", target: "edit_file (dry run)", params: map[string]any{"name": "edit_file", "arguments": map[string]any{"path": path("notes.txt"), "edits": []map[string]any{{"oldText": "line two", "newText": "line 2"}}, "dryRun": true}}},
				probe{method: "tools/call", target: "create_directory", params: map[string]any{"name": "create_directory", "arguments": map[string]any{"path": path("made")}}},
				probe{method: "tools/call", target: "list_directory", params: map[string]any{"name": "list_directory", "arguments": map[string]any{"path": root}}},
				probe{method: "tools/call", target: "directory_tree", params: map[string]any{"name": "directory_tree", "arguments": map[string]any{"path": root}}},
				probe{method: "tools/call", target: "search_files", params: map[string]any{"name": "search_files", "arguments": map[string]any{"path": root, "pattern": "*.txt"}}},
				probe{method: "tools/call", target: "get_file_info", params: map[string]any{"name": "get_file_info", "arguments": map[string]any{"path": path("notes.txt")}}, volatile: true},
				probe{method: "tools/call", target: "read_text_file outside the root", params: map[string]any{"name": "read_text_file", "arguments": map[string]any{"path": "/etc/hostname"}}},
			)},
		{name: "memory-a", config: map[string]any{"command": node, "args": []string{memory}, "env": map[string]string{"MEMORY_FILE_PATH": filepath.Join(graphs, "through-a.jsonl")}},
			direct: stdioDirect(graph("direct-a"), memory), probes: memoryProbes},
		{name: "memory-b", config: map[string]any{"command": node, "args": []string{memory}, "env": map[string]string{"MEMORY_FILE_PATH": filepath.Join(graphs, "through-b.jsonl")}},
			direct: stdioDirect(graph("direct-b"), memory), probes: memoryProbes},
		{name: "app", config: map[string]any{"command": node, "args": []string{app, "--stdio"}},
			direct: stdioDirect(nil, app, "--stdio"), probes: append(commonProbes(),
				probe{method: "tools/call", target: "get-time", params: map[string]any{"name": "get-time", "arguments": map[string]any{}}, volatile: true},
				probe{method: "resources/read", target: "ui://get-time/mcp-app.html", params: map[string]any{"uri": "ui://get-time/mcp-app.html"}},
			)},
	}

	children := map[string]any{}
	for _, s := range servers {
		children[s.name] = s.config
	}
	h := newHome(t, map[string]any{"servers": children, "policy": map[string]any{"default": map[string]any{"allow": []string{"*"}}}})
	// Nexus's initialize result is compared with each server's: it is asked once
	// every child is connected (see serveStdioReady).
	names := make([]string, 0, len(servers))
	for _, s := range servers {
		names = append(names, s.name)
	}
	// Each server is compared in turn; their direct processes start at once,
	// beside the gateway's children.
	started := make([]startedPeer, len(servers))
	for i, s := range servers {
		started[i] = startPeer(t, s.name, s.direct(t))
	}
	throughLog := &lockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the gateway's log:\n%s", throughLog.String())
		}
	})
	through := dialPeerWhen(t, "nexus", transport.NewStdioWithOptions(built.nexus, h.env(), []string{"serve", "--no-memory"}, transport.WithCommandStderrWriter(throughLog)),
		func() bool { return childrenConnected(throughLog.String(), names...) })
	view := newThroughView(t, through)

	// The servers are compared at once, each with its own direct connection,
	// over the one session through Nexus (a client may send requests for
	// several servers at once); the rows keep the servers' order. Most of the
	// time is the everything servers' waits (trigger-long-running-operation).
	rowsOf := make([][]faithfulRow, len(servers))
	failed := make([]string, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		direct := started[i].dial(nil)
		wg.Go(func() {
			// Fatalf belongs to the test's goroutine: here it ends this
			// server's comparison, and the test fails once all have ended.
			direct.fatalf = func(format string, args ...any) {
				failed[i] = fmt.Sprintf(format, args...)
				runtime.Goexit()
			}
			rowsOf[i] = compareServer(t, s, direct, through, view)
		})
	}
	wg.Wait()
	for i, f := range failed {
		if f != "" {
			t.Fatalf("%s: %s", servers[i].name, f)
		}
	}
	rows := slices.Concat(rowsOf...)
	var table strings.Builder
	seen := map[string]bool{}
	for _, r := range rows {
		verdict := "same"
		if r.diff != "" {
			verdict = "differs"
			reason, expected := faithfulDifferences[r.key()]
			seen[r.key()] = true
			if !expected {
				t.Errorf("%s: direct and through Nexus differ, and the README does not say why:\n%s", r.key(), r.diff)
			} else {
				verdict += ": " + reason
			}
		}
		fmt.Fprintf(&table, "| %s | %s | %s | %s |\n", r.server, r.method, r.target, verdict)
	}
	for key := range faithfulDifferences {
		if !seen[key] {
			t.Errorf("%s: listed as a difference, but direct and through Nexus now agree: take it out of the list and the README", key)
		}
	}
	t.Logf("%d comparisons:\n| server | method | target | result |\n|---|---|---|---|\n%s", len(rows), table.String())
}

// commonProbes are the requests every server gets, whatever its tools.
func commonProbes() []probe {
	return []probe{{method: "ping", target: "-", params: map[string]any{}}}
}

// faithfulRow is one comparison: diff is empty when both answers agree.
type faithfulRow struct {
	server, method, target, diff string
}

func (r faithfulRow) key() string { return r.server + " " + r.method + " " + r.target }

// throughView is what the client of Nexus was listed, to find each child's items
// under their names through Nexus.
type throughView struct {
	tools, prompts, resources, templates map[string]map[string]any
}

func newThroughView(t *testing.T, p *rawPeer) throughView {
	return throughView{
		tools:     p.list("tools/list", "tools", "name"),
		prompts:   p.list("prompts/list", "prompts", "name"),
		resources: p.list("resources/list", "resources", "uri"),
		templates: p.list("resources/templates/list", "resourceTemplates", "uriTemplate"),
	}
}

// namespacedURI matches Nexus's form for a URI two servers share:
// <scheme>://nexus/<server>/<the server's own URI>.
var namespacedURI = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://nexus/([a-z0-9][a-z0-9_-]*)/(.+)$`)

// ownURI undoes the namespacing of uri when it names server's resource.
func ownURI(server, uri string) (string, bool) {
	m := namespacedURI.FindStringSubmatch(uri)
	if m == nil || m[2] != server {
		return uri, false
	}
	return m[3], true
}

// throughURI is the URI a client of Nexus uses for server's uri: its namespaced
// form when Nexus lists one (or a namespaced template covers it), else itself.
func (v throughView) throughURI(server, uri string) string {
	for u := range v.resources {
		if orig, ok := ownURI(server, u); ok && orig == uri {
			return u
		}
	}
	scheme, _, _ := strings.Cut(uri, ":")
	for tmpl := range v.templates {
		if orig, ok := ownURI(server, tmpl); ok && strings.HasPrefix(orig, scheme+":") {
			if m := namespacedURI.FindStringSubmatch(tmpl); m != nil {
				return m[1] + "://nexus/" + server + "/" + uri
			}
		}
	}
	return uri
}

// forNexus rewrites a request to a server alone into the same request through Nexus.
func (v throughView) forNexus(server string, p probe) map[string]any {
	out := map[string]any{}
	for k, val := range p.params {
		out[k] = val
	}
	switch p.method {
	case "tools/call", "prompts/get":
		out["name"] = server + "__" + p.params["name"].(string)
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		out["uri"] = v.throughURI(server, p.params["uri"].(string))
	case "completion/complete":
		ref := map[string]any{}
		for k, val := range p.params["ref"].(map[string]any) {
			ref[k] = val
		}
		if name, ok := ref["name"].(string); ok {
			ref["name"] = server + "__" + name
		}
		out["ref"] = ref
	}
	return out
}

// undo turns an answer through Nexus back into what the server alone would say:
// its URIs in their own form, Nexus's own _meta keys gone.
func undo(server string, v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, val := range x {
			if k == "_meta" {
				if meta, ok := val.(map[string]any); ok {
					kept := map[string]any{}
					for mk, mv := range meta {
						if !strings.HasPrefix(mk, "nexus/") {
							kept[mk] = undo(server, mv)
						}
					}
					if len(kept) == 0 {
						continue
					}
					out[k] = kept
					continue
				}
			}
			out[k] = undo(server, val)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = undo(server, val)
		}
		return out
	case string:
		orig, _ := ownURI(server, x)
		return orig
	}
	return v
}

// shape keeps an answer's structure and the type of each value, for answers
// whose values change from one call to the next.
func shape(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, val := range x {
			out[k] = shape(val)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = shape(val)
		}
		return out
	}
	return fmt.Sprintf("%T", v)
}

func decode(raw json.RawMessage) any {
	var v any
	if len(raw) > 0 {
		json.Unmarshal(raw, &v)
	}
	return v
}

func canonical(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// answerDiff compares one answer of each; "" when they agree.
func answerDiff(server string, volatile bool, dRes json.RawMessage, dErr *mcp.JSONRPCErrorDetails, tRes json.RawMessage, tErr *mcp.JSONRPCErrorDetails) string {
	describe := func(res json.RawMessage, e *mcp.JSONRPCErrorDetails) string {
		if e != nil {
			return fmt.Sprintf("error %d %q", e.Code, e.Message)
		}
		return string(res)
	}
	if (dErr == nil) != (tErr == nil) || dErr != nil && (dErr.Code != tErr.Code || dErr.Message != tErr.Message) {
		return fmt.Sprintf(" direct:  %.400s\n through: %.400s", describe(dRes, dErr), describe(tRes, tErr))
	}
	if dErr != nil {
		return ""
	}
	d, th := decode(dRes), undo(server, decode(tRes))
	if volatile {
		d, th = shape(d), shape(th)
	}
	if a, b := canonical(d), canonical(th); a != b {
		return fmt.Sprintf(" direct:  %.400s\n through: %.400s", a, b)
	}
	return ""
}

// compareServer compares one server's lists, then each of its probes.
func compareServer(t *testing.T, s faithfulServer, direct, through *rawPeer, view throughView) []faithfulRow {
	t.Helper()
	var rows []faithfulRow
	add := func(method, target, diff string) {
		rows = append(rows, faithfulRow{server: s.name, method: method, target: target, diff: diff})
	}

	// initialize: every capability the server declares is offered through Nexus,
	// and its instructions reach the client.
	var dInit, tInit struct {
		Capabilities map[string]any `json:"capabilities"`
		ServerInfo   map[string]any `json:"serverInfo"`
		Instructions string         `json:"instructions"`
	}
	json.Unmarshal(direct.init, &dInit)
	json.Unmarshal(through.init, &tInit)
	var missing []string
	for c := range dInit.Capabilities {
		if _, ok := tInit.Capabilities[c]; !ok {
			missing = append(missing, c)
		}
	}
	sort.Strings(missing)
	add("initialize", "capabilities", strings.Join(missing, ", "))
	if dInit.Instructions != "" && !strings.Contains(tInit.Instructions, strings.TrimSpace(dInit.Instructions)) {
		add("initialize", "instructions", "the server's instructions are not in Nexus's")
	} else {
		add("initialize", "instructions", "")
	}
	infoDiff := ""
	if canonical(dInit.ServerInfo) != canonical(tInit.ServerInfo) {
		infoDiff = fmt.Sprintf(" direct %s, through %s", canonical(dInit.ServerInfo), canonical(tInit.ServerInfo))
	}
	add("initialize", "serverInfo", infoDiff)

	// Lists, item by item, under the names Nexus gives them.
	for _, l := range []struct {
		method, field, key string
		in                 map[string]map[string]any
		named              bool // items are named <server>__<name> through Nexus
	}{
		{"tools/list", "tools", "name", view.tools, true},
		{"prompts/list", "prompts", "name", view.prompts, true},
		{"resources/list", "resources", "uri", view.resources, false},
		{"resources/templates/list", "resourceTemplates", "uriTemplate", view.templates, false},
	} {
		items := direct.list(l.method, l.field, l.key)
		for k, item := range items {
			var got map[string]any
			if l.named {
				got = l.in[s.name+"__"+k]
			} else {
				got = l.in[k]
				for u, it := range l.in {
					if orig, ok := ownURI(s.name, u); ok && orig == k {
						got = it
					}
				}
			}
			if got == nil {
				add(l.method, k, "missing through Nexus")
				continue
			}
			g := undo(s.name, any(got)).(map[string]any)
			if l.named {
				g[l.key] = k
			}
			diff := ""
			if a, b := canonical(item), canonical(g); a != b {
				diff = fmt.Sprintf(" direct:  %.400s\n through: %.400s", a, b)
			}
			add(l.method, k, diff)
		}
		// Nothing of this server's is listed through Nexus that it does not list.
		for k := range l.in {
			name := k
			if l.named {
				var ok bool
				if name, ok = strings.CutPrefix(k, s.name+"__"); !ok {
					continue
				}
			} else if orig, ok := ownURI(s.name, k); ok {
				name = orig
			} else {
				continue
			}
			if _, ok := items[name]; !ok {
				add(l.method, name, "listed through Nexus, not by the server")
			}
		}
	}

	_, answers := direct.tr.(transport.BidirectionalInterface)
	broken := 0
	for _, p := range s.probes {
		if p.asksClient && !answers {
			continue
		}
		dRes, dErr := direct.request(p.method, p.params)
		tRes, tErr := through.request(p.method, view.forNexus(s.name, p))
		if brokeOnTheWay(tRes, tErr) {
			// A request whose connection to the server broke fails alone: the
			// gateway keeps the server connected (TestResetRequestKeepsTheChild),
			// so the request is made once more, and the log says so. Once a
			// server: a gateway that breaks requests fails the table.
			if broken++; broken > 1 {
				t.Errorf("%s: %d requests broke on their way to the server", s.name, broken)
			}
			t.Logf("%s %s %s: the request broke on its way to the server, made again: %s %v", s.name, p.method, p.target, tRes, tErr)
			tRes, tErr = through.request(p.method, view.forNexus(s.name, p))
		}
		add(p.method, p.target, answerDiff(s.name, p.volatile, dRes, dErr, tRes, tErr))
	}
	return rows
}
