package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/nexus-mcp/nexus/secrets"
)

// UserAgent takes a person to the authorization server and brings back where it
// redirected them: a browser with a loopback listener ([Loopback]), or, in tests,
// an http.Client.
type UserAgent interface {
	// RedirectURI readies the redirect and returns its URI; prefer is the one a
	// client was registered with ("" for none), to be used when it can be.
	RedirectURI(ctx context.Context, prefer string) (string, error)
	// Visit sends the person to authURL and returns the URL the authorization
	// server redirected back to.
	Visit(ctx context.Context, authURL string) (*url.URL, error)
}

// Login runs an authorization code grant for the session's server through ua,
// stores the grant, and keeps it for the session's next requests. The scopes asked
// for are config's, else the server's challenge or metadata's, plus any a
// step-up recorded and those the last grant had.
func (s *Session) Login(ctx context.Context, ua UserAgent) (*Grant, error) {
	s.mu.Lock()
	ch := s.challenge
	s.mu.Unlock()
	if ch.Scheme == "" {
		var err error
		if ch, err = s.probe(ctx); err != nil {
			return nil, err
		}
	}
	d, err := Discover(ctx, s.HTTP, s.URL, ch, s.Required)
	if err != nil {
		return nil, fmt.Errorf("discovering the authorization of %s: %w", s.Server, err)
	}
	issuer := d.Server.Issuer
	scopes := strings.Join(d.Scopes, " ")
	if len(s.Client.Scopes) > 0 {
		scopes = strings.Join(s.Client.Scopes, " ")
	}
	if old, err := s.Vault.Grant(ctx, s.Server, issuer); err == nil {
		scopes = unionScopes(scopes, old.Scope, old.Wanted)
	}
	client, err := s.loginClient(ctx, d, ua)
	if err != nil {
		return nil, err
	}
	a, err := Begin(d, client, strings.Fields(scopes))
	if err != nil {
		return nil, err
	}
	back, err := ua.Visit(ctx, a.URL)
	if err != nil {
		return nil, err
	}
	g, err := a.Finish(ctx, s.HTTP, back)
	var te *TokenError
	if errors.As(err, &te) && te.Code == "invalid_client" && client.Registered {
		_ = s.Vault.DeleteClient(ctx, issuer) // the next login registers afresh
	}
	if err != nil {
		return nil, err
	}
	if err := s.Vault.SaveGrant(ctx, s.Server, g); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.disc, s.grant, s.readAt = d, g, time.Now()
	s.mu.Unlock()
	return g, nil
}

// loginClient is the client to log in as, and readies ua's redirect for it: a
// registered client is used again when its redirect URI can be served, and
// registered anew otherwise.
func (s *Session) loginClient(ctx context.Context, d *Discovery, ua UserAgent) (*ClientInfo, error) {
	if s.Client.ClientID != "" || (s.Client.MetadataURL != "" && d.Server.ClientIDMetadataDocumentSupported) {
		redirect, err := ua.RedirectURI(ctx, "")
		if err != nil {
			return nil, err
		}
		return Register(ctx, s.HTTP, &d.Server, s.Client, redirect)
	}
	stored, err := s.Vault.Client(ctx, d.Server.Issuer)
	if err != nil && !errors.Is(err, secrets.ErrNotFound) {
		return nil, err
	}
	prefer := ""
	if stored != nil {
		prefer = stored.RedirectURI
	}
	redirect, err := ua.RedirectURI(ctx, prefer)
	if err != nil {
		return nil, err
	}
	if stored != nil && stored.RedirectURI == redirect {
		return stored, nil
	}
	c, err := Register(ctx, s.HTTP, &d.Server, s.Client, redirect)
	if err != nil {
		return nil, err
	}
	if err := s.Vault.SaveClient(ctx, d.Server.Issuer, c); err != nil {
		return nil, err
	}
	return c, nil
}

// probe sends the server an unauthenticated initialize and returns the Bearer
// challenge of its 401 (a zero Challenge when it answered otherwise: discovery
// then uses the well-known URIs).
func (s *Session) probe(ctx context.Context) (Challenge, error) {
	_, ch, err := challengeOf(ctx, s.HTTP, s.URL)
	if err != nil {
		return Challenge{}, fmt.Errorf("reaching %s: %w", s.Server, err)
	}
	return ch, nil
}

// Probe reports whether the server at serverURL answers an unauthenticated
// request with a 401 and publishes OAuth metadata: `nexus add` then offers a
// login. It returns the discovery, or nil when the server needs none (or says
// nothing of how to get one).
func Probe(ctx context.Context, hc *http.Client, serverURL string) (*Discovery, error) {
	status, ch, err := challengeOf(ctx, hc, serverURL)
	if err != nil || status != http.StatusUnauthorized {
		return nil, err
	}
	d, err := Discover(ctx, hc, serverURL, ch, false)
	if err != nil || d.Assumed {
		return nil, err // no metadata: nothing says a login would help
	}
	return d, nil
}

// challengeOf sends serverURL an unauthenticated initialize and returns the
// status and the Bearer challenge of the answer.
func challengeOf(ctx context.Context, hc *http.Client, serverURL string) (int, Challenge, error) {
	body := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"nexus","version":"probe"}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, serverURL, strings.NewReader(body))
	if err != nil {
		return 0, Challenge{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, Challenge{}, err
	}
	discard(resp)
	ch, _ := Bearer(resp.Header)
	return resp.StatusCode, ch, nil
}
