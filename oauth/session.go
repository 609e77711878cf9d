package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nexus-mcp/nexus/secrets"
)

// refreshMargin is how long before its expiry an access token is refreshed: a
// request sent with a token that ends in flight would fail for nothing.
const refreshMargin = 60 * time.Second

// rereadEvery is how long a grant read from the store is used before it is read
// again: a logout, or a login in another process, applies within it.
const rereadEvery = 30 * time.Second

// ErrNeedsLogin is what every [LoginError] matches with errors.Is.
var ErrNeedsLogin = errors.New("needs login")

// LoginError says a server can be used only after a person logs in again: no
// token is stored, the refresh token was refused, or the server asks for more
// scope than the token has.
type LoginError struct {
	Server string
	Scope  string // the scope the next login asks for, when a step-up needs more
	Reason string // why, in words; never a credential
}

func (e *LoginError) Error() string { return "needs login: " + e.Hint() }

// Hint is the fix, with the reason: what a status line shows after "needs login".
func (e *LoginError) Hint() string {
	h := "run nexus auth login " + e.Server
	if e.Reason != "" {
		h += " (" + e.Reason + ")"
	}
	return h
}

// Is makes errors.Is(err, ErrNeedsLogin) true.
func (e *LoginError) Is(target error) bool { return target == ErrNeedsLogin }

// errNotOAuth says a 401 came without a way to authorize: the response goes to
// the caller as it is.
var errNotOAuth = errors.New("the server's 401 offers no OAuth authorization")

// Session is one server's authorization while Nexus talks to it. It finds the
// authorization server on the first 401 (or at once when Required), then keeps a
// valid access token: the stored one, refreshed before it expires and when the
// server refuses it. It never asks a person; when only a login can help, it
// reports a *LoginError.
//
// A Session is safe for concurrent use; token work is done under one lock, so
// concurrent requests that find an expired token share one refresh.
type Session struct {
	Server   string       // the server's name in config: secret names and messages
	URL      string       // its MCP endpoint
	Vault    *Vault       // where grants and clients are kept
	Client   ClientConfig // from config
	HTTP     *http.Client // for metadata, registration and token requests
	Required bool         // config says auth "oauth": authorize before the first request

	mu     sync.Mutex
	disc   *Discovery
	grant  *Grant
	readAt time.Time // when grant was read from (or written to) the store
	// challenge is the last Bearer challenge the server sent: a login in this
	// process asks for the scope it named.
	challenge  Challenge
	triedEarly bool // Required's discovery before the first request was made
}

// Token is the access token for the next request: "" while the server has not
// asked for authorization (and config does not require it).
func (s *Session) Token(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.disc == nil {
		// Required discovers before the first request, once; when the
		// well-known URIs say nothing, requests go without a token, and a 401's
		// challenge may name the metadata.
		if !s.Required || s.triedEarly {
			return "", nil
		}
		s.triedEarly = true
		if s.discoverLocked(ctx, Challenge{}) != nil {
			return "", nil
		}
	}
	g, err := s.grantLocked(ctx, false)
	if err != nil {
		return "", err
	}
	if g.expiresWithin(refreshMargin) {
		if g, err = s.refreshLocked(ctx, g); err != nil {
			return "", err
		}
	}
	return g.AccessToken, nil
}

// Unauthorized handles the server's 401 to a request sent with token sent ("" for
// none), and returns the token to send the request again with.
func (s *Session) Unauthorized(ctx context.Context, ch Challenge, sent string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch.Scheme != "" {
		s.challenge = ch
	}
	if s.disc == nil {
		if err := s.discoverLocked(ctx, ch); err != nil {
			if sent == "" && !s.Required {
				return "", fmt.Errorf("%w: %v", errNotOAuth, err)
			}
			return "", err
		}
	}
	// Read the store again: another Nexus process may have refreshed or logged in.
	g, err := s.grantLocked(ctx, true)
	if err != nil {
		return "", err
	}
	if g.AccessToken != sent && !g.expiresWithin(0) {
		return g.AccessToken, nil
	}
	if g, err = s.refreshLocked(ctx, g); err != nil {
		return "", err
	}
	return g.AccessToken, nil
}

