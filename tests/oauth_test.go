package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/nexus-mcp/nexus/internal/oauthtest"
)

// oauthWorld is an authorization server and an MCP server behind its bearer
// check, both of the test's own on 127.0.0.1. The MCP server's "admin" tool needs
// the scope "admin" on top of "mcp".
type oauthWorld struct {
	as  *oauthtest.AS
	url string // the MCP endpoint
}

func newOAuthWorld(t *testing.T) *oauthWorld {
	t.Helper()
	w := &oauthWorld{as: oauthtest.NewAS(time.Hour)}
	t.Cleanup(w.as.Close)
	s := server.NewMCPServer("remote", "1")
	s.AddTool(mcp.NewTool("echo", mcp.WithString("text")), func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("echo: " + r.GetString("text", "")), nil
	})
	s.AddTool(mcp.NewTool("admin", mcp.WithString("text")), func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("admin: " + r.GetString("text", "")), nil
	})
	guard := &oauthtest.Guard{AS: w.as, Scope: "mcp", Step: map[string]string{"admin": "admin"}, Next: server.NewStreamableHTTPServer(s)}
	srv := httptest.NewServer(guard)
	t.Cleanup(srv.Close)
	w.url = srv.URL + "/mcp"
	guard.Resource = w.url
	return w
}

// login runs `nexus auth login remote --no-browser` and plays the browser: it
// reads the URL the command prints and follows it with an http.Client, which the
// authorization server redirects to the command's loopback listener.
func (w *oauthWorld) login(t *testing.T, h *home) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, built.nexus, "auth", "login", "remote", "--no-browser")
	cmd.Env = h.env()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout lockedBuffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var printed strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		printed.WriteString(line + "\n")
		if u, ok := strings.CutPrefix(strings.TrimSpace(line), "http://"); ok && strings.Contains(u, "/authorize?") {
			resp, err := http.Get("http://" + u) // the "browser"
			if err != nil {
				t.Fatalf("visiting the authorization URL: %v", err)
			}
			resp.Body.Close()
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("nexus auth login: %v\n%s%s", err, printed.String(), stdout.String())
	}
	if !strings.Contains(printed.String(), "waiting for the login") {
		t.Errorf("no progress line:\n%s", printed.String())
	}
	if !strings.Contains(stdout.String(), "logged in to remote at "+w.as.URL) {
		t.Errorf("auth login said:\n%s", stdout.String())
	}
	return printed.String() + stdout.String()
}

// callRemote calls remote's tool through the gateway; it returns the text, or
// the error's message.
func callRemote(s *session, tool, text string) (string, bool) {
	res, rpcErr := s.request("tools/call", map[string]any{"name": "remote__" + tool, "arguments": map[string]any{"text": text}})
	if rpcErr != nil {
		return rpcErr.Message, false
	}
	var r callResult
	if err := json.Unmarshal(res, &r); err != nil {
		return string(res), false
	}
	return r.text(), !r.IsError
}

