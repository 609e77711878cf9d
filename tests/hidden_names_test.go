package tests

import (
	"strings"
	"testing"
)

// TestNamesOnlyOfCallableTools is issue 38's point 11 (and issue 36's): a bare tool
// name is judged only by the tools the agent may call, and "did you mean" names
// only those, each once; in every tool mode, directly and through
// nexus__call_tool.
func TestNamesOnlyOfCallableTools(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"all", "search"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			h := newHome(t, nil)
			h.writeConfig(map[string]any{
				"servers": map[string]any{"one": h.fixtureServer(nil), "two": h.fixtureServer(nil)},
				"tools":   mode,
				// The agent sees server two (two.lookup) but may not call two.echo:
				// this default does not allow read-only tools as such.
				"policy": map[string]any{"default": map[string]any{"allow": []string{"one.*", "two.lookup"}}},
			})
			s := h.serveStdioReady([]string{"one", "two"})
			// answer is what a call of name gets: its text, or its JSON-RPC error.
			answer := func(name string, via bool) string {
				t.Helper()
				params := map[string]any{"name": name, "arguments": map[string]any{"message": "bare"}}
				if via {
					params = map[string]any{"name": "nexus__call_tool", "arguments": params}
				}
				res, rpcErr := s.request("tools/call", params)
				if rpcErr != nil {
					return rpcErr.Message
				}
				return string(res)
			}
			for _, via := range []bool{false, true} {
				if via && mode != "search" {
					continue // nexus__call_tool is search mode's
				}
				if got := answer("echo", via); !strings.Contains(got, "bare") || strings.Contains(got, "ambiguous") {
					t.Errorf("bare echo (via nexus__call_tool: %v): %s", via, got)
				}
				got := answer("ech", via)
				if !strings.Contains(got, "unknown tool") || strings.Contains(got, "two") {
					t.Errorf("ech (via nexus__call_tool: %v) names a tool the agent may not call, or is not unknown: %s", via, got)
				}
				if strings.Contains(got, "one.echo") == strings.Contains(got, "one__echo") {
					t.Errorf("ech (via nexus__call_tool: %v): want one.echo named once, in one spelling: %s", via, got)
				}
			}
		})
	}
}
