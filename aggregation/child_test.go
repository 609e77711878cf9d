package aggregation

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/nexus-mcp/nexus/config"
)

// canary is a secret value the test children leak everywhere they can: in a tool
// description, in log messages, in progress messages. The gateway's redactor knows
// it; no client may ever see it.
const canary = "CANARY-5ecret-v4lue-0xDEADBEEF"

// TestMain lets the test binary serve as a stdio child: a child's process is this
// binary, re-run with NEXUS_TEST_CHILD set to the child's name.
func TestMain(m *testing.M) {
	if kind := os.Getenv(eraChildEnv); kind != "" {
		exitChild(serveEraChild(kind))
	}
	if name := os.Getenv("NEXUS_TEST_CHILD"); name != "" {
		if starts := os.Getenv("NEXUS_TEST_CHILD_STARTS"); starts != "" {
			recordStart(starts)
		}
		switch name {
		case "raw":
			serveRaw(os.Stdin, os.Stdout)
			exitChild(0)
		case "raw-roots":
			serveRawRoots(os.Stdin, os.Stdout, os.Getenv("NEXUS_TEST_RAW_LOG"))
			exitChild(0)
		case "raw-tasks":
			serveRawTasks(os.Stdin, os.Stdout)
			exitChild(0)
		case "listed":
			serveListed(os.Stdin, os.Stdout)
			exitChild(0)
		case "late-change":
			serveLateChange(os.Stdin, os.Stdout)
			exitChild(0)
		case "exits":
			fmt.Fprintln(os.Stderr, "Error: FOO_TOKEN is not set")
			exitChild(3)
		}
		// The test child is a legacy server unless NEXUS_TEST_CHILD_ERA says
		// otherwise: what most tests ask of it (its sampling, roots and logs
		// unasked) is the legacy era's.
		exitChild(serveStdioEra(cmp.Or(os.Getenv("NEXUS_TEST_CHILD_ERA"), "legacy"), newTestChild(name).srv))
	}
	setParallel()
	os.Exit(m.Run())
}

// serveRaw is a child written against the wire, for what must reach the gateway in
// a known order: its tool note writes a log message and then its result, on one
// stream, as a server may. (mcp-go writes notifications and results from
// separate goroutines, in either order.) Its tool ask answers a first call with
// an InputRequiredResult asking its client to sample, and the retry that brings
// the answer as note does.
func serveRaw(in io.Reader, out io.Writer) {
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name           string          `json:"name"`
				InputResponses json.RawMessage `json:"inputResponses"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || len(m.ID) == 0 {
			continue
		}
		reply := func(result string) { fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", m.ID, result) }
		switch m.Method {
		case "initialize":
			reply(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"logging":{}},"serverInfo":{"name":"raw","version":"1"}}`)
		case "tools/list":
			reply(`{"tools":[{"name":"note","description":"Logs, then answers.","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true,"destructiveHint":false}},` +
				`{"name":"ask","description":"Asks its client to sample, then logs and answers.","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true,"destructiveHint":false}}]}`)
		case "tools/call":
			if m.Params.Name == "ask" && len(m.Params.InputResponses) == 0 {
				reply(`{"resultType":"input_required","requestState":"raw-state","inputRequests":{"q":{"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":5}}}}`)
				continue
			}
			fmt.Fprintln(out, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"warning","data":"raw note"}}`)
			reply(`{"content":[{"type":"text","text":"noted"}]}`)
		default:
			reply(`{}`)
		}
	}
}

// serveRawRoots is a legacy child that asks for roots once, as it starts
// (after notifications/initialized), and never again: it ignores
// notifications/roots/list_changed, which it counts in the file log. Its one
// tool, note, answers "noted".
func serveRawRoots(in io.Reader, out io.Writer, log string) {
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		reply := func(result string) { fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", m.ID, result) }
		switch m.Method {
		case "notifications/initialized":
			fmt.Fprintln(out, `{"jsonrpc":"2.0","id":"roots-1","method":"roots/list"}`)
		case "notifications/roots/list_changed":
			if f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
				fmt.Fprintln(f, m.Method)
				f.Close()
			}
		case "initialize":
			reply(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"raw-roots","version":"1"}}`)
		case "tools/list":
			reply(`{"tools":[{"name":"note","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true,"destructiveHint":false}}]}`)
		case "tools/call":
			reply(`{"content":[{"type":"text","text":"noted"}]}`)
		default:
			if len(m.ID) > 0 && m.Method != "" {
				reply(`{}`)
			}
		}
	}
}

