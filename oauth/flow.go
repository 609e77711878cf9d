package oauth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/nexus-mcp/nexus/internal/egress"
)

// Authorization is one authorization code grant in progress: the URL a person
// visits, and what checks the redirect that comes back.
type Authorization struct {
	URL string // the authorization request, to open in a browser

	disc     *Discovery
	client   *ClientInfo
	verifier string
	state    string
	scope    string
}

// Begin prepares an authorization request at d's server for client, asking for
// scopes (nil: none named). It refuses a server that does not offer PKCE with
// S256, as the specification requires.
func Begin(d *Discovery, client *ClientInfo, scopes []string) (*Authorization, error) {
	if !slices.Contains(d.Server.CodeChallengeMethodsSupported, "S256") {
		return nil, fmt.Errorf("the authorization server %s does not offer PKCE with S256 (code_challenge_methods_supported): refusing to authorize there", d.Server.Issuer)
	}
	a := &Authorization{disc: d, client: client, verifier: randomString(32), state: randomString(16)}
	a.scope = strings.Join(withOfflineAccess(scopes, d.Server.ScopesSupported), " ")
	u, err := url.Parse(d.Server.AuthorizationEndpoint)
	if err != nil {
		return nil, fmt.Errorf("the authorization endpoint of %s: %w", d.Server.Issuer, err)
	}
	sum := sha256.Sum256([]byte(a.verifier))
	q := u.Query()
	q.Set("response_type", "code")
	q.Set("client_id", client.ID)
	q.Set("redirect_uri", client.RedirectURI)
	q.Set("state", a.state)
	q.Set("code_challenge", base64.RawURLEncoding.EncodeToString(sum[:]))
	q.Set("code_challenge_method", "S256")
	q.Set("resource", d.Resource)
	if a.scope != "" {
		q.Set("scope", a.scope)
	}
	u.RawQuery = q.Encode()
	a.URL = u.String()
	return a, nil
}

// withOfflineAccess adds offline_access to a non-empty scope list when the server
// offers it: a refresh token lets a gateway keep working without a person.
func withOfflineAccess(scopes, supported []string) []string {
	if len(scopes) == 0 || slices.Contains(scopes, "offline_access") || !slices.Contains(supported, "offline_access") {
		return scopes
	}
	return append(slices.Clone(scopes), "offline_access")
}

// Finish checks the redirect the authorization server sent the browser to (its
// state, its iss as RFC 9207 says, an error it reports) and exchanges the code
// for a grant.
func (a *Authorization) Finish(ctx context.Context, hc *http.Client, redirect *url.URL) (*Grant, error) {
	q := redirect.Query()
	if q.Get("state") != a.state {
		return nil, errors.New("the authorization response's state does not match the request: refusing it (another login, or a forged redirect)")
	}
	iss, hasIss := q["iss"]
	switch {
	case hasIss && (len(iss) != 1 || iss[0] != a.disc.Server.Issuer):
		return nil, fmt.Errorf("the authorization response comes from issuer %q, not %q: refusing it (RFC 9207)", q.Get("iss"), a.disc.Server.Issuer)
	case !hasIss && a.disc.Server.IssParameterSupported:
		return nil, fmt.Errorf("the authorization response lacks the iss that %s promises (RFC 9207): refusing it", a.disc.Server.Issuer)
	}
	if e := q.Get("error"); e != "" {
		msg := fmt.Sprintf("the authorization server refused: %s", e)
		if d := q.Get("error_description"); d != "" {
			msg += ": " + d
		}
		return nil, errors.New(msg)
	}
	code := q.Get("code")
	if code == "" {
		return nil, errors.New("the authorization response has no code")
	}
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {a.client.RedirectURI},
		"code_verifier": {a.verifier},
		"resource":      {a.disc.Resource},
	}
	g, err := tokenRequest(ctx, hc, a.disc, a.client, form)
	if err != nil {
		return nil, err
	}
	if g.Scope == "" {
		g.Scope = a.scope
	}
	return g, nil
}

