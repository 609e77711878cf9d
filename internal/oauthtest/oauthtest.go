// Package oauthtest is an OAuth 2.1 authorization server and a bearer-token guard
// for tests, on 127.0.0.1: metadata (RFC 8414), Dynamic Client Registration, an
// authorization endpoint that approves at once with a redirect, and a token
// endpoint with PKCE, refresh tokens (rotated) and revocation. Tests drive the
// authorization URL with an http.Client instead of a browser.
package oauthtest

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// AS is the authorization server.
type AS struct {
	URL string // the issuer
	srv *httptest.Server

	mu       sync.Mutex
	ttl      time.Duration
	clients  map[string]client
	codes    map[string]grant
	access   map[string]grant
	refresh  map[string]grant
	requests []string // the paths asked, for tests that count
	issued   []string // every token, code and client secret handed out
}

type client struct {
	secret, method string
	redirects      []string
}

type grant struct {
	client, scope, resource, redirect, challenge string
	expires                                      time.Time
}

// NewAS starts an authorization server whose access tokens last ttl.
func NewAS(ttl time.Duration) *AS {
	a := &AS{ttl: ttl, clients: map[string]client{}, codes: map[string]grant{}, access: map[string]grant{}, refresh: map[string]grant{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", a.metadata)
	mux.HandleFunc("POST /register", a.register)
	mux.HandleFunc("GET /authorize", a.authorize)
	mux.HandleFunc("POST /token", a.token)
	a.srv = httptest.NewServer(mux)
	a.URL = a.srv.URL
	return a
}

// Close stops the server.
func (a *AS) Close() { a.srv.Close() }

// SetTTL changes how long access tokens issued from now on last.
func (a *AS) SetTTL(d time.Duration) {
	a.mu.Lock()
	a.ttl = d
	a.mu.Unlock()
}

// ExpireAccess ends every access token issued so far.
func (a *AS) ExpireAccess() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, g := range a.access {
		g.expires = time.Now().Add(-time.Second)
		a.access[k] = g
	}
}

// RevokeRefresh ends every refresh token issued so far.
func (a *AS) RevokeRefresh() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.refresh)
}

// Refreshes counts the refresh_token grants answered with a token.
func (a *AS) Refreshes() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, r := range a.requests {
		if r == "refresh" {
			n++
		}
	}
	return n
}

// Issued is every credential the server handed out: access and refresh tokens,
// codes and client secrets, for tests that look for them where they must not be.
func (a *AS) Issued() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.issued)
}

// Check reports the scope of a valid access token for resource.
func (a *AS) Check(token, resource string) (scope string, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	g, ok := a.access[token]
	if !ok || time.Now().After(g.expires) || g.resource != resource {
		return "", false
	}
	return g.scope, true
}

func (a *AS) metadata(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                         a.URL,
		"authorization_endpoint":                         a.URL + "/authorize",
		"token_endpoint":                                 a.URL + "/token",
		"registration_endpoint":                          a.URL + "/register",
		"scopes_supported":                               []string{"mcp", "admin", "offline_access"},
		"response_types_supported":                       []string{"code"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
		"token_endpoint_auth_methods_supported":          []string{"client_secret_basic", "client_secret_post", "none"},
		"code_challenge_methods_supported":               []string{"S256"},
		"authorization_response_iss_parameter_supported": true,
	})
}

