package oauth

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/internal/oauthtest"
	"github.com/nexus-mcp/nexus/secrets"
)

func TestParseChallenges(t *testing.T) {
	tests := []struct {
		header string
		want   []Challenge
	}{
		{`Bearer resource_metadata="https://x/.well-known/oauth-protected-resource", scope="a b"`,
			[]Challenge{{"Bearer", map[string]string{"resource_metadata": "https://x/.well-known/oauth-protected-resource", "scope": "a b"}}}},
		{`Bearer error="insufficient_scope", scope="files:write"`,
			[]Challenge{{"Bearer", map[string]string{"error": "insufficient_scope", "scope": "files:write"}}}},
		{`Basic realm="x", Bearer realm=y, error=invalid_token`,
			[]Challenge{{"Basic", map[string]string{"realm": "x"}}, {"Bearer", map[string]string{"realm": "y", "error": "invalid_token"}}}},
		{`Bearer`, []Challenge{{"Bearer", map[string]string{}}}},
		{`Bearer realm="a \"quoted\" one"`, []Challenge{{"Bearer", map[string]string{"realm": `a "quoted" one`}}}},
		{``, nil},
	}
	for _, tc := range tests {
		got := ParseChallenges([]string{tc.header})
		if len(got) != len(tc.want) {
			t.Errorf("%q: got %v, want %v", tc.header, got, tc.want)
			continue
		}
		for i := range got {
			if !strings.EqualFold(got[i].Scheme, tc.want[i].Scheme) || len(got[i].Params) != len(tc.want[i].Params) {
				t.Errorf("%q: challenge %d is %v, want %v", tc.header, i, got[i], tc.want[i])
				continue
			}
			for k, v := range tc.want[i].Params {
				if got[i].Params[k] != v {
					t.Errorf("%q: %s = %q, want %q", tc.header, k, got[i].Params[k], v)
				}
			}
		}
	}
}

func TestResourceCovers(t *testing.T) {
	tests := []struct {
		resource, server string
		want             bool
	}{
		{"https://x/mcp", "https://x/mcp", true},
		{"https://x", "https://x/mcp", true},
		{"https://x/", "https://x/mcp", true},
		{"https://X/mcp", "https://x/mcp", true},
		{"https://x/mc", "https://x/mcp", false},
		{"https://x/mcp/v2", "https://x/mcp", false},
		{"https://y/mcp", "https://x/mcp", false},
		{"http://x/mcp", "https://x/mcp", false},
		{"https://x:8443/mcp", "https://x/mcp", false},
	}
	for _, tc := range tests {
		u, _ := url.Parse(tc.server)
		if got := resourceCovers(tc.resource, u); got != tc.want {
			t.Errorf("resourceCovers(%q, %q) = %v, want %v", tc.resource, tc.server, got, tc.want)
		}
	}
}

// world is an authorization server and a protected endpoint that answers "ok".
type world struct {
	as    *oauthtest.AS
	url   string // the endpoint
	vault *Vault
	seen  []string // values registered with the "redactor"
}

func newWorld(t *testing.T, ttl time.Duration) *world {
	t.Helper()
	w := &world{as: oauthtest.NewAS(ttl)}
	t.Cleanup(w.as.Close)
	guard := &oauthtest.Guard{AS: w.as, Scope: "mcp", Step: map[string]string{"admin_tool": "admin"},
		Next: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { io.WriteString(rw, "ok") })}
	srv := httptest.NewServer(guard)
	t.Cleanup(srv.Close)
	w.url = srv.URL + "/mcp"
	guard.Resource = w.url
	w.vault = &Vault{Store: fileStore(t),
		Register: func(_, v string) { w.seen = append(w.seen, v) }}
	return w
}

// fileStore is a secrets file store in a private directory of the test's.
func fileStore(t *testing.T) *secrets.File {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return &secrets.File{Path: filepath.Join(dir, "secrets.json")}
}

func (w *world) session() *Session {
	return &Session{Server: "remote", URL: w.url, Vault: w.vault, HTTP: http.DefaultClient}
}

