package egress

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Inward says why a is not an address on the public internet ("loopback",
// "private", "link-local", ...), or "" when it is one. An IPv4 address written
// as IPv6 (::ffff:a.b.c.d, or NAT64's 64:ff9b::a.b.c.d) is judged as the IPv4
// address it names.
func Inward(a netip.Addr) string {
	a = a.Unmap()
	if nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte(b[12:]))
	}
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return "link-local"
	case a.IsPrivate():
		return "private"
	case a.IsMulticast(), a.IsInterfaceLocalMulticast():
		return "multicast"
	case sharedSpace.Contains(a):
		return "shared (carrier-grade NAT)"
	case thisNetwork.Contains(a), a == broadcast:
		return "reserved"
	}
	return ""
}

var (
	nat64       = netip.MustParsePrefix("64:ff9b::/96")
	sharedSpace = netip.MustParsePrefix("100.64.0.0/10") // RFC 6598; cloud metadata lives here too
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	broadcast   = netip.MustParseAddr("255.255.255.255")
)

// AddressError is a dial refused because of where it would go.
type AddressError struct {
	Addr netip.Addr
	Kind string // what Inward said
}

func (e *AddressError) Error() string {
	return fmt.Sprintf("%s is a %s address: refusing to connect (a remote server may not point Nexus at this machine or its network)", e.Addr, e.Kind)
}

// Guard decides which addresses a client may connect to: every public address,
// and of the others only those Allow holds, or those of a host Hosts names.
type Guard struct {
	Allow []netip.Prefix
	// Hosts are host names (or addresses) as URLs write them whose connections
	// are not checked: a server's own, which the person who configured it named.
	Hosts []string
}

// trusted reports whether host is one of g.Hosts.
func (g Guard) trusted(host string) bool {
	return slices.ContainsFunc(g.Hosts, func(h string) bool { return strings.EqualFold(h, host) })
}

// Check returns an *AddressError when a is inward and not allowed.
func (g Guard) Check(a netip.Addr) error {
	kind := Inward(a)
	if kind == "" || slices.ContainsFunc(g.Allow, func(p netip.Prefix) bool { return p.Contains(a.Unmap()) || p.Contains(a) }) {
		return nil
	}
	return &AddressError{Addr: a.Unmap(), Kind: kind}
}

// control is a net.Dialer Control: it runs once the name is resolved, before the
// socket connects, with the address about to be connected to.
func (g Guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("the address %q: %w", address, err)
	}
	return g.Check(ap.Addr())
}

// Client is an HTTP client that connects only where g allows, follows redirects
// only within an origin (SameOrigin), and gives up after timeout.
//
// Through a proxy from the environment (HTTPS_PROXY), the proxy resolves names:
// the proxy itself may be on any address, and a URL whose host is written as an
// inward address (or is localhost) is refused before it is sent there.
func (g Guard) Client(timeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: g.control}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	proxies := proxyAddrs()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(addr)
		if slices.Contains(proxies, addr) || g.trusted(host) {
			var plain net.Dialer
			return plain.DialContext(ctx, network, addr)
		}
		return d.DialContext(ctx, network, addr)
	}
	tr.Proxy = func(req *http.Request) (*url.URL, error) {
		p, err := http.ProxyFromEnvironment(req)
		if p == nil || err != nil {
			return p, err
		}
		host := req.URL.Hostname()
		if g.trusted(host) {
			return p, nil
		}
		if strings.EqualFold(host, "localhost") {
			host = "127.0.0.1"
		}
		if a, err := netip.ParseAddr(host); err == nil {
			if err := g.Check(a); err != nil {
				return nil, err
			}
		}
		return p, nil
	}
	return &http.Client{Transport: tr, Timeout: timeout, CheckRedirect: SameOrigin}
}

// proxyAddrs are the host:port of the proxies the environment names.
func proxyAddrs() []string {
	var out []string
	for _, name := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"} {
		v := os.Getenv(name)
		if v == "" {
			continue
		}
		if !strings.Contains(v, "://") {
			v = "http://" + v
		}
		u, err := url.Parse(v)
		if err != nil || u.Hostname() == "" {
			continue
		}
		out = append(out, net.JoinHostPort(u.Hostname(), port(u)))
	}
	return out
}
