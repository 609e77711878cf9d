package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestUpstreamSessionsAreShown: a "sessions": "client" server's upstream sessions are
// counted where an operator looks: list-servers (its setting and bound; --live a
// gateway of its own, with no client), /metrics and the status page of a serving
// gateway (one per client session that used it), and the count drops when a
// client's session ends.
func TestUpstreamSessionsAreShown(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	token := "nxs_sessions_test_token"
	h.writeConfig(map[string]any{
		"servers": map[string]any{"fx": h.fixtureServer(map[string]any{"timeout": "5s", "sessions": "client", "maxSessions": 3})},
		"agents":  map[string]any{"coder": map[string]any{"tokenSha256": polTokenHash(token)}},
		"policy":  map[string]any{"agents": map[string]any{"coder": map[string]any{"allow": []string{"*"}}}},
	})

	stdout, stderr, code := h.nexus("list-servers", "--live", "--json")
	if code != 0 {
		t.Fatalf("list-servers --live: %d %s", code, stderr)
	}
	var rows []struct {
		Name        string `json:"name"`
		Sessions    string `json:"sessions"`
		Upstream    *int   `json:"upstreamSessions"`
		MaxSessions int    `json:"maxSessions"`
	}
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("list-servers --live --json: %v\n%s", err, stdout)
	}
	if r := rows[0]; r.Sessions != "client" || r.MaxSessions != 3 || r.Upstream == nil || *r.Upstream != 0 {
		t.Errorf("list-servers --live: %+v, want sessions client, 0 of 3", r)
	}
	stdout, _, _ = h.nexus("list-servers")
	if !strings.Contains(stdout, "client (max 3)") {
		t.Errorf("list-servers does not show the sessions setting:\n%s", stdout)
	}

	s := h.startServe("listening on", "--http", "127.0.0.1:0")
	ctx := context.Background()
	var sessionIDs []string
	for range 2 {
		c, err := httpClient(t, s.base+"/mcp", token)
		if err != nil {
			t.Fatalf("initialize: %v\n%s", err, s.stderr)
		}
		res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"message": "hi"}}})
		if err != nil || res.IsError {
			t.Fatalf("echo: %v %+v\n%s", err, res, s.stderr)
		}
		sessionIDs = append(sessionIDs, c.GetTransport().GetSessionId())
	}
	upstream := func() float64 {
		code, text := get(t, s.base+"/metrics", token)
		if code != http.StatusOK {
			t.Fatalf("GET /metrics: %d %s", code, text)
		}
		return metricValue(text, "nexus_server_upstream_sessions", map[string]string{"server": "fx"})
	}
	if n := upstream(); n != 2 {
		t.Errorf("nexus_server_upstream_sessions of fx: %v, want 2", n)
	}
	if code, page := get(t, s.base+"/", token); code != http.StatusOK || !strings.Contains(page, "2 of 3") {
		t.Errorf("the status page (%d) does not show 2 of 3 upstream sessions:\n%s", code, page)
	}
	// The first client ends its session. (mcp-go's client sends its DELETE
	// without the bearer token, which the gateway refuses: the test sends it.)
	req, _ := http.NewRequest(http.MethodDelete, s.base+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Session-Id", sessionIDs[0])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("DELETE /mcp: %d", resp.StatusCode)
	}
	eventually(t, 20*time.Second, "the ended session's upstream session is dropped", func() bool { return upstream() == 1 })
}

// TestSSEChildIsOfferedNoClientRequests: mcp-go's SSE client transport cannot
// receive a server's requests, so Nexus declares no sampling, elicitation or roots
// to an SSE child. server-everything, which offers its sampling and roots tools only
// to a client that declared them, offers them directly (the harness's client
// declares both) but not over SSE through Nexus: no tool is listed whose request
// would wait unanswered.
func TestSSEChildIsOfferedNoClientRequests(t *testing.T) {
	t.Parallel()
	node, script := everythingServer(t)
	addr, err := freeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := strings.Cut(addr, ":")
	h := newHome(t, nil)
	sse := exec.Command(node, script, "sse")
	sse.Env = append(h.env(), "PORT="+port)
	stderr := &lockedBuffer{}
	sse.Stderr = stderr
	if err := sse.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sse.Process.Kill(); sse.Wait() })
	eventually(t, 30*time.Second, "server-everything serves SSE", func() bool { return strings.Contains(stderr.String(), "Server is running on port") })

	direct := startSession(t, h.env(), node, script, "stdio").tools()
	for _, name := range []string{"trigger-sampling-request", "get-roots-list"} {
		if _, ok := direct[name]; !ok {
			t.Fatalf("server-everything does not offer %s to a client that declared it; the test shows nothing", name)
		}
	}
	h.writeConfig(map[string]any{
		"servers": map[string]any{"everything": map[string]any{"transport": "sse", "url": "http://" + addr + "/sse", "timeout": "20s"}},
		"policy":  map[string]any{"default": map[string]any{"allow": []string{"*"}}},
	})
	through := h.serveStdioReady([]string{"everything"}, "--no-memory").tools() // see TestServerEverythingThroughNexus
	if _, ok := through["everything__echo"]; !ok {
		t.Fatalf("server-everything over SSE is not connected: %d tools", len(through))
	}
	for _, name := range []string{"trigger-sampling-request", "get-roots-list"} {
		if _, ok := through["everything__"+name]; ok {
			t.Errorf("an SSE child was declared what %s needs", name)
		}
	}
}