func (a *AS) register(w http.ResponseWriter, r *http.Request) {
	var req struct {
		RedirectURIs []string `json:"redirect_uris"`
		Method       string   `json:"token_endpoint_auth_method"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.RedirectURIs) == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_client_metadata"})
		return
	}
	c := client{method: req.Method, redirects: req.RedirectURIs}
	if c.method == "" {
		c.method = "client_secret_basic"
	}
	if c.method != "none" {
		c.secret = "cs_" + random()
	}
	a.mu.Lock()
	if c.secret != "" {
		a.issued = append(a.issued, c.secret)
	}
	a.mu.Unlock()
	id := "client_" + random()
	a.mu.Lock()
	a.clients[id] = c
	a.mu.Unlock()
	out := map[string]any{"client_id": id, "redirect_uris": c.redirects, "token_endpoint_auth_method": c.method}
	if c.secret != "" {
		out["client_secret"] = c.secret
	}
	writeJSON(w, http.StatusCreated, out)
}

// authorize approves at once: the redirect carries the code, the state and iss.
func (a *AS) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a.mu.Lock()
	c, ok := a.clients[q.Get("client_id")]
	a.mu.Unlock()
	redirect := q.Get("redirect_uri")
	if !ok || !slices.Contains(c.redirects, redirect) {
		http.Error(w, "unknown client or redirect_uri", http.StatusBadRequest)
		return
	}
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("resource") == "" || q.Get("response_type") != "code" {
		http.Error(w, "needs PKCE S256, a resource and response_type code", http.StatusBadRequest)
		return
	}
	code := "code_" + random()
	a.mu.Lock()
	a.issued = append(a.issued, code)
	a.codes[code] = grant{client: q.Get("client_id"), scope: q.Get("scope"), resource: q.Get("resource"), redirect: redirect, challenge: q.Get("code_challenge")}
	a.mu.Unlock()
	u, _ := url.Parse(redirect)
	back := u.Query()
	back.Set("code", code)
	back.Set("state", q.Get("state"))
	back.Set("iss", a.URL)
	u.RawQuery = back.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

func (a *AS) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
		return
	}
	id, secret, basic := r.BasicAuth()
	if basic {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.clients[id]
	if !ok || c.secret != secret || (c.method == "client_secret_basic") != basic {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	var g grant
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		code := r.PostForm.Get("code")
		g, ok = a.codes[code]
		delete(a.codes, code)
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if !ok || g.client != id || g.redirect != r.PostForm.Get("redirect_uri") || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
			return
		}
	case "refresh_token":
		rt := r.PostForm.Get("refresh_token")
		g, ok = a.refresh[rt]
		delete(a.refresh, rt) // rotated
		if !ok || g.client != id {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant", "error_description": "the refresh token is revoked"})
			return
		}
		a.requests = append(a.requests, "refresh")
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	if res := r.PostForm.Get("resource"); res != g.resource {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_target"})
		return
	}
	at, rt := "at_"+random(), "rt_"+random()
	g.expires = time.Now().Add(a.ttl)
	a.access[at], a.refresh[rt] = g, g
	a.issued = append(a.issued, at, rt)
	writeJSON(w, http.StatusOK, map[string]any{"access_token": at, "token_type": "Bearer", "expires_in": int(a.ttl.Seconds()),
		"refresh_token": rt, "scope": g.scope})
}

// Guard is a bearer-token check in front of an MCP endpoint, with the protected
// resource metadata (RFC 9728) it points to.
type Guard struct {
	AS       *AS
	Resource string // the MCP endpoint's URL: the resource tokens must be for
	// Scope is what every request needs; Step names tools that need more:
	// a call without it gets 403 insufficient_scope.
	Scope string
	Step  map[string]string
	Next  http.Handler
}

// ServeHTTP implements http.Handler.
func (g *Guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u, _ := url.Parse(g.Resource)
	prm := u.Scheme + "://" + u.Host + "/.well-known/oauth-protected-resource" + u.Path
	if r.URL.Path == "/.well-known/oauth-protected-resource"+u.Path {
		writeJSON(w, http.StatusOK, map[string]any{"resource": g.Resource, "authorization_servers": []string{g.AS.URL}, "scopes_supported": []string{g.Scope}})
		return
	}
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	scope, ok := g.AS.Check(tok, g.Resource)
	if !ok {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer resource_metadata=%q, scope=%q`, prm, g.Scope))
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if need := g.stepFor(r); need != "" && !slices.Contains(strings.Fields(scope), need) {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope=%q, resource_metadata=%q`, g.Scope+" "+need, prm))
		http.Error(w, "insufficient scope", http.StatusForbidden)
		return
	}
	g.Next.ServeHTTP(w, r)
}

// stepFor is the extra scope the tool a request calls needs, if any. It reads
// the body and leaves it for the next handler.
func (g *Guard) stepFor(r *http.Request) string {
	if len(g.Step) == 0 || r.Method != http.MethodPost {
		return ""
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return ""
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != "tools/call" {
		return ""
	}
	return g.Step[msg.Params.Name]
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func random() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
