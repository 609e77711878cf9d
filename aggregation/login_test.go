package aggregation

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/internal/oauthtest"
	"github.com/nexus-mcp/nexus/oauth"
	"github.com/nexus-mcp/nexus/secrets"
)

// TestNeedsLoginState: a remote child whose authorization needs a person is in
// StateNeedsLogin, which its status and a call's error say with the command to
// run; after a login, a reload (what nexus auth login signals) brings it up.
func TestNeedsLoginState(t *testing.T) {
	t.Parallel()
	as := oauthtest.NewAS(time.Hour)
	t.Cleanup(as.Close)
	guard := &oauthtest.Guard{AS: as, Scope: "mcp", Next: server.NewStreamableHTTPServer(newTestChild("web").srv)}
	ts := httptest.NewServer(guard)
	t.Cleanup(ts.Close)
	guard.Resource = ts.URL + "/mcp"

	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	vault := &oauth.Vault{Store: &secrets.File{Path: filepath.Join(dir, "secrets.json")}}
	session := func(s *config.Server) *oauth.Session {
		return &oauth.Session{Server: s.Name, URL: s.URL, Vault: vault, HTTP: http.DefaultClient}
	}
	cfg, err := config.Parse("test.json", []byte(fmt.Sprintf(`{"servers": {"web": {"url": %q}}, "policy": {"agents": {"anonymous": {"allow": ["*"]}}}}`, guard.Resource)))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{HTTPClient: func(s *config.Server) *http.Client {
		return &http.Client{Transport: &oauth.Transport{Session: session(s)}}
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); g.Close() })
	c := g.kids()["web"]
	waitState(t, c, StateNeedsLogin)

	want := "needs login: run nexus auth login web"
	if d := c.status().Describe(); !strings.HasPrefix(d, want) {
		t.Errorf("the status says %q, want it to start with %q", d, want)
	}
	if got := callText(t, g, "web__echo", `{"text":"one"}`); !strings.Contains(got, want) {
		t.Errorf("a call before the login: %s", got)
	}

	if _, err := session(cfg.Servers["web"]).Login(ctx, &oauth.Follow{Redirect: "http://127.0.0.1:1/callback"}); err != nil {
		t.Fatal(err)
	}
	if err := g.Reload(g.Config()); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, StateReady)
	if got := callText(t, g, "web__echo", `{"text":"two"}`); !strings.Contains(got, "web:two") {
		t.Errorf("a call after the login: %s", got)
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	tests := []struct {
		st   Status
		want string
	}{
		{Status{State: StateReady}, "ready"},
		{Status{State: StateFailed, Error: "boom"}, "failed: boom"},
		{Status{State: StateNeedsLogin, Error: "needs login: run nexus auth login x"}, "needs login: run nexus auth login x"},
		{Status{State: StateNeedsLogin}, "needs login"},
	}
	for _, tt := range tests {
		if got := tt.st.Describe(); got != tt.want {
			t.Errorf("Describe(%+v) = %q, want %q", tt.st, got, tt.want)
		}
	}
}

// TestNoClientForAServerWithItsOwnHeader: Options.HTTPClient answers nil for a
// server that is given its own Authorization header (it is not authorized with
// OAuth); the child then connects with the transport's own client, over SSE and
// streamable HTTP alike, instead of crashing the gateway on a nil client.
func TestNoClientForAServerWithItsOwnHeader(t *testing.T) {
	t.Parallel()
	child := newTestChild("web")
	mux := http.NewServeMux()
	mux.Handle("/mcp", server.NewStreamableHTTPServer(child.srv))
	sse := server.NewSSEServer(child.srv, server.WithStaticBasePath("/sse"))
	mux.Handle("/sse/", sse)
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	for _, tc := range []struct{ transport, url string }{
		{config.TransportStreamableHTTP, ts.URL + "/mcp"},
		{config.TransportSSE, ts.URL + "/sse/sse"},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			cfg, err := config.Parse("test.json", []byte(fmt.Sprintf(`{"servers": {"web": {"transport": %q, "url": %q, "headers": {"Authorization": "Bearer own"}}},
				"policy": {"agents": {"anonymous": {"allow": ["*"]}}}}`, tc.transport, tc.url)))
			if err != nil {
				t.Fatal(err)
			}
			asked := 0
			g, err := New(cfg, Options{HTTPClient: func(*config.Server) *http.Client { asked++; return nil }})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			if err := g.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cancel(); g.Close() })
			waitState(t, g.kids()["web"], StateReady)
			if got := callText(t, g, "web__echo", `{"text":"one"}`); !strings.Contains(got, "one") {
				t.Errorf("a call: %s", got)
			}
			if asked == 0 {
				t.Error("Options.HTTPClient was never asked")
			}
		})
	}
}
