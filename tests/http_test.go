package tests

import (
	"bufio"
	"context"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// serveHTTP starts `nexus serve --http 127.0.0.1:0` and returns its /mcp URL and its
// stderr so far.
func (h *home) serveHTTP(args ...string) (url string, stderr *lockedBuffer) {
	h.t.Helper()
	return h.serveHTTPEnv(nil, args...)
}

// serveHTTPEnv is serveHTTP with extra environment variables ("K=V").
func (h *home) serveHTTPEnv(env []string, args ...string) (url string, stderr *lockedBuffer) {
	h.t.Helper()
	return serveHTTPProcess(h.t, h.env(env...), args...)
}

// serveHTTPProcess starts `nexus serve --http 127.0.0.1:0` with env, stopped when t
// ends, and returns its /mcp URL and its stderr so far.
func serveHTTPProcess(t testing.TB, env []string, args ...string) (url string, stderr *lockedBuffer) {
	t.Helper()
	_, url, stderr = startHTTPProcess(t, env, args...)
	return url, stderr
}

// startHTTPProcess is serveHTTPProcess that also returns the process.
func startHTTPProcess(t testing.TB, env []string, args ...string) (cmd *exec.Cmd, url string, stderr *lockedBuffer) {
	t.Helper()
	cmd = exec.Command(built.nexus, append([]string{"serve", "--http", "127.0.0.1:0"}, args...)...)
	cmd.Env = withRace(env)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
	})
	stderr = &lockedBuffer{}
	found := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`listening on (http://\S+/mcp)`)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			stderr.Write([]byte(sc.Text() + "\n"))
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case url = <-found:
		return cmd, url, stderr
	case <-time.After(30 * time.Second):
		t.Fatalf("nexus serve --http did not start:\n%s", stderr)
	}
	return nil, "", nil
}

func httpClient(t testing.TB, url, token string) (*client.Client, error) {
	t.Helper()
	return httpClientNamed(t, url, token, "admin")
}

// httpClientNamed is an initialized streamable HTTP client that calls itself
// clientName in initialize.
func httpClientNamed(t testing.TB, url, token, clientName string) (*client.Client, error) {
	t.Helper()
	opts := []transport.StreamableHTTPCOption{}
	if token != "" {
		opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	}
	c, err := client.NewStreamableHttpClient(url, opts...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	_, err = c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: "2025-11-25", ClientInfo: mcp.Implementation{Name: clientName, Version: "1"}}})
	return c, err
}

func TestHTTPFront(t *testing.T) {
	t.Parallel()
	h := fixtureHome(t, nil, nil)
	url, stderr := h.serveHTTP()
	c, err := httpClient(t, url, "")
	if err != nil {
		t.Fatalf("initialize over HTTP: %v\n%s", err, stderr)
	}
	ctx := context.Background()
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("tools/list over HTTP: %v %+v", err, tools)
	}
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fx.echo", Arguments: map[string]any{"message": "over http"}}})
	if err != nil || mcp.GetTextFromContent(res.Content[0]) != "over http" {
		t.Fatalf("call over HTTP: %v %+v", err, res)
	}

	var mu sync.Mutex
	var progress []float64
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" {
			mu.Lock()
			progress = append(progress, n.Params.AdditionalFields["progress"].(float64))
			mu.Unlock()
		}
	})
	req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fx__progress", Arguments: map[string]any{"steps": 3}}}
	req.Params.Meta = &mcp.Meta{ProgressToken: "http-progress"}
	if res, err = c.CallTool(ctx, req); err != nil || res.IsError {
		t.Fatalf("progress call over HTTP: %v %+v", err, res)
	}
	eventually(t, 5*time.Second, "three progress notifications over HTTP", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(progress) == 3
	})
	eventually(t, 5*time.Second, "serving without tokens warns that everyone is anonymous", func() bool {
		return strings.Contains(stderr.String(), "anonymous")
	})
}

func TestHTTPRefusesToExposeWithoutAuth(t *testing.T) {
	t.Parallel()
	h := fixtureHome(t, nil, nil)
	_, stderr, code := h.nexus("serve", "--http", "0.0.0.0:0")
	if code == 0 || !strings.Contains(stderr, "without authentication") || !strings.Contains(stderr, "nexus agent add") {
		t.Errorf("want a refusal that says what to do, got %d:\n%s", code, stderr)
	}
}

func TestHTTPBearerTokens(t *testing.T) {
	t.Parallel()
	h := fixtureHome(t, nil, nil)
	token, stderr, code := h.nexus("agent", "add", "coder")
	token = strings.TrimSpace(token)
	if code != 0 || token == "" {
		t.Fatalf("agent add: %d %s", code, stderr)
	}
	cfg, _ := readFile(h.dir + "/config.json")
	if strings.Contains(cfg, token) {
		t.Fatal("the token itself was written to the config")
	}
	url, _ := h.serveHTTP()
	for _, tc := range []struct{ name, header string }{
		{"no token", ""},
		{"wrong token", "Bearer nxs_wrong"},
		{"not bearer", "Basic " + token},
	} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"coder","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.header != "" {
			req.Header.Set("Authorization", tc.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", tc.name, resp.StatusCode)
		}
	}
	if _, err := httpClient(t, url, token); err != nil {
		t.Fatalf("the right token is refused: %v", err)
	}
}
