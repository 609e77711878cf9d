package oauth

import (
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/nexus-mcp/nexus/internal/egress"
)

// HTTPClient is the client for the OAuth requests of the MCP server at
// serverURL: its metadata, registration and token requests. The URLs they go to
// come from the server and its metadata, so a hostile server could point them at
// this machine or its network (a cloud metadata service, an admin page); the
// client connects to such an address only when the server itself is there, or
// allow holds it. The server itself is there when a URL's host is the server's
// own (a name config wrote, whatever it resolves to), or an address its URL
// writes (an IP address, and every loopback address for localhost): another name
// is not compared with the server's by resolving both, since whoever answers for
// a name could answer with any address.
func HTTPClient(serverURL string, allow []netip.Prefix, timeout time.Duration) *http.Client {
	g := egress.Guard{Allow: append(ownAddresses(serverURL), allow...)}
	if u, err := url.Parse(serverURL); err == nil && u.Hostname() != "" {
		g.Hosts = []string{u.Hostname()}
	}
	return g.Client(timeout)
}

// ownAddresses are the inward addresses where the server at serverURL is, as its
// URL writes them.
func ownAddresses(serverURL string) []netip.Prefix {
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	}
	a, err := netip.ParseAddr(host)
	if err != nil || egress.Inward(a) == "" {
		return nil
	}
	a = a.Unmap().WithZone("")
	return []netip.Prefix{netip.PrefixFrom(a, a.BitLen())}
}
