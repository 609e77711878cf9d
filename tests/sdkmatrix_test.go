package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// The SDK matrix: servers built on four SDKs (tests/sdkpeer on mcp-go and the
// official Go SDK, testdata/sdkpeer-ts-v1.mjs and sdkpeer-ts.mjs on the
// TypeScript SDK v1 and v2), each called by clients of those SDKs: the Go SDKs'
// in their default mode (which probes 2026-07-28), pinned to the legacy era and
// pinned to 2026-07-28, the TypeScript SDK v1's (legacy only) and v2's in its
// default mode (legacy) and pinned to 2026-07-28 (testdata/sdkclient-ts.mjs),
// directly over stdio and through Nexus on its stdio and HTTP fronts. Each
// behaviour a server asks of its client or sends it during a call (sampling,
// elicitation, roots, progress, logging, a resource update to a subscriber),
// and a tool run as a task where both SDKs have tasks (matrixTasks), is
// compared with the direct connection's. A difference fails the test unless
// matrixDiffers lists it with its reason, and a listed one that went away fails
// it too. The README's "What a client sees through Nexus" gives the count.

// matrixDiffers are the known differences, "server client front behaviour" to
// why. All but four are cases where Nexus does better than the direct
// connection.
func matrixDiffers() map[string]string {
	const refuses = "better than direct: the server refuses its own requests to a 2026-07-28 client; " +
		"Nexus speaks it a session and bridges them into the client's input_required rounds"
	out := map[string]string{}
	for _, front := range []string{"stdio", "http"} {
		for _, server := range matrixServers {
			// The clients that speak 2026-07-28: the Go SDKs' in their default mode
			// and pinned to it (the same), and the TypeScript SDK v2's pinned.
			for _, client := range []string{"mcp-go", "mcp-go-modern", "go-sdk", "go-sdk-modern", "ts-v2-modern"} {
				for _, b := range matrixBehavioursOf(server, client) {
					k := strings.Join([]string{server, client, front, b}, " ")
					asks := b == "sample" || b == "elicit" || b == "roots"
					switch {
					case server == "ts-v1" && client == "ts-v2-modern":
						out[k] = "better than direct: the client pinned to 2026-07-28 cannot connect to a server of the legacy era alone; " +
							"Nexus speaks it 2026-07-28 and the server a legacy session"
					case server == "ts-v1" || !asks:
						// Progress, logs and updates reach a modern client both ways
						// (logging's exceptions are below), and the Go clients fall
						// back to a legacy session with a legacy-only server.
					case server != "ts-v2" || !strings.HasPrefix(client, "go-sdk"):
						out[k] = refuses
					case b == "elicit":
						// The TypeScript server does not answer the Go SDK's
						// server/discover on stdio, so its client falls back to a
						// legacy session.
						out[k] = "better than direct: the client declares elicitation without form, which the TypeScript server refuses; Nexus declares form elicitation to it"
					}
				}
			}
		}
	}
	for _, k := range []string{"mcp-go go-sdk", "go-sdk go-sdk", "mcp-go go-sdk-modern", "go-sdk go-sdk-modern"} {
		out[k+" stdio log"] = "better than direct: the client asked for logs with logging/setLevel, which a 2026-07-28 server ignores; Nexus applies it to the connection's requests"
	}
	for k, why := range map[string]string{"ts-v1 go-sdk": "the server speaks the legacy era alone", "ts-v2 go-sdk": "the server does not answer server/discover on stdio",
		"ts-v1 go-sdk-modern": "the server speaks the legacy era alone", "ts-v2 go-sdk-modern": "the server does not answer server/discover on stdio"} {
		out[k+" http log"] = "worse than direct: directly the client falls back to a legacy session (" + why + "), where logging/setLevel works; " +
			"through Nexus's HTTP front it speaks 2026-07-28, which has no logging/setLevel (the client's, sent without _meta, gets HTTP 400 -32602, which it ignores): " +
			"a modern client asks for logs with _meta logLevel on each request, which this client does not send"
	}
	return out
}

// matrixServers are the SDKs the peers are built on.
var matrixServers = []string{"mcp-go", "go-sdk", "ts-v1", "ts-v2"}