// TestOAuthEndToEnd: a remote server that answers 401 needs a login, which a
// running gateway picks up without a restart; an expired token is refreshed; a
// revoked refresh token means a login again; a tool that needs more scope is a
// step-up login; and no token is ever in the logs, the config, memory.db or
// audit.db.
func TestOAuthEndToEnd(t *testing.T) {
	t.Parallel()
	w := newOAuthWorld(t)
	h := newHome(t, map[string]any{
		"servers": map[string]any{"remote": map[string]any{"url": w.url}},
		"secrets": map[string]any{"insecureFileStore": true},
		"status":  map[string]any{"public": true},
		"policy":  map[string]any{"default": map[string]any{"allow": []string{"*"}}},
	})
	var said strings.Builder // everything nexus printed

	out, errOut, code := h.nexus("add", "other", "--url", w.url)
	said.WriteString(out + errOut)
	if code != 0 || !strings.Contains(out, "nexus auth login other") {
		t.Errorf("nexus add of a URL that answers 401 with OAuth metadata does not offer the login: %d\n%s%s", code, out, errOut)
	}
	h.nexus("remove", "other")

	out, errOut, _ = h.nexus("list-servers", "--live")
	said.WriteString(out + errOut)
	if !strings.Contains(out, "needs login: run nexus auth login remote") {
		t.Fatalf("list-servers --live before a login:\n%s%s", out, errOut)
	}
	out, errOut, _ = h.nexus("doctor")
	said.WriteString(out + errOut)
	if !strings.Contains(out+errOut, "nexus auth login remote") {
		t.Errorf("doctor before a login:\n%s%s", out, errOut)
	}

	s := startSession(t, h.env(), built.nexus, "serve", "--metrics", "127.0.0.1:0")
	base := waitMetrics(t, s)
	var page string
	defer func() {
		if t.Failed() {
			t.Logf("page:\n%s\nstderr:\n%s", page, s.stderr)
		}
	}()
	eventually(t, 10*time.Second, "the gateway sees the server needs a login", func() bool {
		_, page = get(t, base+"/", "")
		return strings.Contains(page, "needs login: run nexus auth login remote")
	})
	if _, metrics := get(t, base+"/metrics", ""); metricValue(metrics, "nexus_servers", map[string]string{"state": "needs-login"}) != 1 {
		t.Errorf("nexus_servers{state=needs-login} is not 1:\n%s", grepLines(metrics, "nexus_servers"))
	}
	if msg, ok := callRemote(s, "echo", "a"); ok || !strings.Contains(msg, "needs login: run nexus auth login remote") {
		t.Errorf("a call before the login: %q", msg)
	}

	said.WriteString(w.login(t, h))
	var msg string
	eventually(t, 15*time.Second, "the running gateway uses the fresh login", func() bool {
		var ok bool
		msg, ok = callRemote(s, "echo", "b")
		return ok && msg == "echo: b"
	})

	w.as.ExpireAccess()
	if msg, ok := callRemote(s, "echo", "c"); !ok || msg != "echo: c" {
		t.Fatalf("a call after the token expired: %q", msg)
	}
	if w.as.Refreshes() < 1 {
		t.Error("the expired token was not refreshed")
	}

	if msg, ok := callRemote(s, "admin", "d"); ok || !strings.Contains(msg, "needs login") || !strings.Contains(msg, "admin") {
		t.Fatalf("a call that needs more scope: %q", msg)
	}
	out, _, _ = h.nexus("auth", "status")
	said.WriteString(out)
	if !strings.Contains(out, "logged in") || !strings.Contains(out, "admin") {
		t.Errorf("auth status after a step-up:\n%s", out)
	}
	said.WriteString(w.login(t, h))
	// The login signals the gateway, which reconnects the server: the call
	// succeeds once it has.
	eventually(t, 15*time.Second, "the call after the step-up login", func() bool {
		var ok bool
		msg, ok = callRemote(s, "admin", "e")
		return ok && msg == "admin: e"
	})

	w.as.RevokeRefresh()
	w.as.ExpireAccess()
	if msg, ok := callRemote(s, "echo", "f"); ok || !strings.Contains(msg, "needs login: run nexus auth login remote") {
		t.Fatalf("a call after the refresh token was revoked: %q", msg)
	}
	eventually(t, 10*time.Second, "the status page says the server needs a login", func() bool {
		_, page := get(t, base+"/", "")
		return strings.Contains(page, "needs login")
	})
	out, _, _ = h.nexus("auth", "status", "--json")
	said.WriteString(out)

	out, _, code = h.nexus("auth", "logout", "remote")
	said.WriteString(out)
	if code != 0 || !strings.Contains(out, "logged out of remote") {
		t.Errorf("auth logout: %d %s", code, out)
	}
	out, _, _ = h.nexus("auth", "status")
	if !strings.Contains(out, "not logged in") {
		t.Errorf("auth status after logout:\n%s", out)
	}
	s.close()

	issued := w.as.Issued()
	if len(issued) < 6 {
		t.Fatalf("the authorization server issued only %d credentials", len(issued))
	}
	places := map[string]string{"what nexus printed": said.String(), "the gateway's log": s.stderr.String()}
	for _, f := range []string{"config.json", "memory.db", "memory.db-wal", "audit.db", "audit.db-wal"} {
		b, err := os.ReadFile(filepath.Join(h.dir, f))
		if err == nil {
			places[f] = string(b)
		}
	}
	if places["audit.db"] == "" || places["memory.db"] == "" {
		t.Errorf("memory.db or audit.db is missing: the check proves nothing (%v)", mapKeys(places))
	}
	for where, text := range places {
		for _, cred := range issued {
			if strings.Contains(text, cred) {
				t.Errorf("a credential the authorization server issued is in %s", where)
			}
		}
	}
}

// waitMetrics returns the address serve --metrics says it serves on.
func waitMetrics(t *testing.T, s *session) string {
	t.Helper()
	re := regexp.MustCompile(`metrics on (http://\S+)/metrics`)
	var base string
	eventually(t, 10*time.Second, "serve --metrics says where", func() bool {
		if m := re.FindStringSubmatch(s.stderr.String()); m != nil {
			base = m[1]
		}
		return base != ""
	})
	return base
}

func grepLines(text, word string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestAuthCommandRefusals: auth commands given what they cannot work with say why,
// and change nothing.
func TestAuthCommandRefusals(t *testing.T) {
	t.Parallel()
	h := newHome(t, map[string]any{"servers": map[string]any{
		"local":  stdioEntry(),
		"static": map[string]any{"url": "http://127.0.0.1:1/mcp", "headers": map[string]string{"Authorization": "${env:STATIC_TOKEN}"}},
	}})
	before, _ := os.ReadFile(filepath.Join(h.dir, "config.json"))
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"auth", "login"}, "needs one SERVER"},
		{[]string{"auth", "login", "nosuch"}, `no server named "nosuch"`},
		{[]string{"auth", "login", "local"}, "stdio server"},
		{[]string{"auth", "login", "static"}, "Authorization header"},
		{[]string{"auth", "logout", "nosuch"}, `no server named "nosuch"`},
	}
	for _, tc := range tests {
		_, errOut, code := h.nexus(tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("nexus %v: exit %d, %q; want an error with %q", tc.args, code, errOut, tc.want)
		}
	}
	if after, _ := os.ReadFile(filepath.Join(h.dir, "config.json")); string(after) != string(before) {
		t.Error("a refused command changed the config")
	}
	if _, err := os.Stat(filepath.Join(h.dir, "secrets")); err == nil {
		t.Error("a refused command created the secrets store")
	}
}

// stdioEntry is a stdio server entry that never needs to start.
func stdioEntry() map[string]any { return map[string]any{"command": built.fixture} }
