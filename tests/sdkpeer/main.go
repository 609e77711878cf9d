// Command sdkpeer is an MCP server built on one of the Go SDKs, for the SDK
// matrix (tests/sdkmatrix_test.go): the same five tools, each exercising what
// a server asks of its client or sends it during a call, on each SDK.
//
//	sdkpeer mcp-go    github.com/mark3labs/mcp-go's server, on stdio
//	sdkpeer go-sdk    github.com/modelcontextprotocol/go-sdk's server, on stdio
//
// Tools: echo (answers its message, read-only: the benchmarks' call), sample
// (asks the client's model), elicit (asks the user for a name),
// roots (asks the client's roots), progress (reports three steps to a
// progress token), log (logs at info and at warning), touch (says the
// resource peer://note, to which clients may subscribe, was updated) and, on
// mcp-go, task (runs as a 2025-11-25 task when the call asks for one; the Go
// SDK v1.8.0 has no tasks). Each answers with what it got, as text.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func main() {
	var err error
	switch sdk := strings.Join(os.Args[1:], " "); sdk {
	case "mcp-go":
		err = server.ServeStdio(mcpGoServer())
	case "go-sdk":
		err = goSDKServer().Run(context.Background(), &gosdk.StdioTransport{})
	default:
		err = fmt.Errorf("usage: sdkpeer mcp-go|go-sdk (not %q)", sdk)
	}
	if err != nil && err != context.Canceled {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func mcpGoServer() *server.MCPServer {
	s := server.NewMCPServer("sdkpeer-mcp-go", "1.0.0", server.WithToolCapabilities(false), server.WithLogging(),
		server.WithElicitation(), server.WithRoots(), server.WithResourceCapabilities(true, false),
		server.WithTaskCapabilities(true, true, true))
	s.AddResource(mcp.NewResource("peer://note", "note"), func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: "peer://note", Text: "a note"}}, nil
	})
	text := func(format string, a ...any) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(fmt.Sprintf(format, a...)), nil
	}
	s.AddTool(mcp.NewTool("echo", mcp.WithString("message"), mcp.WithReadOnlyHintAnnotation(true), mcp.WithDestructiveHintAnnotation(false)),
		func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(r.GetString("message", "")), nil
		})
	s.AddTool(mcp.NewTool("sample"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := s.RequestSampling(ctx, mcp.CreateMessageRequest{CreateMessageParams: mcp.CreateMessageParams{
			Messages:  []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent("say hi")}},
			MaxTokens: 10}})
		if err != nil {
			return text("sampling failed: %v", err)
		}
		return text("sampled: %s", contentText(res.Content))
	})
	s.AddTool(mcp.NewTool("elicit"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := s.RequestElicitation(ctx, mcp.ElicitationRequest{Params: mcp.ElicitationParams{Message: "your name?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}}})
		if err != nil {
			return text("elicitation failed: %v", err)
		}
		return text("elicited: %s %v", res.Action, res.Content)
	})
	s.AddTool(mcp.NewTool("roots"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := s.RequestRoots(ctx, mcp.ListRootsRequest{})
		if err != nil {
			return text("roots failed: %v", err)
		}
		var uris []string
		for _, r := range res.Roots {
			uris = append(uris, r.URI)
		}
		return text("roots: %s", strings.Join(uris, ","))
	})
	s.AddTool(mcp.NewTool("progress"), func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r.Params.Meta == nil || r.Params.Meta.ProgressToken == nil {
			return text("no progress token")
		}
		for i := 1; i <= 3; i++ {
			_ = s.SendNotificationToClient(ctx, "notifications/progress", map[string]any{
				"progressToken": r.Params.Meta.ProgressToken, "progress": i, "total": 3})
		}
		return text("progress sent")
	})
	s.AddTool(mcp.NewTool("touch"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		s.SendNotificationToAllClients("notifications/resources/updated", map[string]any{"uri": "peer://note"})
		return text("touched")
	})
	// A task-augmented call runs it in the background, and tasks/result
	// answers with its result; a plain call answers at once.
	s.AddTool(mcp.NewTool("task", mcp.WithTaskSupport(mcp.TaskSupportOptional)), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		time.Sleep(50 * time.Millisecond)
		return text("task done")
	})
	s.AddTool(mcp.NewTool("log"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for _, l := range []mcp.LoggingLevel{mcp.LoggingLevelInfo, mcp.LoggingLevelWarning} {
			_ = s.SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(l, "sdkpeer", "a "+string(l)))
		}
		return text("logged")
	})
	return s
}