// matrixBehaviours are the peer's tools, one a behaviour; "task" is tried only
// where matrixTasks says so.
var matrixBehaviours = []string{"sample", "elicit", "roots", "progress", "log", "touch", "task"}

// matrixTasks says whether server and client both have tasks, the 2025-11-25
// ones: a task-augmented tools/call, then tasks/result. mcp-go's server and
// client have them, and the TypeScript SDK v1's (experimental: registerToolTask
// and callToolStream). The Go SDK v1.8.0 has no tasks at all, and the
// TypeScript SDK v2 2.4.0 has their types but nothing that runs them (no task
// store or task tool for a server, no task call for a client). Neither SDK has
// the 2026-07-28 tasks extension on its client: mcp-go's client asks
// tasks/result, which the extension does not have, so its modes that speak
// 2026-07-28 have no tasks either. A pair without tasks is not applicable: it is
// neither tried nor counted as identical.
func matrixTasks(server, client string) bool {
	return (server == "mcp-go" || server == "ts-v1") && (client == "mcp-go-legacy" || client == "ts-v1")
}

// matrixBehavioursOf are the behaviours tried between server and client.
func matrixBehavioursOf(server, client string) []string {
	if matrixTasks(server, client) {
		return matrixBehaviours
	}
	return matrixBehaviours[:len(matrixBehaviours)-1]
}

// matrixClient is one SDK's client, connected.
type matrixClient interface {
	// call calls tool (with a progress token for "progress") and returns what
	// the client saw: the result's text, and for progress and log what
	// arrived during the call.
	call(ctx context.Context, tool string) string
	close()
}

// seen counts what a client was sent beside results.
type seen struct {
	mu       sync.Mutex
	progress int
	levels   []string
	updates  int
}

func (s *seen) addUpdate() { s.mu.Lock(); s.updates++; s.mu.Unlock() }

func (s *seen) addProgress() { s.mu.Lock(); s.progress++; s.mu.Unlock() }
func (s *seen) addLevel(l string) {
	s.mu.Lock()
	s.levels = append(s.levels, l)
	s.mu.Unlock()
}

// after waits (up to two seconds) for what tool sends beside its result, and
// says what arrived: notifications may trail the result on any connection.
func (s *seen) after(tool string) string {
	wait := 2 * time.Second
	if tool == "touch" {
		wait = time.Second // touchAgain tries again
	}
	deadline := time.Now().Add(wait)
	for {
		s.mu.Lock()
		p, l, u := s.progress, slices.Clone(s.levels), s.updates
		s.mu.Unlock()
		var done bool
		switch tool {
		case "progress":
			done = p >= 3
		case "log":
			done = len(l) >= 2
		case "touch":
			done = u >= 1
		default:
			done = true
		}
		if done || time.Now().After(deadline) {
			sort.Strings(l)
			switch tool {
			case "progress":
				return fmt.Sprintf("; %d progress", p)
			case "log":
				return fmt.Sprintf("; logs %v", l)
			case "touch":
				return fmt.Sprintf("; %d updates", min(u, 1))
			}
			return ""
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *seen) reset() { s.mu.Lock(); s.progress, s.levels, s.updates = 0, nil, 0; s.mu.Unlock() }

// matrixResource is the peers' resource a "touch" updates.
const matrixResource = "peer://note"

// mcpGoClient is mark3labs/mcp-go's client over tr, pinned to pin unless it
// is empty.
type mcpGoClient struct {
	c      *client.Client
	tr     transport.Interface
	seen   *seen
	name   func(string) string
	listen func() // ends the subscriptions/listen stream of a modern connection
}

type mcpGoHandlers struct{}

func (mcpGoHandlers) CreateMessage(context.Context, mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("hi from the model")}, Model: "matrix"}, nil
}

func (mcpGoHandlers) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"name": "Ada"}}}, nil
}

func (mcpGoHandlers) ListRoots(context.Context, mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	return &mcp.ListRootsResult{Roots: []mcp.Root{{URI: "file:///matrix-root", Name: "matrix"}}}, nil
}

