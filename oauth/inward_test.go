package oauth

import (
	"context"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/internal/oauthtest"
)

// TestDiscoveryStaysOutside: OAuth discovery for a server elsewhere refuses
// metadata, authorization servers and token endpoints on this machine or its
// networks, each with its reason, checked as the connection is made; a local
// server's own address, and an address config allows, are reached.
func TestDiscoveryStaysOutside(t *testing.T) {
	as := oauthtest.NewAS(time.Hour)
	t.Cleanup(as.Close)
	port := as.URL[strings.LastIndex(as.URL, ":")+1:]
	elsewhere := newRecorder(t)
	hop := redirectTo(t, elsewhere.URL)
	const remote = "https://mcp.example/mcp"
	ctx := context.Background()
	tests := []struct {
		name   string
		server string // the MCP server the client is for
		allow  []netip.Prefix
		run    func(hc *http.Client) error
		want   string // "" when it works
	}{
		{"metadata over plain http", remote, nil, func(hc *http.Client) error {
			_, err := DiscoverResource(ctx, hc, remote, "http://mcp.example/.well-known/oauth-protected-resource")
			return err
		}, "is not https: refusing to fetch it"},
		{"metadata on loopback", remote, nil, func(hc *http.Client) error {
			_, err := DiscoverResource(ctx, hc, remote, as.URL+"/.well-known/oauth-protected-resource")
			return err
		}, "127.0.0.1 is a loopback address: refusing to connect"},
		{"an authorization server named localhost", remote, nil, func(hc *http.Client) error {
			_, err := DiscoverServer(ctx, hc, "http://localhost:"+port)
			return err
		}, "is a loopback address: refusing to connect"},
		{"an authorization server at the cloud metadata address", remote, nil, func(hc *http.Client) error {
			_, err := DiscoverServer(ctx, hc, "https://169.254.169.254")
			return err
		}, "169.254.169.254 is a link-local address: refusing to connect"},
		{"an authorization server on a private network", remote, nil, func(hc *http.Client) error {
			_, err := DiscoverServer(ctx, hc, "https://10.0.0.7/tenant")
			return err
		}, "10.0.0.7 is a private address: refusing to connect"},
		{"a token endpoint on a private network", "http://127.0.0.1:" + port + "/mcp", nil, func(hc *http.Client) error {
			_, err := Refresh(ctx, hc, &Discovery{Server: ServerMetadata{Issuer: as.URL, TokenEndpoint: "https://192.168.0.1/token"}},
				&ClientInfo{ID: "c", AuthMethod: AuthNone}, &Grant{RefreshToken: "r"})
			return err
		}, "192.168.0.1 is a private address: refusing to connect"},
		{"a registration endpoint on link-local", remote, nil, func(hc *http.Client) error {
			_, err := Register(ctx, hc, &ServerMetadata{Issuer: "https://as.example", RegistrationEndpoint: "https://[fe80::1]/register"}, ClientConfig{}, "http://127.0.0.1:1/callback")
			return err
		}, "fe80::1 is a link-local address: refusing to connect"},
		{"metadata that redirects to another origin", "http://127.0.0.1:" + port + "/mcp", nil, func(hc *http.Client) error {
			_, err := DiscoverServer(ctx, hc, hop.URL)
			return err
		}, "another origin: refusing to follow it"},
		{"a local server's own authorization server", "http://127.0.0.1:" + port + "/mcp", nil, func(hc *http.Client) error {
			_, err := DiscoverServer(ctx, hc, as.URL)
			return err
		}, ""},
		{"an address config allows", remote, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, func(hc *http.Client) error {
			_, err := DiscoverServer(ctx, hc, as.URL)
			return err
		}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run(HTTPClient(tc.server, tc.allow, 10*time.Second))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got %v, want it reached", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a refusal with %q", err, tc.want)
			}
		})
	}
	if got := elsewhere.requests(); len(got) != 0 {
		t.Errorf("the redirect's target got %q", got)
	}
}
