// Package egress keeps Nexus's outbound HTTP requests where they were meant to
// go. A redirect never takes a request (and the credentials it carries) to
// another origin or from https to plain http, and a client that follows URLs a
// remote server hands it (OAuth discovery) never dials this machine or the
// networks around it: the address is checked as the socket connects, after DNS,
// so a name that resolves to one address when checked and another when dialed
// gains nothing.
package egress

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// MaxRedirects is how many redirects a request may follow.
const MaxRedirects = 5

// RedirectError is a redirect a client refused to follow.
type RedirectError struct {
	From, To *url.URL
	Reason   string
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("%s redirected to %s: %s", e.From.Redacted(), e.To.Redacted(), e.Reason)
}

// SameOrigin is an http.Client CheckRedirect: it follows a redirect only within
// the origin (scheme, host and port) of the first request, at most MaxRedirects
// times. Go's own policy resends headers to a subdomain, from https to http, and
// never drops headers a RoundTripper adds on every hop (a bearer token): a
// redirect that leaves the origin must end the request instead.
func SameOrigin(req *http.Request, via []*http.Request) error {
	if len(via) == 0 {
		return nil
	}
	from := via[len(via)-1].URL
	if len(via) >= MaxRedirects {
		return &RedirectError{From: from, To: req.URL, Reason: fmt.Sprintf("more than %d redirects: refusing to follow", MaxRedirects)}
	}
	if first := via[0].URL; !Same(first, req.URL) {
		reason := "another origin: refusing to follow it with the request's credentials"
		if strings.EqualFold(first.Scheme, "https") && !strings.EqualFold(req.URL.Scheme, "https") {
			reason = "plain http: refusing to follow it with the request's credentials"
		}
		return &RedirectError{From: from, To: req.URL, Reason: reason}
	}
	return nil
}

// NoRedirects is an http.Client CheckRedirect that follows none: for requests
// whose body is a credential (a token request, a registration), which must reach
// the endpoint named and nowhere else.
func NoRedirects(req *http.Request, via []*http.Request) error {
	return &RedirectError{From: via[len(via)-1].URL, To: req.URL, Reason: "refusing to send the request's credentials anywhere but the endpoint named"}
}

// Same reports whether a and b have one origin: scheme, host and port (the
// scheme's default port when none is written), compared as RFC 6454 says.
func Same(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
}

// WithRedirects returns a copy of hc (nil: a zero client) that follows redirects
// as check says: a caller's client keeps its transport and timeout.
func WithRedirects(hc *http.Client, check func(*http.Request, []*http.Request) error) *http.Client {
	c := &http.Client{}
	if hc != nil {
		*c = *hc
	}
	c.CheckRedirect = check
	return c
}
