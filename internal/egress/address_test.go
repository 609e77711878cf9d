package egress

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestInward(t *testing.T) {
	tests := []struct {
		addr, want string
	}{
		{"127.0.0.1", "loopback"},
		{"127.9.9.9", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"64:ff9b::7f00:1", "loopback"},
		{"10.1.2.3", "private"},
		{"172.16.0.1", "private"},
		{"192.168.1.1", "private"},
		{"fd00::1", "private"},
		{"169.254.169.254", "link-local"},
		{"fe80::1", "link-local"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"100.100.100.200", "shared (carrier-grade NAT)"},
		{"0.1.2.3", "reserved"},
		{"224.0.0.1", "link-local"},
		{"239.1.1.1", "multicast"},
		{"8.8.8.8", ""},
		{"2606:4700::1111", ""},
		{"172.32.0.1", ""},
	}
	for _, tc := range tests {
		if got := Inward(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("Inward(%s) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

// TestGuardDials: the guard's client refuses inward addresses as it connects,
// names included (localhost resolves to one), and reaches one that is allowed
// and the host it is told is the server's own.
func TestGuardDials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	tests := []struct {
		name  string
		allow []netip.Prefix
		url   string
		want  string // "" when it connects
	}{
		{"loopback", nil, srv.URL, "127.0.0.1 is a loopback address: refusing to connect"},
		{"a name for loopback", nil, "http://localhost:" + port, "is a loopback address: refusing to connect"},
		{"a mapped address", nil, "http://[::ffff:127.0.0.1]:" + port, "127.0.0.1 is a loopback address"},
		{"link-local", nil, "http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"},
		{"private", nil, "http://10.0.0.1/", "10.0.0.1 is a private address"},
		{"allowed", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, srv.URL, ""},
		{"the server's own host", nil, "http://LocalHost:" + port, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, tc.url, nil)
			g := Guard{Allow: tc.allow}
			if tc.name == "the server's own host" {
				g.Hosts = []string{"localhost"}
			}
			resp, err := g.Client(10 * time.Second).Do(req)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("an allowed address: %v", err)
				}
				resp.Body.Close()
				return
			}
			var ae *AddressError
			if err == nil || !errors.As(err, &ae) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a refusal with %q", err, tc.want)
			}
		})
	}
}