func newMCPGoClient(t *testing.T, tr transport.Interface, pin string, name func(string) string) (matrixClient, error) {
	h := mcpGoHandlers{}
	// The client takes a server that has not answered server/discover within 5s
	// for a legacy one; every server here answers it (or refuses it at once), and
	// a loaded machine's npm server may take longer than that to start.
	opts := []client.ClientOption{client.WithSamplingHandler(h), client.WithElicitationHandler(h), client.WithRootsHandler(h),
		client.WithDiscoverTimeout(time.Minute)}
	if pin != "" {
		opts = append(opts, client.WithProtocolVersion(pin))
	}
	c := client.NewClient(tr, opts...)
	m := &mcpGoClient{c: c, tr: tr, seen: &seen{}, name: name}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		switch n.Method {
		case "notifications/progress":
			m.seen.addProgress()
		case "notifications/message":
			m.seen.addLevel(fmt.Sprint(n.Params.AdditionalFields["level"]))
		case "notifications/resources/updated":
			m.seen.addUpdate()
		}
	})
	// The stdio transport's process lives as long as Start's context.
	if err := c.Start(context.Background()); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "matrix", Version: "1"},
		Capabilities: mcp.ClientCapabilities{Roots: &struct {
			ListChanged bool `json:"listChanged,omitempty"`
		}{ListChanged: true}}}}); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.SetLevel(ctx, mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelInfo}}); err != nil {
		t.Logf("mcp-go client: logging/setLevel: %v", err)
	}
	return m, nil
}

func (m *mcpGoClient) call(ctx context.Context, tool string) string {
	m.seen.reset()
	if tool == "task" {
		return m.task(ctx)
	}
	if tool == "touch" {
		// Legacy: resources/subscribe. Modern: the URI joins the filter of a
		// subscriptions/listen stream (which a legacy connection refuses).
		if err := m.c.Subscribe(ctx, mcp.SubscribeRequest{Params: mcp.SubscribeParams{URI: matrixResource}}); err != nil {
			return "subscribe error: " + err.Error()
		}
		if stop, err := m.c.ListenAsync(context.Background(), mcp.SubscriptionFilter{ResourceSubscriptions: []string{matrixResource}}, nil); err == nil {
			m.listen = stop
		}
	}
	req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: m.name(tool), Arguments: map[string]any{}}}
	if tool == "progress" {
		req.Params.Meta = &mcp.Meta{ProgressToken: "matrix-progress"}
	}
	return touchAgain(tool, m.seen, func() string {
		res, err := m.c.CallTool(ctx, req)
		if err != nil {
			return "error: " + err.Error()
		}
		var parts []string
		for _, c := range res.Content {
			parts = append(parts, mcp.GetTextFromContent(c))
		}
		return strings.Join(parts, " ")
	})
}

// task calls the task tool as a 2025-11-25 task and waits for its result:
// "task created; TEXT" when the server made a task, "no task; TEXT" when it
// answered at once. mcp-go's client has tasks/get, tasks/result, tasks/list and
// tasks/cancel but no task-augmented call (its CallTool wants content in the
// answer), so that one request goes over the client's transport.
func (m *mcpGoClient) task(ctx context.Context) string {
	ttl := int64(60000)
	res, err := m.tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId("matrix-task"), Method: string(mcp.MethodToolsCall),
		Params: mcp.CallToolParams{Name: m.name("task"), Arguments: map[string]any{}, Task: &mcp.TaskParams{TTL: &ttl}}})
	switch {
	case err != nil:
		return "error: " + err.Error()
	case res.Error != nil:
		return fmt.Sprintf("error: %d %s", res.Error.Code, res.Error.Message)
	}
	var created struct {
		Task *mcp.Task `json:"task"`
	}
	if err := json.Unmarshal(res.Result, &created); err != nil {
		return "error: " + err.Error()
	}
	text := func(content []mcp.Content) string {
		var parts []string
		for _, c := range content {
			parts = append(parts, mcp.GetTextFromContent(c))
		}
		return strings.Join(parts, " ")
	}
	if created.Task == nil {
		plain, err := mcp.ParseCallToolResult(&res.Result)
		if err != nil {
			return "error: " + err.Error()
		}
		return "no task; " + text(plain.Content)
	}
	done, err := m.c.TaskResult(ctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: created.Task.TaskId}})
	if err != nil {
		return "task created; tasks/result: " + err.Error()
	}
	return "task created; " + text(done.Content)
}