// InsufficientScope handles a 403 insufficient_scope to a request sent with
// token sent. When the store holds a newer token (a login since, perhaps in
// another process), it returns that one to send the request again with.
// Otherwise the scope asked for is added to what the next login asks for (kept
// with the grant, so `nexus auth login` knows it) and a *LoginError says so.
func (s *Session) InsufficientScope(ctx context.Context, scope, sent string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.disc != nil {
		if g, err := s.grantLocked(ctx, true); err == nil && g.AccessToken != sent {
			return g.AccessToken, nil
		}
	}
	want := unionScopes(s.currentScopeLocked(), scope)
	if s.grant != nil {
		s.grant.Wanted = want
		if err := s.Vault.SaveGrant(ctx, s.Server, s.grant); err != nil {
			return "", fmt.Errorf("recording the scope %s asks for: %w", s.Server, err)
		}
	}
	return "", &LoginError{Server: s.Server, Scope: want, Reason: "it asks for scope " + strings.Join(strings.Fields(scope), " ")}
}

func (s *Session) currentScopeLocked() string {
	if s.grant == nil {
		return ""
	}
	return unionScopes(s.grant.Scope, s.grant.Wanted)
}

// discoverLocked finds the server's authorization from its challenge.
func (s *Session) discoverLocked(ctx context.Context, ch Challenge) error {
	d, err := Discover(ctx, s.HTTP, s.URL, ch, s.Required)
	if err != nil {
		return fmt.Errorf("discovering the authorization of %s: %w", s.Server, err)
	}
	s.disc = d
	if s.grant != nil && s.grant.Issuer != d.Server.Issuer {
		s.grant = nil // never sent to, or refreshed at, another authorization server
	}
	return nil
}

// grantLocked is the grant from the discovered issuer: the one in memory, or (when
// there is none, or fresh is set) the stored one.
func (s *Session) grantLocked(ctx context.Context, fresh bool) (*Grant, error) {
	if s.grant != nil && !fresh && time.Since(s.readAt) < rereadEvery {
		return s.grant, nil
	}
	g, err := s.Vault.Grant(ctx, s.Server, s.disc.Server.Issuer)
	if errors.Is(err, secrets.ErrNotFound) {
		return nil, &LoginError{Server: s.Server, Reason: "no token from " + s.disc.Server.Issuer + " is stored"}
	}
	if err != nil && s.grant != nil && !fresh {
		return s.grant, nil // a keychain that does not answer now: the grant in hand still serves
	}
	if err != nil {
		return nil, fmt.Errorf("reading the token of %s: %w", s.Server, err)
	}
	s.grant, s.readAt = g, time.Now()
	return g, nil
}

// refreshLocked refreshes g and stores the result. A refusal means a login; a
// network error is only an error (the next request tries again).
func (s *Session) refreshLocked(ctx context.Context, g *Grant) (*Grant, error) {
	client, err := s.clientLocked(ctx)
	if err != nil {
		return nil, err
	}
	ng, err := Refresh(ctx, s.HTTP, s.disc, client, g)
	var te *TokenError
	if errors.As(err, &te) {
		return nil, &LoginError{Server: s.Server, Reason: "the token expired and could not be refreshed: " + te.Code}
	}
	if err != nil {
		return nil, fmt.Errorf("refreshing the token of %s: %w", s.Server, err)
	}
	ng.Wanted = g.Wanted
	if err := s.Vault.SaveGrant(ctx, s.Server, ng); err != nil {
		return nil, err
	}
	s.grant, s.readAt = ng, time.Now()
	return ng, nil
}

// clientLocked is the client the grant was obtained as: the pre-registered or
// metadata-document one from config, else the one registered at the issuer.
func (s *Session) clientLocked(ctx context.Context) (*ClientInfo, error) {
	switch {
	case s.Client.ClientID != "":
		return Register(ctx, s.HTTP, &s.disc.Server, s.Client, "")
	case s.Client.MetadataURL != "" && s.disc.Server.ClientIDMetadataDocumentSupported:
		return &ClientInfo{ID: s.Client.MetadataURL, AuthMethod: AuthNone}, nil
	}
	c, err := s.Vault.Client(ctx, s.disc.Server.Issuer)
	if errors.Is(err, secrets.ErrNotFound) {
		return nil, &LoginError{Server: s.Server, Reason: "no client is registered at " + s.disc.Server.Issuer}
	}
	if err != nil {
		return nil, fmt.Errorf("reading the client of %s: %w", s.Server, err)
	}
	return c, nil
}

// unionScopes joins space-separated scope lists, each scope once, in order.
func unionScopes(lists ...string) string {
	var out []string
	for _, l := range lists {
		for _, sc := range strings.Fields(l) {
			if !slices.Contains(out, sc) {
				out = append(out, sc)
			}
		}
	}
	return strings.Join(out, " ")
}
