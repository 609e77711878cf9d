package aggregation

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/nexus-mcp/nexus/internal/stdioera"
)

// An era child is the test binary serving an mcp-go server (dual-era) over
// stdio, behind a filter that makes it speak one era only. TestMain runs it
// when NEXUS_TEST_ERA_CHILD names its kind:
//
//	dual    both eras, as mcp-go serves them
//	legacy  refuses server/discover with method not found, as old servers do
//	silent  never answers server/discover, as some old servers do
//	modern  refuses initialize, naming the versions it supports
//	file:P  the kind the file P holds when the process starts
//	gate:P  dual, once the file P does not exist (a start that takes as long
//	        as a test says)
//	nosubscribe legacy, with resources it offers no subscription to
//
// Every request it gets is appended, one method a line, to the file
// NEXUS_TEST_ERA_LOG names, so a test sees what Nexus asked each process.
const eraChildEnv = "NEXUS_TEST_ERA_CHILD"

func serveEraChild(kind string) int {
	if path, ok := strings.CutPrefix(kind, "gate:"); ok {
		for _, err := os.Stat(path); err == nil; _, err = os.Stat(path) {
			time.Sleep(10 * time.Millisecond)
		}
		kind = "dual"
	}
	if path, ok := strings.CutPrefix(kind, "file:"); ok {
		b, _ := os.ReadFile(path) // the kind this start is: a test changes it between starts
		kind = strings.TrimSpace(string(b))
	}
	if kind == "nosubscribe" {
		return serveStdioEra("legacy", newEraServer(kind))
	}
	return serveStdioEra(kind, newEraServer(kind))
}

// serveStdioEra serves srv on stdio in the era kind names (see eraChildEnv),
// writing each method that arrives to NEXUS_TEST_ERA_LOG when it is set.
func serveStdioEra(kind string, srv *server.MCPServer) int {
	var seen func(string)
	if logFile := os.Getenv("NEXUS_TEST_ERA_LOG"); logFile != "" {
		seen = func(method string) {
			if f, err := os.OpenFile(logFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
				fmt.Fprintf(f, "%d %s\n", os.Getpid(), method)
				f.Close()
			}
		}
	}
	if err := stdioera.Serve(context.Background(), srv, kind, os.Stdin, os.Stdout, seen); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// newEraServer is the era child's server: "echo" answers with its era, "grow"
// adds the tool "grown" (a tools/list_changed), "touch" tells the sessions
// subscribed to era://note that it changed.
func newEraServer(kind string) *server.MCPServer {
	// The resources the open listen stream names, by its request id (mcp-go's
	// stdio session keeps no subscriptions of its own), and the session to
	// tell.
	var mu sync.Mutex
	streams := map[string][]string{}
	var session server.ClientSession
	hooks := &server.Hooks{}
	hooks.AddOnRegisterSession(func(_ context.Context, s server.ClientSession) {
		mu.Lock()
		session = s
		mu.Unlock()
	})
	hooks.AddBeforeAny(func(ctx context.Context, id any, method mcp.MCPMethod, message any) {
		if method != mcp.MethodSubscriptionsListen {
			return
		}
		var req struct {
			Params mcp.SubscriptionsListenParams `json:"params"`
		}
		b, _ := json.Marshal(message)
		_ = json.Unmarshal(b, &req)
		mu.Lock()
		streams[fmt.Sprint(id)] = req.Params.Notifications.ResourceSubscriptions
		if s := server.ClientSessionFromContext(ctx); s != nil {
			session = s
		}
		mu.Unlock()
	})
	ended := func(_ context.Context, id any, method mcp.MCPMethod, _ any, _ any) {
		if method == mcp.MethodSubscriptionsListen {
			mu.Lock()
			delete(streams, fmt.Sprint(id))
			mu.Unlock()
		}
	}
	hooks.AddOnSuccess(ended)
	hooks.AddOnError(func(ctx context.Context, id any, method mcp.MCPMethod, message any, _ error) {
		ended(ctx, id, method, message, nil)
	})
	srv := server.NewMCPServer("era-"+kind, "1.0", server.WithToolCapabilities(true),
		server.WithResourceCapabilities(kind != "nosubscribe", true), server.WithLogging(), server.WithInstructions("The "+kind+" era child."),
		server.WithHooks(hooks))
	srv.AddTool(mcp.NewTool("touch"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		mu.Lock()
		defer mu.Unlock()
		told := 0
		for id, uris := range streams {
			if slices.Contains(uris, "era://note") && session != nil {
				session.NotificationChannel() <- mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{
					Method: "notifications/resources/updated", Params: mcp.NotificationParams{
						Meta:             map[string]any{mcp.MetaKeySubscriptionID: id},
						AdditionalFields: map[string]any{"uri": "era://note"}}}}
				told++
			}
		}
		return mcp.NewToolResultText(fmt.Sprintf("told %d", told)), nil
	})
	srv.AddTool(mcp.NewTool("echo", mcp.WithString("text")), func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		era := "legacy"
		if mcp.IsModernProtocol(server.RequestProtocolVersion(ctx)) {
			era = "modern"
		}
		return mcp.NewToolResultText(era + ":" + r.GetString("text", "")), nil
	})
	srv.AddTool(mcp.NewTool("log"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		_ = srv.SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(mcp.LoggingLevelWarning, "era", "a warning"))
		return mcp.NewToolResultText("logged"), nil
	})
	srv.AddTool(mcp.NewTool("exit"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		go func() {
			time.Sleep(100 * time.Millisecond) // the answer goes first
			os.Exit(0)
		}()
		return mcp.NewToolResultText("exiting"), nil
	})
	srv.AddTool(mcp.NewTool("grow"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		srv.AddTool(mcp.NewTool("grown"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("grown"), nil
		})
		return mcp.NewToolResultText("grew"), nil
	})
	srv.AddResource(mcp.NewResource("era://note", "note"), func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: "era://note", Text: "a note"}}, nil
	})
	return srv
}

// eraLog is what the era children of a test were asked: per process, the
// methods in order.
func eraLog(path string) map[string][]string {
	b, _ := os.ReadFile(path)
	out := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		pid, method, ok := strings.Cut(line, " ")
		if ok {
			out[pid] = append(out[pid], method)
		}
	}
	return out
}