// Refresh exchanges g's refresh token for a new grant. A server that sends no new
// refresh token leaves the old one in use.
func Refresh(ctx context.Context, hc *http.Client, d *Discovery, client *ClientInfo, g *Grant) (*Grant, error) {
	if g.RefreshToken == "" {
		return nil, &TokenError{Code: "invalid_grant", Description: "no refresh token"}
	}
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {g.RefreshToken}, "resource": {d.Resource}}
	ng, err := tokenRequest(ctx, hc, d, client, form)
	if err != nil {
		return nil, err
	}
	if ng.RefreshToken == "" {
		ng.RefreshToken = g.RefreshToken
	}
	if ng.Scope == "" {
		ng.Scope = g.Scope
	}
	return ng, nil
}

// TokenError is an OAuth error answer of a token endpoint (RFC 6749 §5.2).
type TokenError struct {
	Code        string
	Description string
	Status      int
}

func (e *TokenError) Error() string {
	s := "the token endpoint refused: " + e.Code
	if e.Description != "" {
		s += ": " + e.Description
	}
	return s
}

// tokenRequest posts form to the token endpoint, authenticated as client's method
// says, and reads the grant.
func tokenRequest(ctx context.Context, hc *http.Client, d *Discovery, client *ClientInfo, form url.Values) (*Grant, error) {
	switch client.AuthMethod {
	case AuthBasic:
	case AuthPost:
		form.Set("client_id", client.ID)
		form.Set("client_secret", client.Secret)
	default:
		form.Set("client_id", client.ID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.Server.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("the token endpoint of %s: %w", d.Server.Issuer, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if client.AuthMethod == AuthBasic {
		// RFC 6749 §2.3.1: both parts form-encoded before base64.
		req.SetBasicAuth(url.QueryEscape(client.ID), url.QueryEscape(client.Secret))
	}
	// A redirect would take the code, the verifier and the client secret to
	// wherever it points: none is followed.
	resp, err := egress.WithRedirects(hc, egress.NoRedirects).Do(req)
	if err != nil {
		return nil, fmt.Errorf("the token endpoint of %s: %w", d.Server.Issuer, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes))
	if err != nil {
		return nil, fmt.Errorf("the token endpoint of %s: %w", d.Server.Issuer, err)
	}
	var body struct {
		AccessToken  string      `json:"access_token"`
		TokenType    string      `json:"token_type"`
		RefreshToken string      `json:"refresh_token"`
		ExpiresIn    json.Number `json:"expires_in"`
		Scope        string      `json:"scope"`
		Error        string      `json:"error"`
		Description  string      `json:"error_description"`
	}
	_ = json.Unmarshal(data, &body)
	if resp.StatusCode != http.StatusOK || body.Error != "" {
		code := body.Error
		if code == "" {
			code = resp.Status
		}
		return nil, &TokenError{Code: code, Description: body.Description, Status: resp.StatusCode}
	}
	if body.AccessToken == "" {
		return nil, fmt.Errorf("the token endpoint of %s answered without an access_token", d.Server.Issuer)
	}
	if body.TokenType != "" && !strings.EqualFold(body.TokenType, "bearer") {
		return nil, fmt.Errorf("the token endpoint of %s issued a %q token; Nexus sends only bearer tokens", d.Server.Issuer, body.TokenType)
	}
	now := time.Now()
	g := &Grant{AccessToken: body.AccessToken, RefreshToken: body.RefreshToken, Scope: body.Scope,
		Issuer: d.Server.Issuer, Resource: d.Resource, Obtained: now}
	if secs, err := body.ExpiresIn.Int64(); err == nil && secs > 0 {
		g.Expiry = now.Add(time.Duration(secs) * time.Second)
	}
	return g, nil
}

// randomString is n random bytes, base64url: PKCE verifiers and states.
func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}
