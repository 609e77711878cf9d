package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Follow is a UserAgent without a person: it GETs the authorization URL and
// follows the server's redirects until one goes to Redirect, which it returns
// without visiting. It suits an authorization server that approves without asking
// (test servers, the conformance suite's), never a real login.
type Follow struct {
	HTTP     *http.Client // nil: http.DefaultClient's transport
	Redirect string       // the redirect URI to register and stop at
}

// RedirectURI returns f.Redirect.
func (f *Follow) RedirectURI(context.Context, string) (string, error) { return f.Redirect, nil }

// Visit follows authURL's redirects up to f.Redirect.
func (f *Follow) Visit(ctx context.Context, authURL string) (*url.URL, error) {
	hc := http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if f.HTTP != nil {
		hc.Transport = f.HTTP.Transport
	}
	next := authURL
	for range 10 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, next, nil)
		if err != nil {
			return nil, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		discard(resp)
		loc, err := resp.Location()
		if err != nil {
			return nil, fmt.Errorf("the authorization server answered %s without redirecting back", resp.Status)
		}
		if strings.HasPrefix(loc.String(), f.Redirect) {
			return loc, nil
		}
		next = loc.String()
	}
	return nil, errors.New("the authorization server redirected more than 10 times")
}
