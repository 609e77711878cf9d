package oauth

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/internal/oauthtest"
)

// recorder is another origin: it records every request it gets, credentials and
// all, so a test can say none reached it.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.seen = append(r.seen, req.Method+" "+req.URL.String()+" "+req.Header.Get("Authorization")+" "+string(body))
		r.mu.Unlock()
		io.WriteString(w, `{"access_token":"stolen"}`)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen
}

// redirectTo answers every request with a 307 to target.
func redirectTo(t *testing.T, target string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestTokenStaysAtItsOrigin: a logged-in MCP endpoint that answers 307 (or 308)
// with another origin, plain http included, does not get the bearer token sent
// there: the request fails and the other origin sees nothing.
func TestTokenStaysAtItsOrigin(t *testing.T) {
	as := oauthtest.NewAS(time.Hour)
	t.Cleanup(as.Close)
	elsewhere := newRecorder(t)
	tests := []struct {
		name, location string
		status         int
	}{
		{"307 to another origin", elsewhere.URL, http.StatusTemporaryRedirect},
		{"308 to another origin", elsewhere.URL, http.StatusPermanentRedirect},
		{"307 to another port of the same host", "http://127.0.0.1:" + elsewhere.URL[strings.LastIndex(elsewhere.URL, ":")+1:], http.StatusTemporaryRedirect},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			guard := &oauthtest.Guard{AS: as, Scope: "mcp", Next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, tc.location+"/mcp", tc.status)
			})}
			srv := httptest.NewServer(guard)
			t.Cleanup(srv.Close)
			guard.Resource = srv.URL + "/mcp"
			s := &Session{Server: "remote", URL: guard.Resource, Vault: &Vault{Store: fileStore(t)}, HTTP: http.DefaultClient}
			if _, err := s.Login(context.Background(), &Follow{Redirect: "http://127.0.0.1:1/callback"}); err != nil {
				t.Fatal(err)
			}
			_, err := get(s, "echo")
			if err == nil || !strings.Contains(err.Error(), "refusing to send its token there") {
				t.Errorf("got %v, want a refusal to send the token elsewhere", err)
			}
			if got := elsewhere.requests(); len(got) != 0 {
				t.Errorf("the other origin got %q", got)
			}
		})
	}
}

// TestCredentialsFollowNoRedirect: a token endpoint (for a code, with
// client_secret_post, and for a refresh) and a registration endpoint that answer
// 307 do not get the code, the verifier, the secret or the refresh token posted
// to the Location.
func TestCredentialsFollowNoRedirect(t *testing.T) {
	elsewhere := newRecorder(t)
	moved := redirectTo(t, elsewhere.URL)
	d := &Discovery{Resource: "https://mcp.example/mcp", Server: ServerMetadata{Issuer: "https://as.example",
		AuthorizationEndpoint: "https://as.example/authorize", TokenEndpoint: moved.URL + "/token",
		RegistrationEndpoint: moved.URL + "/register", CodeChallengeMethodsSupported: []string{"S256"}}}
	client := &ClientInfo{ID: "c", Secret: "the-client-secret", AuthMethod: AuthPost, RedirectURI: "http://127.0.0.1:1/callback"}
	ctx := context.Background()
	tests := []struct {
		name string
		run  func() error
	}{
		{"authorization code", func() error {
			a, err := Begin(d, client, nil)
			if err != nil {
				return err
			}
			au, _ := url.Parse(a.URL)
			back, _ := url.Parse("http://127.0.0.1:1/callback?code=the-code&state=" + au.Query().Get("state"))
			_, err = a.Finish(ctx, http.DefaultClient, back)
			return err
		}},
		{"refresh", func() error {
			_, err := Refresh(ctx, http.DefaultClient, d, client, &Grant{RefreshToken: "the-refresh-token"})
			return err
		}},
		{"registration", func() error {
			_, err := Register(ctx, http.DefaultClient, &d.Server, ClientConfig{}, client.RedirectURI)
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if err == nil || !strings.Contains(err.Error(), "refusing to send the request's credentials anywhere but the endpoint named") {
				t.Errorf("got %v, want a refusal to follow the redirect", err)
			}
			if got := elsewhere.requests(); len(got) != 0 {
				t.Errorf("the redirect's target got %q", got)
			}
		})
	}
}