// get sends a request through a Transport of s; body names the tool called.
func get(s *Session, tool string) (string, error) {
	hc := &http.Client{Transport: &Transport{Session: s}}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `"}}`
	resp, err := hc.Post(s.URL, "application/json", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", errors.New(resp.Status)
	}
	return string(b), nil
}

// TestSessionLifecycle: a request before any login needs one; after a login it
// goes through; an expired token is refreshed; a revoked refresh token needs a
// login again; a tool that needs more scope needs a login that asks for it.
func TestSessionLifecycle(t *testing.T) {
	w := newWorld(t, time.Hour)
	ctx := context.Background()
	s := w.session()

	_, err := get(s, "echo")
	var le *LoginError
	if !errors.As(err, &le) || !errors.Is(err, ErrNeedsLogin) || le.Server != "remote" {
		t.Fatalf("before a login: %v, want a LoginError", err)
	}
	if !strings.Contains(err.Error(), "needs login: run nexus auth login remote") {
		t.Errorf("the error %q does not say what to run", err)
	}

	required := w.session()
	required.Required = true // auth "oauth": discovery before the first request
	if tok, err := required.Token(ctx); !errors.As(err, &le) {
		t.Fatalf("a Required session before a login: token %q, %v; want a LoginError", tok, err)
	}

	login := w.session()
	g, err := login.Login(ctx, &Follow{Redirect: "http://127.0.0.1:1/callback"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(g.Scope, "mcp") || !strings.Contains(g.Scope, "offline_access") {
		t.Errorf("the grant's scope is %q, want mcp and offline_access", g.Scope)
	}
	if len(w.seen) == 0 {
		t.Error("no credential was registered with the redactor")
	}

	s = w.session() // a fresh process: everything comes from the store
	if got, err := get(s, "echo"); err != nil || got != "ok" {
		t.Fatalf("after the login: %q, %v", got, err)
	}
	if tok, err := required.Token(ctx); err != nil || tok == "" {
		t.Fatalf("a Required session after the login: %q, %v", tok, err)
	}

	w.as.ExpireAccess()
	if got, err := get(s, "echo"); err != nil || got != "ok" {
		t.Fatalf("after the token expired: %q, %v", got, err)
	}
	if n := w.as.Refreshes(); n != 1 {
		t.Errorf("%d refreshes, want 1", n)
	}

	// A token that ends within the margin is refreshed before it is sent.
	w.as.SetTTL(30 * time.Second)
	w.as.ExpireAccess()
	get(s, "echo")
	before := w.as.Refreshes()
	if got, err := get(s, "echo"); err != nil || got != "ok" {
		t.Fatalf("with a token about to expire: %q, %v", got, err)
	}
	if w.as.Refreshes() != before+1 {
		t.Errorf("a token that ends within %s was not refreshed before use", refreshMargin)
	}
	w.as.SetTTL(time.Hour)

	_, err = get(s, "admin_tool")
	if !errors.As(err, &le) || !strings.Contains(le.Scope, "admin") {
		t.Fatalf("a tool that needs more scope: %v, want a LoginError asking for admin", err)
	}
	if _, err := w.session().Login(ctx, &Follow{Redirect: "http://127.0.0.1:1/callback"}); err != nil {
		t.Fatal(err)
	}
	s = w.session()
	if got, err := get(s, "admin_tool"); err != nil || got != "ok" {
		t.Fatalf("after the step-up login: %q, %v", got, err)
	}

	w.as.RevokeRefresh()
	w.as.ExpireAccess()
	_, err = get(s, "echo")
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("with a revoked refresh token: %v, want a LoginError", err)
	}
	for _, v := range w.seen {
		if strings.Contains(err.Error(), v) {
			t.Fatal("the error holds a credential")
		}
	}
}

// TestGrantsAreKeyedByIssuer: a token obtained from one authorization server is
// not found for another, even for the same server name.
func TestGrantsAreKeyedByIssuer(t *testing.T) {
	ctx := context.Background()
	v := &Vault{Store: fileStore(t)}
	g := &Grant{AccessToken: "at-one-1234", RefreshToken: "rt-one-1234", Issuer: "https://as-one.example", Resource: "https://mcp.example/mcp"}
	if err := v.SaveGrant(ctx, "remote", g); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Grant(ctx, "remote", "https://as-two.example"); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("another issuer's grant: %v, want not found", err)
	}
	got, err := v.Grant(ctx, "remote", "https://as-one.example")
	if err != nil || got.AccessToken != g.AccessToken || got.RefreshToken != g.RefreshToken {
		t.Fatalf("the issuer's own grant: %+v, %v", got, err)
	}
	if iss, _ := v.CurrentIssuer(ctx, "remote"); iss != g.Issuer {
		t.Errorf("current issuer %q", iss)
	}
	long := &Grant{AccessToken: strings.Repeat("a", 6000) + "-end", RefreshToken: "rt-short-1234", Issuer: "https://as-one.example"}
	if err := v.SaveGrant(ctx, "remote", long); err != nil {
		t.Fatalf("a token longer than one store value: %v", err)
	}
	if got, err := v.Grant(ctx, "remote", long.Issuer); err != nil || got.AccessToken != long.AccessToken {
		t.Fatalf("reading a long token: %v (%d bytes)", err, len(got.AccessToken))
	}
	if err := v.DeleteGrant(ctx, "remote", g.Issuer); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Grant(ctx, "remote", g.Issuer); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if names, _ := v.Store.(*secrets.File).Names(ctx); len(names) != 0 {
		t.Errorf("left after delete: %v", names)
	}
}

