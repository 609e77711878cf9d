package tests

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// searchFront is one front of a search-mode session, as the test drives it.
type searchFront struct {
	list        func() []string
	call        func(name string, args map[string]any) (text string, structured json.RawMessage, isError bool)
	listChanged func() bool // whether a tools/list_changed arrived (waits a moment)
}

// TestSearchModeEndToEnd puts the npm filesystem server behind `nexus serve` in
// search mode, on both fronts: the list holds the pin and the two search tools;
// find returns the tool for a task with its schema and never one the policy
// refuses; nexus__call_tool calls a found tool, and refuses a refused one as a
// direct call would; the budget adds found tools to the session's list with
// list_changed.
func TestSearchModeEndToEnd(t *testing.T) {
	t.Parallel()
	node, script := peerScript(t, "@modelcontextprotocol/server-filesystem/dist/index.js")
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "hello.txt"), []byte("hi"), 0o600); err != nil {
		t.Fatal(err)
	}
	refused := []string{"files.write_file", "files.edit_file", "files.move_file", "files.create_directory"}
	cfg := map[string]any{
		"servers": map[string]any{"files": map[string]any{"command": node, "args": []string{script, root}, "timeout": "20s"}},
		"tools":   map[string]any{"mode": "search", "pin": []string{"files.read_text_file"}, "budget": 2},
		"policy":  map[string]any{"default": map[string]any{"allow": []string{"*"}, "deny": refused}},
	}
	fronts := map[string]func(t *testing.T, h *home) searchFront{
		"stdio": func(t *testing.T, h *home) searchFront {
			// The first list must hold the pinned tool: initialize once the
			// child is connected (see serveStdioReady).
			s := h.serveStdioReady([]string{"files"}, "--agent", "searcher")
			return searchFront{
				list: func() []string { return slices.Sorted(maps.Keys(s.tools())) },
				call: func(name string, args map[string]any) (string, json.RawMessage, bool) {
					r := s.call(name, args)
					return r.text(), r.StructuredContent, r.IsError
				},
				listChanged: func() bool {
					s.waitNote("notifications/tools/list_changed", 10*time.Second, nil)
					return true
				},
			}
		},
		"http": func(t *testing.T, h *home) searchFront {
			url, stderr := h.serveHTTP()
			waitChildren(t, stderr, "files")
			// The client keeps the session's stream open: what the gateway
			// sends unasked (list_changed) arrives there.
			c, err := client.NewStreamableHttpClient(url, transport.WithContinuousListening())
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
				ProtocolVersion: "2025-11-25", ClientInfo: mcp.Implementation{Name: "search-e2e", Version: "1"}}}); err != nil {
				t.Fatalf("initialize over HTTP: %v\n%s", err, stderr)
			}
			var changed atomic.Int32
			c.OnNotification(func(n mcp.JSONRPCNotification) {
				if n.Method == "notifications/tools/list_changed" {
					changed.Add(1)
				}
			})
			return searchFront{
				list: func() []string {
					res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
					if err != nil {
						t.Fatalf("tools/list: %v\n%s", err, stderr)
					}
					var names []string
					for _, tool := range res.Tools {
						names = append(names, tool.Name)
					}
					slices.Sort(names)
					return names
				},
				call: func(name string, args map[string]any) (string, json.RawMessage, bool) {
					res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}})
					if err != nil {
						t.Fatalf("calling %s: %v\n%s", name, err, stderr)
					}
					var text []string
					for _, ct := range res.Content {
						text = append(text, mcp.GetTextFromContent(ct))
					}
					structured, _ := json.Marshal(res.StructuredContent)
					return strings.Join(text, "\n"), structured, res.IsError
				},
				listChanged: func() bool {
					deadline := time.Now().Add(10 * time.Second)
					for changed.Load() == 0 && time.Now().Before(deadline) {
						time.Sleep(50 * time.Millisecond)
					}
					return changed.Load() > 0
				},
			}
		},
	}
	for name, open := range fronts {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := open(t, newHome(t, cfg))
			if got, want := f.list(), []string{"files__read_text_file", "nexus__call_tool", "nexus__find_tools"}; !slices.Equal(got, want) {
				t.Fatalf("tools/list in search mode: %v, want %v", got, want)
			}
			find := func(task string) []string {
				text, structured, isErr := f.call("nexus__find_tools", map[string]any{"task": task, "limit": 10})
				if isErr {
					t.Fatalf("find %q: %s", task, text)
				}
				var res struct {
					Tools []struct {
						Name        string          `json:"name"`
						InputSchema json.RawMessage `json:"inputSchema"`
					} `json:"tools"`
				}
				if err := json.Unmarshal(structured, &res); err != nil {
					t.Fatalf("find %q: %v: %s", task, err, structured)
				}
				var names []string
				for _, tool := range res.Tools {
					if len(tool.InputSchema) == 0 {
						t.Errorf("%s came without its input schema", tool.Name)
					}
					names = append(names, tool.Name)
				}
				return names
			}
			if got := find("list the entries of a directory"); len(got) < 3 || !slices.Contains(got[:3], "files__list_directory") {
				t.Errorf("find 'list the entries of a directory': %v, want files__list_directory in the first three", got)
			}
			for _, task := range []string{"write text to a new file", "edit a file", "move or rename a file", "create a directory"} {
				for _, got := range find(task) {
					for _, r := range refused {
						if got == strings.Replace(r, ".", "__", 1) {
							t.Errorf("find %q returned %s, which the policy refuses", task, got)
						}
					}
				}
			}
			if text, _, isErr := f.call("nexus__call_tool", map[string]any{"name": "files__list_directory", "arguments": map[string]any{"path": root}}); isErr || !strings.Contains(text, "hello.txt") {
				t.Errorf("call_tool files__list_directory: %q (error %v)", text, isErr)
			}
			made := filepath.Join(root, "made.txt")
			for _, call := range []struct {
				name string
				args map[string]any
			}{
				{"nexus__call_tool", map[string]any{"name": "files__write_file", "arguments": map[string]any{"path": made, "content": "x"}}},
				{"files__write_file", map[string]any{"path": made, "content": "x"}},
			} {
				if text, _, isErr := f.call(call.name, call.args); !isErr || !strings.Contains(text, "may not call") {
					t.Errorf("%s of a refused tool: %q (error %v), want the policy's refusal", call.name, text, isErr)
				}
			}
			if _, err := os.Stat(made); err == nil {
				t.Error("a refused write reached the server")
			}
			// A permitted tool no list holds is called directly, too.
			if text, _, isErr := f.call("files__list_allowed_directories", map[string]any{}); isErr || !strings.Contains(text, filepath.Base(root)) {
				t.Errorf("a direct call of a found tool: %q (error %v)", text, isErr)
			}
			if !f.listChanged() {
				t.Fatal("no tools/list_changed after finding tools with a budget")
			}
			got := f.list()
			if len(got) != 5 || !slices.Contains(got, "nexus__find_tools") || !slices.Contains(got, "files__read_text_file") {
				t.Errorf("tools/list after finding, with a budget of 2: %v", got)
			}
		})
	}
}