// touchAgain calls call and says what arrived beside its result; a "touch" is
// made again, up to five times, until an update arrives: a subscription both
// SDKs open in the background (a subscriptions/listen stream) may not be open
// for the first.
func touchAgain(tool string, sn *seen, call func() string) string {
	for try := 1; ; try++ {
		text := call()
		after := sn.after(tool)
		if tool != "touch" || !strings.HasSuffix(after, "; 0 updates") || try == 5 || strings.HasPrefix(text, "error") {
			return text + after
		}
	}
}

func (m *mcpGoClient) close() {
	if m.listen != nil {
		m.listen()
	}
	m.c.Close()
}

// goSDKClient is the official Go SDK's client, pinned to pin unless it is
// empty. It has no tasks (v1.8.0).
type goSDKClient struct {
	s    *gosdk.ClientSession
	seen *seen
	name func(string) string
}

func newGoSDKClient(tr gosdk.Transport, pin string, name func(string) string) (matrixClient, error) {
	sn := &seen{}
	c := gosdk.NewClient(&gosdk.Implementation{Name: "matrix", Version: "1"}, &gosdk.ClientOptions{
		CreateMessageHandler: func(context.Context, *gosdk.CreateMessageRequest) (*gosdk.CreateMessageResult, error) {
			return &gosdk.CreateMessageResult{Role: "assistant", Content: &gosdk.TextContent{Text: "hi from the model"}, Model: "matrix"}, nil
		},
		ElicitationHandler: func(context.Context, *gosdk.ElicitRequest) (*gosdk.ElicitResult, error) {
			return &gosdk.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
		ProgressNotificationHandler: func(context.Context, *gosdk.ProgressNotificationClientRequest) { sn.addProgress() },
		LoggingMessageHandler: func(_ context.Context, r *gosdk.LoggingMessageRequest) {
			sn.addLevel(string(r.Params.Level))
		},
		ResourceUpdatedHandler: func(context.Context, *gosdk.ResourceUpdatedNotificationRequest) { sn.addUpdate() },
	})
	c.AddRoots(&gosdk.Root{URI: "file:///matrix-root", Name: "matrix"})
	var opts *gosdk.ClientSessionOptions
	if pin != "" {
		opts = &gosdk.ClientSessionOptions{ProtocolVersion: pin}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.Connect(ctx, tr, opts)
	if err != nil {
		return nil, err
	}
	_ = s.SetLoggingLevel(ctx, &gosdk.SetLoggingLevelParams{Level: "info"})
	return &goSDKClient{s: s, seen: sn, name: name}, nil
}

func (g *goSDKClient) call(ctx context.Context, tool string) string {
	g.seen.reset()
	if tool == "touch" {
		// Legacy: resources/subscribe; modern: a subscriptions/listen stream.
		if err := g.s.Subscribe(ctx, &gosdk.SubscribeParams{URI: matrixResource}); err != nil {
			return "subscribe error: " + err.Error()
		}
	}
	p := &gosdk.CallToolParams{Name: g.name(tool), Arguments: map[string]any{}}
	if tool == "progress" {
		p.SetProgressToken("matrix-progress")
	}
	return touchAgain(tool, g.seen, func() string {
		res, err := g.s.CallTool(ctx, p)
		if err != nil {
			return "error: " + err.Error()
		}
		var parts []string
		for _, c := range res.Content {
			if tc, ok := c.(*gosdk.TextContent); ok {
				parts = append(parts, tc.Text)
			}
		}
		return strings.Join(parts, " ")
	})
}

func (g *goSDKClient) close() { g.s.Close() }

// tsClient is one of the TypeScript SDKs' clients: a node process running
// testdata/sdkclient-ts.mjs, driven over its stdin and stdout (one JSON line a
// command, one a reply or something the server sent).
type tsClient struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	replies chan tsLine
	exited  chan struct{}
	stderr  *lockedBuffer
	seen    *seen
	name    func(string) string
	next    int
}

// tsLine is a line the client script prints.
type tsLine struct {
	Ready bool   `json:"ready"`
	Era   string `json:"era"`
	Error string `json:"error"`
	ID    int    `json:"id"`
	Reply string `json:"reply"`
	Event string `json:"event"`
	Level string `json:"level"`
}

// newTSClient starts script in mode (v1, v2 or v2-modern) against target: a
// URL, or "--" and the command of a stdio server.
func newTSClient(node, script, mode string, target []string, env []string, name func(string) string) (matrixClient, error) {
	cmd := exec.Command(node, append([]string{script, mode}, target...)...)
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second // a server it started may hold its stderr a little longer
	c := &tsClient{cmd: cmd, replies: make(chan tsLine, 16), exited: make(chan struct{}), stderr: &lockedBuffer{}, seen: &seen{}, name: name}
	cmd.Stderr = c.stderr
	var err error
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		defer close(c.exited)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var l tsLine
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			switch l.Event {
			case "progress":
				c.seen.addProgress()
			case "log":
				c.seen.addLevel(l.Level)
			case "updated":
				c.seen.addUpdate()
			case "":
				c.replies <- l
			}
		}
	}()
	select {
	case l := <-c.replies:
		if l.Ready {
			return c, nil
		}
		c.close()
		return nil, errors.New(l.Error)
	case <-c.exited:
		c.close()
		return nil, fmt.Errorf("%s exited before it connected: %s", filepath.Base(script), c.stderr.String())
	case <-time.After(30 * time.Second):
		c.close()
		return nil, fmt.Errorf("%s did not connect in 30s: %s", filepath.Base(script), c.stderr.String())
	}
}

