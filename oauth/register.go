package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/nexus-mcp/nexus/internal/egress"
)

// The token endpoint authentication methods Nexus speaks.
const (
	AuthNone     = "none"
	AuthBasic    = "client_secret_basic"
	AuthPost     = "client_secret_post"
	softwareName = "Nexus MCP gateway"
)

// ClientConfig is what config says of the client at a server's authorization
// server: all optional.
type ClientConfig struct {
	ClientID     string // pre-registered client id
	ClientSecret string // its secret, resolved from the secrets store
	AuthMethod   string // "", or one of the Auth* methods
	// MetadataURL is an https URL serving this client's Client ID Metadata
	// Document; it is the client_id at servers that support such documents.
	MetadataURL string
	Scopes      []string // asked for instead of what the server suggests
}

// Register picks the client for an authorization code grant at the server of md
// with redirectURI, in the order the specification prefers: pre-registered
// credentials (cfg.ClientID), a Client ID Metadata Document (cfg.MetadataURL, when
// the server supports them), then Dynamic Client Registration (RFC 7591) as a
// native application.
func Register(ctx context.Context, hc *http.Client, md *ServerMetadata, cfg ClientConfig, redirectURI string) (*ClientInfo, error) {
	switch {
	case cfg.ClientID != "":
		method := cfg.AuthMethod
		if method == "" {
			method = pickAuthMethod(md, cfg.ClientSecret != "")
		}
		return &ClientInfo{ID: cfg.ClientID, Secret: cfg.ClientSecret, AuthMethod: method, RedirectURI: redirectURI}, nil
	case cfg.MetadataURL != "" && md.ClientIDMetadataDocumentSupported:
		return &ClientInfo{ID: cfg.MetadataURL, AuthMethod: AuthNone, RedirectURI: redirectURI}, nil
	case md.RegistrationEndpoint != "":
		return registerDynamic(ctx, hc, md, redirectURI)
	}
	return nil, fmt.Errorf("the authorization server %s supports no registration Nexus can use: set servers.NAME.oauth.clientId (and a clientSecret reference) to a client registered there", md.Issuer)
}

// pickAuthMethod chooses how a client authenticates at the token endpoint: none
// for a public client; for one with a secret, basic when the server lists it or
// lists nothing (RFC 8414's default), else post.
func pickAuthMethod(md *ServerMetadata, secret bool) string {
	if !secret {
		return AuthNone
	}
	if len(md.TokenEndpointAuthMethodsSupported) == 0 || slices.Contains(md.TokenEndpointAuthMethodsSupported, AuthBasic) {
		return AuthBasic
	}
	return AuthPost
}

// registerDynamic registers a native client with the loopback redirectURI. It
// asks to be a public client when the server allows one, else for the method the
// server lists first among those Nexus speaks.
func registerDynamic(ctx context.Context, hc *http.Client, md *ServerMetadata, redirectURI string) (*ClientInfo, error) {
	method := AuthNone
	if ms := md.TokenEndpointAuthMethodsSupported; len(ms) > 0 && !slices.Contains(ms, AuthNone) {
		method = AuthBasic
		for _, m := range ms {
			if m == AuthBasic || m == AuthPost {
				method = m
				break
			}
		}
	}
	body := map[string]any{
		"client_name":                softwareName,
		"redirect_uris":              []string{redirectURI},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": method,
		"application_type":           "native",
	}
	raw, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, md.RegistrationEndpoint, bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("registering at %s: %w", md.Issuer, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := egress.WithRedirects(hc, egress.NoRedirects).Do(req)
	if err != nil {
		return nil, fmt.Errorf("registering at %s: %w", md.Issuer, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes))
	if err != nil {
		return nil, fmt.Errorf("registering at %s: %w", md.Issuer, err)
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("registering at %s: %s%s", md.Issuer, resp.Status, oauthErrorText(data))
	}
	var c struct {
		ClientInfo
		RedirectURIs []string `json:"redirect_uris"`
	}
	if err := json.Unmarshal(data, &c); err != nil || c.ID == "" {
		return nil, fmt.Errorf("registering at %s: the answer has no client_id", md.Issuer)
	}
	info := c.ClientInfo
	if info.AuthMethod == "" {
		info.AuthMethod = method
		if info.Secret == "" {
			info.AuthMethod = AuthNone
		}
	}
	info.RedirectURI, info.Registered = redirectURI, true
	return &info, nil
}

// oauthErrorText is ": code: description" of an OAuth error body, or "".
func oauthErrorText(body []byte) string {
	var e struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		return ""
	}
	s := ": " + e.Error
	if e.Description != "" {
		s += ": " + strings.TrimSpace(e.Description)
	}
	return s
}