// TestDiscoveryRefusesAnotherIssuer: metadata that declares another issuer than
// the one asked for is refused.
func TestDiscoveryRefusesAnotherIssuer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"issuer":"https://evil.example","authorization_endpoint":"https://evil.example/a","token_endpoint":"https://evil.example/t"}`)
	}))
	defer srv.Close()
	_, err := DiscoverServer(context.Background(), http.DefaultClient, srv.URL)
	if err == nil || !strings.Contains(err.Error(), "declares issuer") {
		t.Fatalf("got %v, want a refusal", err)
	}
}

func TestCheckEndpoints(t *testing.T) {
	tests := []struct {
		endpoint string
		ok       bool
	}{
		{"https://as.example/token", true},
		{"http://127.0.0.1:8080/token", true},
		{"http://localhost/token", true},
		{"http://[::1]:9/token", true},
		{"http://as.example/token", false},
		{"ftp://as.example/token", false},
		{"/token", false},
	}
	for _, tc := range tests {
		err := checkEndpoints(&ServerMetadata{AuthorizationEndpoint: "https://as.example/a", TokenEndpoint: tc.endpoint})
		if (err == nil) != tc.ok {
			t.Errorf("checkEndpoints(token %q) = %v, want ok=%v", tc.endpoint, err, tc.ok)
		}
	}
}

// TestLoopback: the redirect to the loopback listener is what Visit returns.
func TestLoopback(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := &Loopback{Open: func(ctx context.Context, authURL string) error {
		go http.Get(authURL)
		return nil
	}}
	defer l.Close()
	uri, err := l.RedirectURI(ctx, "")
	if err != nil || !strings.HasPrefix(uri, "http://127.0.0.1:") {
		t.Fatalf("redirect URI %q, %v", uri, err)
	}
	got, err := l.Visit(ctx, uri+"?code=abc&state=xyz")
	if err != nil || got.Query().Get("code") != "abc" {
		t.Fatalf("Visit: %v, %v", got, err)
	}
}

func TestWellKnown(t *testing.T) {
	tests := []struct {
		u      string
		name   string
		issuer bool
		want   []string
	}{
		{"https://x/mcp", "oauth-protected-resource", false, []string{"https://x/.well-known/oauth-protected-resource/mcp", "https://x/.well-known/oauth-protected-resource"}},
		{"https://x", "oauth-protected-resource", false, []string{"https://x/.well-known/oauth-protected-resource"}},
		{"https://as/tenant1", "oauth-authorization-server", true, []string{"https://as/.well-known/oauth-authorization-server/tenant1"}},
		{"https://as/", "openid-configuration", true, []string{"https://as/.well-known/openid-configuration"}},
	}
	for _, tc := range tests {
		u, _ := url.Parse(tc.u)
		if got := wellKnown(u, tc.name, tc.issuer); strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("wellKnown(%s, %s) = %v, want %v", tc.u, tc.name, got, tc.want)
		}
	}
}
