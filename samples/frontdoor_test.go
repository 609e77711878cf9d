package samples

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

func TestFrontDoorRejects(t *testing.T) {
	r := newCodeKG(Options{})
	door := frontDoor{checks: r.checks}
	tests := []struct {
		name, msg string
		want      string // "" means passed on to mcp-go
	}{
		{"unknown field", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"kg_latest_graph","arguments":{"repo":"x"}}}`,
			`{"error":{"code":-32602,"message":"invalid params for kg_latest_graph: unknown field \"repo\""},"id":7,"jsonrpc":"2.0"}`},
		{"wrong type", `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"kg_list_audit_risks","arguments":{"limit":"x"}}}`,
			`{"error":{"code":-32602,"message":"invalid params for kg_list_audit_risks: field \"limit\": must be an integer, not a string"},"id":"a","jsonrpc":"2.0"}`},
		{"valid call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"kg_latest_graph","arguments":{}}}`, ""},
		{"no arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"kg_latest_graph"}}`, ""},
		{"unknown tool", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope","arguments":{"x":1}}}`, ""},
		{"other method", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, ""},
		{"notification", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"kg_latest_graph","arguments":{"repo":"x"}}}`, ""},
		{"not JSON", `{`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(door.reject([]byte(tc.msg))); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestServeStdioInvalidParams runs the stdio transport Serve uses and checks that a
// bad call gets a clean -32602 while the session goes on.
func TestServeStdioInvalidParams(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, CodeKGName, "", inR, outW, io.Discard) }()
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	send := func(s string) { io.WriteString(inW, s+"\n") }
	answer := func(id int) map[string]any {
		t.Helper()
		for lines.Scan() {
			var m map[string]any
			if json.Unmarshal(lines.Bytes(), &m) == nil && m["id"] == float64(id) {
				return m
			}
		}
		t.Fatalf("no answer to %d: %v", id, lines.Err())
		return nil
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	answer(1)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"kg_latest_graph","arguments":{"repo":"x"}}}`)
	e, _ := answer(2)["error"].(map[string]any)
	if e["code"] != float64(-32602) || e["message"] != `invalid params for kg_latest_graph: unknown field "repo"` {
		t.Errorf("error = %v", e)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"kg_latest_graph","arguments":{}}}`)
	if res := answer(3); res["result"] == nil || strings.Contains(lines.Text(), "rejected") {
		t.Errorf("valid call after a rejected one: %v", res)
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}