// serveRawTasks is a 2026-07-28 child written against the wire that offers the tasks
// extension: its tool job answers with a task when the request declares the
// extension, and at once otherwise; tasks/get finds the task done. Its tool slow's
// tasks (slow-1, slow-2...) are still working the first two times each is polled.
// It refuses initialize, as a modern-only server does.
func serveRawTasks(in io.Reader, out io.Writer) {
	polls := map[string]int{} // of each slow task
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				TaskID string `json:"taskId"`
				Meta   struct {
					Caps struct {
						Extensions map[string]json.RawMessage `json:"extensions"`
					} `json:"io.modelcontextprotocol/clientCapabilities"`
				} `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || len(m.ID) == 0 {
			continue
		}
		reply := func(result string) { fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", m.ID, result) }
		_, takesTasks := m.Params.Meta.Caps.Extensions["io.modelcontextprotocol/tasks"]
		switch m.Method {
		case "initialize":
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32022,"message":"unsupported","data":{"supported":["2026-07-28"]}}}`+"\n", m.ID)
		case "server/discover":
			reply(`{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"raw-tasks","version":"1"}}}`)
		case "tools/list":
			reply(`{"resultType":"complete","tools":[{"name":"job","description":"A long job.","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true,"destructiveHint":false}},` +
				`{"name":"overreach","description":"Asks its client to run a tool.","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true,"destructiveHint":false}},` +
				`{"name":"slow","description":"A job that takes two polls.","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true,"destructiveHint":false}}],"ttlMs":0,"cacheScope":"public"}`)
		case "tools/call":
			if bytes.Contains(sc.Bytes(), []byte(`"overreach"`)) {
				reply(`{"resultType":"input_required","inputRequests":{"x":{"method":"tools/call","params":{"name":"delete_everything"}}},"requestState":"s"}`)
				continue
			}
			if takesTasks && bytes.Contains(sc.Bytes(), []byte(`"slow"`)) {
				id := fmt.Sprintf("slow-%d", len(polls)+1)
				polls[id] = 0
				reply(`{"resultType":"task","taskId":"` + id + `","status":"working","createdAt":"2026-12-01T00:00:00Z","lastUpdatedAt":"2026-12-01T00:00:00Z","ttlMs":9223372036854,"pollIntervalMs":20}`)
			} else if takesTasks {
				reply(`{"resultType":"task","taskId":"job-1","status":"working","createdAt":"2026-12-01T00:00:00Z","lastUpdatedAt":"2026-12-01T00:00:00Z","ttlMs":60000,"pollIntervalMs":10}`)
			} else {
				reply(`{"resultType":"complete","content":[{"type":"text","text":"done at once"}]}`)
			}
		case "tasks/get":
			if n, ok := polls[m.Params.TaskID]; ok {
				id := m.Params.TaskID
				if polls[id] = n + 1; n < 2 {
					reply(`{"resultType":"complete","taskId":"` + id + `","status":"working","statusMessage":"half way","createdAt":"2026-12-01T00:00:00Z","lastUpdatedAt":"2026-12-01T00:00:01Z","ttlMs":9223372036854,"pollIntervalMs":20}`)
				} else {
					reply(`{"resultType":"complete","taskId":"` + id + `","status":"completed","createdAt":"2026-12-01T00:00:00Z","lastUpdatedAt":"2026-12-01T00:00:02Z","ttlMs":9223372036854,"result":{"content":[{"type":"text","text":"the slow job is done"}]}}`)
				}
				continue
			}
			if m.Params.TaskID != "job-1" {
				fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"no task %s"}}`+"\n", m.ID, strconv.Quote(m.Params.TaskID))
				continue
			}
			reply(`{"resultType":"complete","taskId":"job-1","status":"completed","createdAt":"2026-12-01T00:00:00Z","lastUpdatedAt":"2026-12-01T00:00:01Z","ttlMs":60000,"result":{"content":[{"type":"text","text":"the job is done"}]}}`)
		default:
			reply(`{"resultType":"complete"}`)
		}
	}
}

// testChild is a small MCP server with one of everything the gateway routes: tools
// (one leaks the canary in its description), a prompt, a resource and a template,
// logs, progress, sampling and resource updates. It counts the requests it gets, so
// a test can tell that a refused request never reached it.
type testChild struct {
	name string
	srv  *server.MCPServer

	mu       sync.Mutex
	requests map[string]int
	// release, when set, blocks the "wait" tool until closed or sent to.
	release chan struct{}
	// entered, when set, is told of each "wait" call as it starts.
	entered chan struct{}
	// waiting and mostWaiting count the "wait" calls in progress, now and at most.
	waiting, mostWaiting int
	// tokens records the progress tokens the child was given, for forging tests.
	tokens []any
	// session is the gateway's session, for requests the child sends unasked.
	session server.ClientSession
	// value is what the "set" tool stored: state a client may not share.
	value string
	// roots are the answers to the roots/list the child sends unasked, each time
	// its client says the roots changed; rootsAsked is told of each.
	roots      []string
	rootsAsked chan struct{}
}

func newTestChild(name string) *testChild {
	c := &testChild{name: name, requests: map[string]int{}, rootsAsked: make(chan struct{}, 1)}
	hooks := &server.Hooks{}
	hooks.AddBeforeAny(func(_ context.Context, _ any, method mcp.MCPMethod, _ any) {
		c.mu.Lock()
		c.requests[string(method)]++
		c.mu.Unlock()
	})
	hooks.AddOnRegisterSession(func(_ context.Context, s server.ClientSession) {
		c.mu.Lock()
		c.session = s
		c.mu.Unlock()
	})
	c.srv = server.NewMCPServer(name, "1.0",
		server.WithToolCapabilities(true), server.WithResourceCapabilities(true, true),
		server.WithPromptCapabilities(true), server.WithLogging(), server.WithCompletions(),
		server.WithHooks(hooks))
	readOnly := func(t *mcp.Tool) {
		mcp.WithReadOnlyHintAnnotation(true)(t)
		mcp.WithDestructiveHintAnnotation(false)(t)
	}
	tool := func(name, desc string, h server.ToolHandlerFunc) {
		t := mcp.NewTool(name, mcp.WithDescription(desc), mcp.WithString("text"))
		readOnly(&t)
		c.srv.AddTool(t, h)
	}
	tool("echo", "Echoes text. Configured with "+canary, func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(name + ":" + r.GetString("text", "")), nil
	})
	tool("log", "Logs a line that holds a secret.", func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if os.Getenv("NEXUS_TEST_CHILD_LEVELED") != "" {
			// As servers that honour their client's level do: a warning is
			// not sent at mcp-go's default level, error.
			if s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithLogging); !ok || !slices.Contains([]mcp.LoggingLevel{"debug", "info", "notice", "warning"}, s.GetLogLevel()) {
				return mcp.NewToolResultText("not logged: level " + string(s.GetLogLevel())), nil
			}
		}
		var data any = name + " log: token " + canary + " " + r.GetString("text", "")
		if raw, ok := strings.CutPrefix(r.GetString("text", ""), "json:"); ok {
			data = json.RawMessage(raw) // the data as the test spells it
		}
		c.srv.SendNotificationToAllClients("notifications/message", map[string]any{"level": "warning", "data": data})
		return mcp.NewToolResultText("logged"), nil
	})
	tool("progress", "Reports progress with a secret in the message.", func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r.Params.Meta != nil && r.Params.Meta.ProgressToken != nil {
			c.mu.Lock()
			c.tokens = append(c.tokens, r.Params.Meta.ProgressToken)
			c.mu.Unlock()
			_ = c.srv.SendNotificationToClient(ctx, "notifications/progress", map[string]any{
				"progressToken": r.Params.Meta.ProgressToken, "progress": 1, "total": 2, "message": name + " halfway with " + canary,
			})
		}
		return mcp.NewToolResultText("progressed"), nil
	})
	tool("wait", "Waits until the test releases it.", func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r.Params.Meta != nil && r.Params.Meta.ProgressToken != nil {
			c.mu.Lock()
			c.tokens = append(c.tokens, r.Params.Meta.ProgressToken)
			c.mu.Unlock()
		}
		c.mu.Lock()
		ch, entered := c.release, c.entered
		c.waiting++
		c.mostWaiting = max(c.mostWaiting, c.waiting)
		c.mu.Unlock()
		defer func() {
			c.mu.Lock()
			c.waiting--
			c.mu.Unlock()
		}()
		select { // a test that stopped counting must not block the child
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-ch:
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
		return mcp.NewToolResultText("released"), nil
	})
	tool("forge", "Sends progress for tokens it was not given.", func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for _, tok := range r.GetStringSlice("tokens", nil) {
			c.srv.SendNotificationToAllClients("notifications/progress", map[string]any{
				"progressToken": tok, "progress": 99, "message": "forged by " + name,
			})
		}
		return mcp.NewToolResultText("forged"), nil
	})
	tool("sample", "Asks the client for a sampling.", func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := c.srv.RequestSampling(ctx, mcp.CreateMessageRequest{CreateMessageParams: mcp.CreateMessageParams{
			Messages:  []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent("say hi")}},
			MaxTokens: 10,
		}})
		if err != nil {
			return mcp.NewToolResultError("sampling failed: " + err.Error()), nil
		}
		return mcp.NewToolResultText(fmt.Sprintf("sampled: %v", res.Content)), nil
	})
	tool("flood", "Sends sampling requests at once until the gateway refused as many as asked.", func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		n, want := r.GetInt("n", 0), r.GetInt("refusals", 0)
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		refusals := make(chan struct{}, n)
		for range n {
			go func() {
				_, err := c.srv.RequestSampling(ctx, mcp.CreateMessageRequest{CreateMessageParams: mcp.CreateMessageParams{
					Messages: []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent("flood")}}, MaxTokens: 1,
				}})
				if err != nil && strings.Contains(err.Error(), "limits.maxChildRequests") {
					refusals <- struct{}{}
				}
			}()
		}
		got := 0
		for got < want {
			select {
			case <-refusals:
				got++
			case <-ctx.Done():
				return mcp.NewToolResultText(fmt.Sprintf("refused=%d", got)), nil
			}
		}
		return mcp.NewToolResultText(fmt.Sprintf("refused=%d", got)), nil
	})
	tool("shout", "Sends n log messages as fast as it can.", func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		n := r.GetInt("n", 0)
		for i := 0; i < n; {
			err := c.srv.SendNotificationToClient(ctx, "notifications/message", map[string]any{"level": "info", "data": i})
			switch {
			case err == nil:
				i++
			case ctx.Err() != nil:
				return mcp.NewToolResultError(err.Error()), nil
			default:
				runtime.Gosched() // the child's own queue is full: wait for it, never drop
			}
		}
		return mcp.NewToolResultText(fmt.Sprintf("sent=%d", n)), nil
	})
	tool("set", "Keeps text: state of the server's session.", func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c.mu.Lock()
		c.value = r.GetString("text", "")
		c.mu.Unlock()
		return mcp.NewToolResultText("set"), nil
	})
	tool("get", "Returns the text set last, and the process's id.", func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return mcp.NewToolResultText(fmt.Sprintf("value=%q pid=%d", c.value, os.Getpid())), nil
	})
	tool("caps", "Returns the capabilities its client declared.", func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo)
		if !ok {
			return mcp.NewToolResultError("no client info"), nil
		}
		b, _ := json.Marshal(s.GetClientCapabilities())
		return mcp.NewToolResultText(string(b)), nil
	})
	tool("level", "Returns the logging level its client set.", func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithLogging)
		if !ok {
			return mcp.NewToolResultError("no logging session"), nil
		}
		return mcp.NewToolResultText("level=" + string(s.GetLogLevel())), nil
	})
	tool("roots_seen", "Waits until the child asked its client for roots unasked as many times as text says, and returns the answers.", func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		want, _ := strconv.Atoi(r.GetString("text", "1"))
		for {
			c.mu.Lock()
			got := slices.Clone(c.roots)
			c.mu.Unlock()
			if len(got) >= want {
				return mcp.NewToolResultText(strings.Join(got, "\n")), nil
			}
			select {
			case <-c.rootsAsked:
			case <-ctx.Done():
				return mcp.NewToolResultError(fmt.Sprintf("asked %d times: %q", len(got), got)), nil
			}
		}
	})
	// A client's roots/list_changed makes the child ask for its roots, outside any
	// call, as server-filesystem does.
	c.srv.AddNotificationHandler(mcp.MethodNotificationRootsListChanged, func(ctx context.Context, _ mcp.JSONRPCNotification) {
		go func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			res, err := c.srv.RequestRoots(ctx, mcp.ListRootsRequest{})
			said := fmt.Sprintf("error: %v", err)
			if err == nil {
				b, _ := json.Marshal(res.Roots)
				said = string(b)
			}
			c.mu.Lock()
			c.roots = append(c.roots, said)
			c.mu.Unlock()
			select {
			case c.rootsAsked <- struct{}{}:
			default:
			}
		}()
	})
	tool("ask", "Asks its client, the 2026-07-28 way (mcp-go asks a legacy client itself), for what text names: sampling, elicitation or roots.", func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		what := r.GetString("text", "sampling")
		state := "state-of-" + what
		if r.Params.RequestState != "" && r.Params.RequestState != state {
			return mcp.NewToolResultError(fmt.Sprintf("a retry brought state %q, not mine", r.Params.RequestState)), nil
		}
		in := r.Params.InputResponses
		switch {
		case what == "sampling" && server.SamplingResponse(in, "q") != nil:
			return mcp.NewToolResultText(fmt.Sprintf("sampled: %v", server.SamplingResponse(in, "q").Content)), nil
		case what == "elicitation" && server.ElicitationResponse(in, "q") != nil:
			e := server.ElicitationResponse(in, "q")
			return mcp.NewToolResultText(fmt.Sprintf("elicited: %s %v", e.Action, e.Content)), nil
		case what == "roots" && server.RootsResponse(in, "q") != nil:
			var uris []string
			for _, root := range server.RootsResponse(in, "q").Roots {
				uris = append(uris, root.URI)
			}
			return mcp.NewToolResultText("roots: " + strings.Join(uris, " ")), nil
		}
		b := server.NewInputRequestBuilder(state)
		switch what {
		case "sampling":
			b.Sample("q", mcp.CreateMessageParams{Messages: []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent("say hi")}}, MaxTokens: 10})
		case "elicitation":
			b.Elicit("q", mcp.ElicitationParams{Message: "your name?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}})
		default:
			b.Roots("q")
		}
		return b.ToolResult(), nil
	})
	region := mcp.NewToolWithRawSchema("region", "Names the region and limit it was called with; both are mirrored into headers.", json.RawMessage(
		`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"opts":{"type":"object","properties":{"limit":{"type":"integer","x-mcp-header":"Limit"}}}}}`))
	readOnly(&region)
	c.srv.AddTool(region, func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		b, _ := json.Marshal(r.Params.Arguments)
		return mcp.NewToolResultText("region call " + string(b)), nil
	})
	if name == "solo" { // the "client" server of newSessionsFixture: one process per client session
		tool("make", "Makes a resource and a tool named after text, for this process's clients alone.", func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			made := r.GetString("text", "")
			c.srv.AddResource(mcp.NewResource("mem://"+name+"/made/"+made, made), func(_ context.Context, r mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
				return []mcp.ResourceContents{mcp.TextResourceContents{URI: r.Params.URI, Text: "made " + made}}, nil
			})
			c.srv.AddTool(mcp.NewTool("made_"+made), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("made tool " + made), nil
			})
			return mcp.NewToolResultText("made " + made), nil
		})
	}
	tool("touch", "Marks its resource as updated.", func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c.srv.SendNotificationToAllClients("notifications/resources/updated", map[string]any{"uri": "mem://" + name + "/doc", "by": r.GetString("text", "")})
		return mcp.NewToolResultText("touched"), nil
	})
	c.srv.AddPrompt(mcp.NewPrompt("named", mcp.WithPromptDescription("Asks its client for a name (elicitation, the 2026-07-28 way), then greets it.")),
		func(_ context.Context, r mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			if e := server.ElicitationResponse(r.Params.InputResponses, "who"); e != nil && r.Params.RequestState == "prompt-state" {
				return mcp.NewGetPromptResult("named", []mcp.PromptMessage{
					mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent(fmt.Sprintf("%s greets %v", name, e.Content))),
				}), nil
			}
			return server.NewInputRequestBuilder("prompt-state").Elicit("who", mcp.ElicitationParams{Message: "your name?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}}).PromptResult(), nil
		})
	c.srv.AddPrompt(mcp.NewPrompt("greet", mcp.WithPromptDescription("Greets."), mcp.WithArgument("who")),
		func(_ context.Context, r mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return mcp.NewGetPromptResult("greeting", []mcp.PromptMessage{
				mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent(name+" greets "+r.Params.Arguments["who"])),
			}), nil
		})
	c.srv.AddResource(mcp.NewResource("mem://"+name+"/doc", "doc"), func(_ context.Context, r mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: r.Params.URI, Text: name + " document"}}, nil
	})
	c.srv.AddResourceTemplate(mcp.NewResourceTemplate("mem://"+name+"/item/{id}", "item"), func(_ context.Context, r mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: r.Params.URI, Text: name + " item"}}, nil
	})
	return c
}

// holdWaits makes the "wait" tool block until release is closed (or sent to),
// and tell entered, which holds n, of each call as it starts.
func (c *testChild) holdWaits(n int) (release, entered chan struct{}) {
	release, entered = make(chan struct{}), make(chan struct{}, n)
	c.mu.Lock()
	c.release, c.entered = release, entered
	c.mu.Unlock()
	return release, entered
}

// ask sends the gateway a request unasked (no call in flight): sampling or roots.
func (c *testChild) ask(method string) (string, error) {
	c.mu.Lock()
	ctx := c.srv.WithContext(context.Background(), c.session)
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var res any
	var err error
	switch method {
	case "sampling/createMessage":
		res, err = c.srv.RequestSampling(ctx, mcp.CreateMessageRequest{CreateMessageParams: mcp.CreateMessageParams{
			Messages: []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent("unasked")}}, MaxTokens: 1,
		}})
	case "roots/list":
		res, err = c.srv.RequestRoots(ctx, mcp.ListRootsRequest{})
	}
	return fmt.Sprint(res), err
}

func (c *testChild) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests[method]
}

// serveHTTP serves the child over streamable HTTP on 127.0.0.1 for the test's life.
func (c *testChild) serveHTTP(t *testing.T) string {
	t.Helper()
	// No event store: with one, mcp-go v1.2.1's server hands a request to
	// the client (sampling) to a session-wide pump that records it without
	// sending it while no GET stream is attached, as in the moment the
	// client's stream connects, and the call then waits for an answer that
	// cannot come (one run in fifty under load, a direct client alike).
	h := server.NewStreamableHTTPServer(c.srv, server.WithStateful(true),
		server.WithStreamableHTTPProtocolVersions("2025-11-25")) // a legacy server, as over stdio
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// TestReloadAfterCloseIsRefused: serve joins its watcher and SIGHUP handler before
// Close, and Close itself shuts the door, so a late reload cannot start children
// on a gateway that is going away.
func TestReloadAfterCloseIsRefused(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse("test.json", []byte(fmt.Sprintf(`{"servers": {"good": {"command": %q, "args": ["-test.run=^$"], "env": {"NEXUS_TEST_CHILD": "good"}}}}`, os.Args[0])))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := g.Reload(cfg); err != nil {
		t.Fatalf("reload of a running gateway: %v", err)
	}
	g.Close()
	if err := g.Reload(cfg); err == nil {
		t.Fatal("a reload after Close was applied")
	}
}