// do sends one command and waits for its reply.
func (c *tsClient) do(ctx context.Context, cmd map[string]any) string {
	c.next++
	cmd["id"] = c.next
	b, _ := json.Marshal(cmd)
	if _, err := c.stdin.Write(append(b, '\n')); err != nil {
		return "error: " + err.Error()
	}
	for {
		select {
		case l := <-c.replies:
			if l.ID == c.next {
				return l.Reply
			}
		case <-c.exited:
			return "error: the client exited: " + c.stderr.String()
		case <-ctx.Done():
			return "error: " + ctx.Err().Error()
		}
	}
}

func (c *tsClient) call(ctx context.Context, tool string) string {
	c.seen.reset()
	if tool == "touch" {
		// Legacy: resources/subscribe; modern: a subscriptions/listen stream.
		if got := c.do(ctx, map[string]any{"op": "subscribe", "uri": matrixResource}); got != "ok" {
			return "subscribe error: " + strings.TrimPrefix(got, "error: ")
		}
	}
	if tool == "task" {
		return c.do(ctx, map[string]any{"op": "task", "name": c.name(tool)})
	}
	return touchAgain(tool, c.seen, func() string {
		return c.do(ctx, map[string]any{"op": "call", "name": c.name(tool), "progress": tool == "progress"})
	})
}

// close ends the script's input, which closes its connection, and waits (up to
// five seconds, then kills it) for it to exit.
func (c *tsClient) close() {
	c.stdin.Close()
	timeout := time.After(5 * time.Second)
	for exited := false; !exited; {
		select {
		case <-c.replies: // one nobody waits for any more
		case <-c.exited:
			exited = true
		case <-timeout:
			_ = c.cmd.Process.Kill()
		}
	}
	_ = c.cmd.Wait()
}

// sdkPeer is tests/sdkpeer, built once per run (sdkPeerBin).
func sdkPeer() (string, error) { return sdkPeerBin.build() }