func contentText(c any) string {
	if tc, ok := c.(mcp.TextContent); ok {
		return tc.Text
	}
	return fmt.Sprint(c)
}

// goSDKServer has no task tool: the Go SDK v1.8.0 has no tasks (neither the
// 2025-11-25 ones nor the 2026-07-28 extension).
func goSDKServer() *gosdk.Server {
	noop := func(context.Context, *gosdk.SubscribeRequest) error { return nil }
	s := gosdk.NewServer(&gosdk.Implementation{Name: "sdkpeer-go-sdk", Version: "1.0.0"}, &gosdk.ServerOptions{HasTools: true,
		SubscribeHandler: noop, UnsubscribeHandler: func(context.Context, *gosdk.UnsubscribeRequest) error { return nil }})
	s.AddResource(&gosdk.Resource{URI: "peer://note", Name: "note"}, func(context.Context, *gosdk.ReadResourceRequest) (*gosdk.ReadResourceResult, error) {
		return &gosdk.ReadResourceResult{Contents: []*gosdk.ResourceContents{{URI: "peer://note", Text: "a note"}}}, nil
	})
	text := func(format string, a ...any) (*gosdk.CallToolResult, error) {
		return &gosdk.CallToolResult{Content: []gosdk.Content{&gosdk.TextContent{Text: fmt.Sprintf(format, a...)}}}, nil
	}
	empty := map[string]any{"type": "object"}
	s.AddTool(&gosdk.Tool{Name: "sample", InputSchema: empty}, func(ctx context.Context, r *gosdk.CallToolRequest) (*gosdk.CallToolResult, error) {
		res, err := r.Session.CreateMessage(ctx, &gosdk.CreateMessageParams{MaxTokens: 10,
			Messages: []*gosdk.SamplingMessage{{Role: "user", Content: &gosdk.TextContent{Text: "say hi"}}}})
		if err != nil {
			return text("sampling failed: %v", err)
		}
		if tc, ok := res.Content.(*gosdk.TextContent); ok {
			return text("sampled: %s", tc.Text)
		}
		return text("sampled: %v", res.Content)
	})
	s.AddTool(&gosdk.Tool{Name: "elicit", InputSchema: empty}, func(ctx context.Context, r *gosdk.CallToolRequest) (*gosdk.CallToolResult, error) {
		res, err := r.Session.Elicit(ctx, &gosdk.ElicitParams{Message: "your name?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}})
		if err != nil {
			return text("elicitation failed: %v", err)
		}
		return text("elicited: %s %v", res.Action, res.Content)
	})
	s.AddTool(&gosdk.Tool{Name: "roots", InputSchema: empty}, func(ctx context.Context, r *gosdk.CallToolRequest) (*gosdk.CallToolResult, error) {
		res, err := r.Session.ListRoots(ctx, nil)
		if err != nil {
			return text("roots failed: %v", err)
		}
		var uris []string
		for _, root := range res.Roots {
			uris = append(uris, root.URI)
		}
		return text("roots: %s", strings.Join(uris, ","))
	})
	s.AddTool(&gosdk.Tool{Name: "progress", InputSchema: empty}, func(ctx context.Context, r *gosdk.CallToolRequest) (*gosdk.CallToolResult, error) {
		token := r.Params.GetProgressToken()
		if token == nil {
			return text("no progress token")
		}
		for i := 1; i <= 3; i++ {
			_ = r.Session.NotifyProgress(ctx, &gosdk.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Total: 3})
		}
		return text("progress sent")
	})
	s.AddTool(&gosdk.Tool{Name: "touch", InputSchema: empty}, func(ctx context.Context, _ *gosdk.CallToolRequest) (*gosdk.CallToolResult, error) {
		_ = s.ResourceUpdated(ctx, &gosdk.ResourceUpdatedNotificationParams{URI: "peer://note"})
		return text("touched")
	})
	s.AddTool(&gosdk.Tool{Name: "log", InputSchema: empty}, func(ctx context.Context, r *gosdk.CallToolRequest) (*gosdk.CallToolResult, error) {
		for _, l := range []gosdk.LoggingLevel{"info", "warning"} {
			_ = r.Session.Log(ctx, &gosdk.LoggingMessageParams{Level: l, Logger: "sdkpeer", Data: "a " + string(l)})
		}
		return text("logged")
	})
	return s
}
