package oauth

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/nexus-mcp/nexus/internal/egress"
)

// Transport authorizes the requests of one MCP server with its Session: it adds
// the bearer token, and on a 401 sends the request once more with a fresh (or
// refreshed) token. When only a person can help, the request fails with a
// *LoginError instead of the 401 or 403, so the caller can say what to run.
type Transport struct {
	Base    http.RoundTripper // nil: http.DefaultTransport
	Session *Session
}

// RoundTrip implements http.RoundTripper. A request to another origin than the
// session's server is refused: a client that follows a redirect calls RoundTrip
// for each hop, and the token must not go with it.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if err := t.sameOrigin(req.URL); err != nil {
		closeBody(req)
		return nil, err
	}
	tok, err := t.Session.Token(ctx)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	resp, err := t.send(req, tok, false)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusUnauthorized {
		ch, _ := Bearer(resp.Header)
		next, err := t.Session.Unauthorized(ctx, ch, tok)
		if errors.Is(err, errNotOAuth) {
			return resp, nil
		}
		discard(resp)
		if err != nil {
			closeBody(req)
			return nil, err
		}
		if resp, err = t.send(req, next, true); err != nil {
			return nil, err
		}
		if resp.StatusCode == http.StatusUnauthorized {
			discard(resp)
			return nil, &LoginError{Server: t.Session.Server, Reason: "the server refused a fresh token"}
		}
		tok = next
	}
	if resp.StatusCode == http.StatusForbidden {
		if ch, ok := Bearer(resp.Header); ok && ch.Error() == "insufficient_scope" {
			discard(resp)
			return t.stepUp(req, ch, tok)
		}
	}
	return resp, nil
}

// sameOrigin refuses u when it is not at the origin of the session's server.
func (t *Transport) sameOrigin(u *url.URL) error {
	su, err := url.Parse(t.Session.URL)
	if err != nil {
		return fmt.Errorf("the URL of %s: %w", t.Session.Server, err)
	}
	if !egress.Same(su, u) {
		return fmt.Errorf("%s: a request to %s is not at the origin of %s: refusing to send its token there", t.Session.Server, u.Redacted(), su.Redacted())
	}
	return nil
}

// stepUp handles a 403 insufficient_scope: the request goes once more with a
// newer stored token, if there is one; otherwise it fails with a *LoginError.
func (t *Transport) stepUp(req *http.Request, ch Challenge, sent string) (*http.Response, error) {
	next, err := t.Session.InsufficientScope(req.Context(), ch.Scope(), sent)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	resp, err := t.send(req, next, true)
	if err != nil {
		return nil, err
	}
	if ch, ok := Bearer(resp.Header); ok && resp.StatusCode == http.StatusForbidden && ch.Error() == "insufficient_scope" {
		discard(resp)
		_, err := t.Session.InsufficientScope(req.Context(), ch.Scope(), next)
		return nil, err
	}
	return resp, nil
}

// send sends a copy of req with token (none when ""); again resends its body.
func (t *Transport) send(req *http.Request, token string, again bool) (*http.Response, error) {
	r := req.Clone(req.Context())
	if again && req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return nil, fmt.Errorf("%s: the request cannot be sent again with a fresh token", req.URL.Redacted())
		}
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = body
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

// discard reads a little of a response's body, so the connection may be reused,
// and closes it.
func discard(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// closeBody closes a request's body, as a RoundTripper must even when it fails.
func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