// TestSDKMatrix compares each behaviour of each SDK's server, as each SDK's
// client sees it, directly and through Nexus in its default config.
func TestSDKMatrix(t *testing.T) {
	t.Parallel()
	peer, err := sdkPeer()
	if err != nil {
		t.Fatal(err)
	}
	node, _ := peerScript(t, "@modelcontextprotocol/server/package.json")
	peerScript(t, "@modelcontextprotocol/client/package.json")
	peerScript(t, "@modelcontextprotocol/sdk/package.json")
	testdata, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	tsClientScript := filepath.Join(testdata, "sdkclient-ts.mjs")
	launch := func(server string) (string, []string) {
		switch server {
		case "ts-v1":
			return node, []string{filepath.Join(testdata, "sdkpeer-ts-v1.mjs")}
		case "ts-v2":
			return node, []string{filepath.Join(testdata, "sdkpeer-ts.mjs")}
		}
		return peer, []string{server}
	}
	// The Go clients' default mode probes 2026-07-28 and falls back to a
	// legacy session when the server does not answer server/discover; pinned to
	// 2026-07-28 they do the same (neither SDK has a pin without fallback), and
	// the matrix shows that they see what the default mode sees.
	clients := []struct {
		name string
		pin  string // the protocol version the Go clients are pinned to, if any
		sdk  string // mcp-go, go-sdk, or ts: tsClientScript in the mode the name after "ts-" says
	}{{"mcp-go", "", "mcp-go"}, {"mcp-go-legacy", "2025-11-25", "mcp-go"}, {"mcp-go-modern", "2026-07-28", "mcp-go"},
		{"go-sdk", "", "go-sdk"}, {"go-sdk-legacy", "2025-11-25", "go-sdk"}, {"go-sdk-modern", "2026-07-28", "go-sdk"},
		{"ts-v1", "", "ts"}, {"ts-v2", "", "ts"}, {"ts-v2-modern", "", "ts"}}
	var mu sync.Mutex
	results := map[string]string{} // "server client front behaviour" -> outcome
	var wg sync.WaitGroup
	slots := make(chan struct{}, 8) // connections under way at once
	for _, server := range matrixServers {
		for _, cl := range clients {
			for _, front := range []string{"direct", "stdio", "http"} {
				wg.Go(func() {
					slots <- struct{}{}
					defer func() { <-slots }()
					// A gateway of its own: a shared child serves one client at a
					// time when it asks its client something (see docs/protocol.md).
					command, args := launch(server)
					h := newHome(t, map[string]any{"servers": map[string]any{"peer": map[string]any{"command": command, "args": args}},
						"policy": map[string]any{"default": map[string]any{"allow": []string{"*"}}}})
					name := func(tool string) string { return "peer__" + tool }
					if front == "direct" {
						name = func(tool string) string { return tool }
					}
					// The HTTP front's gateway stops once its client is done, while
					// the slot is held, rather than with the test, one after another.
					var gateway *exec.Cmd
					serve := func() string {
						cmd, url, _ := startHTTPProcess(t, h.env(), "--no-memory")
						gateway = cmd
						return url
					}
					defer func() {
						if gateway != nil {
							_ = gateway.Process.Signal(interrupt)
							_ = gateway.Wait()
						}
					}()
					var c matrixClient
					var err error
					switch {
					case cl.sdk == "ts":
						target := append([]string{"--", command}, args...)
						switch front {
						case "http":
							target = []string{serve()}
						case "stdio":
							target = []string{"--", built.nexus, "serve", "--no-memory"}
						}
						c, err = newTSClient(node, tsClientScript, strings.TrimPrefix(cl.name, "ts-"), target, h.env(), name)
					case front == "http":
						url := serve()
						if cl.sdk == "go-sdk" {
							c, err = newGoSDKClient(&gosdk.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, cl.pin, name)
							break
						}
						var tr *transport.StreamableHTTP
						if tr, err = transport.NewStreamableHTTP(url); err == nil {
							c, err = newMCPGoClient(t, tr, cl.pin, name)
						}
					case cl.sdk == "mcp-go":
						cmd, args := command, args
						if front == "stdio" {
							cmd, args = built.nexus, []string{"serve", "--no-memory"}
						}
						c, err = newMCPGoClient(t, transport.NewStdio(cmd, h.env(), args...), cl.pin, name)
					default:
						cmd := exec.Command(command, args...)
						if front == "stdio" {
							cmd = exec.Command(built.nexus, "serve", "--no-memory")
						}
						cmd.Env = h.env()
						c, err = newGoSDKClient(&gosdk.CommandTransport{Command: cmd}, cl.pin, name)
					}
					key := func(b string) string { return strings.Join([]string{server, cl.name, front, b}, " ") }
					if err != nil {
						mu.Lock()
						for _, b := range matrixBehavioursOf(server, cl.name) {
							results[key(b)] = "connect error: " + err.Error()
						}
						mu.Unlock()
						return
					}
					defer c.close()
					for _, b := range matrixBehavioursOf(server, cl.name) {
						ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
						got := c.call(ctx, b)
						cancel()
						mu.Lock()
						results[key(b)] = got
						mu.Unlock()
					}
				})
			}
		}
	}
	wg.Wait()
	// Pinned to 2026-07-28, the Go clients see what their default mode sees.
	for _, sdk := range []string{"mcp-go", "go-sdk"} {
		for _, server := range matrixServers {
			for _, front := range []string{"direct", "stdio", "http"} {
				for _, b := range matrixBehavioursOf(server, sdk) {
					k := func(client string) string { return strings.Join([]string{server, client, front, b}, " ") }
					if results[k(sdk)] != results[k(sdk+"-modern")] {
						t.Errorf("%s: %q, but pinned to 2026-07-28 %q: the pin now differs from the default mode (see the clients' comment)", k(sdk), results[k(sdk)], results[k(sdk+"-modern")])
					}
				}
			}
		}
	}
	differs := matrixDiffers()
	same, listed, better, worse, na := 0, 0, 0, 0, 0
	var table []string
	for _, server := range matrixServers {
		for _, cl := range clients {
			for _, front := range []string{"stdio", "http"} {
				for _, b := range matrixBehaviours {
					k := strings.Join([]string{server, cl.name, front, b}, " ")
					if !slices.Contains(matrixBehavioursOf(server, cl.name), b) {
						if _, known := differs[k]; known {
							t.Errorf("%s: listed as a difference, but the pair has no %s", k, b)
						}
						na++
						continue
					}
					direct := results[strings.Join([]string{server, cl.name, "direct", b}, " ")]
					through := results[k]
					why, known := differs[k]
					switch {
					case direct == through && known:
						t.Errorf("%s: listed as a difference (%s), but direct and through Nexus now agree: take it out of matrixDiffers and the README's count", k, why)
					case direct == through:
						same++
					case known:
						listed++
						if strings.HasPrefix(why, "worse") {
							worse++
						} else {
							better++
						}
					default:
						t.Errorf("%s: direct %q, through Nexus %q", k, direct, through)
					}
					table = append(table, fmt.Sprintf("| %s | %s | %s | %s | %s | %s |", server, cl.name, front, b, direct, through))
				}
			}
		}
	}
	t.Logf("%d behaviours x pairs compared: %d identical, %d listed differences (%d better than direct, %d worse); %d not applicable (a task where the server or the client has none)\n| server | client | front | behaviour | direct | through Nexus |\n|---|---|---|---|---|---|\n%s",
		len(table), same, listed, better, worse, na, strings.Join(table, "\n"))
}

// TestPinnedModernEraSaysWhatToDo: a dual-era server pinned to 2026-07-28
// refuses its tools' requests to the client with its SDK's error; the gateway's
// log says which setting brings them back.
func TestPinnedModernEraSaysWhatToDo(t *testing.T) {
	t.Parallel()
	peer, err := sdkPeer()
	if err != nil {
		t.Fatal(err)
	}
	h := newHome(t, map[string]any{"servers": map[string]any{"peer": map[string]any{"command": peer, "args": []string{"mcp-go"}, "protocolVersion": "2026-07-28"}},
		"policy": map[string]any{"default": map[string]any{"allow": []string{"*"}}}})
	s := h.serveStdioReady([]string{"peer"}, "--no-memory")
	s.answer = func(message) (any, *rpcError) {
		return map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "hi"}, "model": "m"}, nil
	}
	if got := s.call("peer__sample", map[string]any{}).text(); !strings.Contains(got, "2026-07-28") {
		t.Fatalf("the pinned server's sampling answered %q, not its SDK's refusal", got)
	}
	eventually(t, 10*time.Second, "the log naming the setting", func() bool {
		return strings.Contains(s.stderr.String(), "servers.peer.protocolVersion pins 2026-07-28")
	})
}
