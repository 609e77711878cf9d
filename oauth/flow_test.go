package oauth

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestFinishRefuses: a redirect with another state, another issuer, no issuer
// where one is promised, or an error is refused before any code is exchanged.
func TestFinishRefuses(t *testing.T) {
	d := &Discovery{Resource: "https://mcp.example/mcp", Server: ServerMetadata{Issuer: "https://as.example",
		AuthorizationEndpoint: "https://as.example/authorize", TokenEndpoint: "https://as.example/token",
		CodeChallengeMethodsSupported: []string{"S256"}, IssParameterSupported: true}}
	a, err := Begin(d, &ClientInfo{ID: "c", AuthMethod: AuthNone, RedirectURI: "http://127.0.0.1:1/callback"}, []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	au, _ := url.Parse(a.URL)
	q := au.Query()
	for k, want := range map[string]string{"response_type": "code", "code_challenge_method": "S256", "resource": d.Resource, "scope": "read", "client_id": "c"} {
		if q.Get(k) != want {
			t.Errorf("the authorization URL's %s is %q, want %q", k, q.Get(k), want)
		}
	}
	state := q.Get("state")
	tests := []struct {
		name, query, want string
	}{
		{"another state", "code=x&state=forged&iss=https%3A%2F%2Fas.example", "state does not match"},
		{"another issuer", "code=x&state=" + state + "&iss=https%3A%2F%2Fevil.example", "issuer"},
		{"a normalized issuer", "code=x&state=" + state + "&iss=https%3A%2F%2Fas.example%2F", "issuer"},
		{"no issuer where one is promised", "code=x&state=" + state, "lacks the iss"},
		{"an error", "error=access_denied&state=" + state + "&iss=https%3A%2F%2Fas.example", "access_denied"},
		{"no code", "state=" + state + "&iss=https%3A%2F%2Fas.example", "no code"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, _ := url.Parse("http://127.0.0.1:1/callback?" + tc.query)
			hc := &http.Client{Transport: failing{t}}
			_, err := a.Finish(context.Background(), hc, u)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestBeginRefusesWithoutS256: no PKCE with S256, no authorization.
func TestBeginRefusesWithoutS256(t *testing.T) {
	d := &Discovery{Server: ServerMetadata{Issuer: "https://as.example", CodeChallengeMethodsSupported: []string{"plain"}}}
	if _, err := Begin(d, &ClientInfo{ID: "c"}, nil); err == nil || !strings.Contains(err.Error(), "S256") {
		t.Fatalf("got %v, want a refusal naming S256", err)
	}
}

func TestWithOfflineAccess(t *testing.T) {
	tests := []struct {
		scopes, supported []string
		want              string
	}{
		{[]string{"read"}, []string{"read", "offline_access"}, "read offline_access"},
		{[]string{"read"}, []string{"read"}, "read"},
		{nil, []string{"offline_access"}, ""},
		{[]string{"offline_access"}, []string{"offline_access"}, "offline_access"},
	}
	for _, tc := range tests {
		if got := strings.Join(withOfflineAccess(tc.scopes, tc.supported), " "); got != tc.want {
			t.Errorf("withOfflineAccess(%v, %v) = %q, want %q", tc.scopes, tc.supported, got, tc.want)
		}
	}
}

// failing fails the test when a request is made: a refused redirect must not
// reach the token endpoint.
type failing struct{ t *testing.T }

func (f failing) RoundTrip(r *http.Request) (*http.Response, error) {
	f.t.Errorf("a request to %s was made", r.URL)
	return nil, http.ErrUseLastResponse
}
