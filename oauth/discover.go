package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/nexus-mcp/nexus/internal/egress"
)

// maxMetadataBytes bounds a metadata document or a token response: a hostile
// server must not make the gateway read without end.
const maxMetadataBytes = 1 << 20

// ResourceMetadata is a protected resource's metadata (RFC 9728 §2).
type ResourceMetadata struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
	ScopesSupported      []string `json:"scopes_supported,omitempty"`
}

// ServerMetadata is an authorization server's metadata (RFC 8414 §2).
type ServerMetadata struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	RegistrationEndpoint              string   `json:"registration_endpoint,omitempty"`
	ScopesSupported                   []string `json:"scopes_supported,omitempty"`
	ResponseTypesSupported            []string `json:"response_types_supported,omitempty"`
	GrantTypesSupported               []string `json:"grant_types_supported,omitempty"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported,omitempty"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported,omitempty"`
	// IssParameterSupported is RFC 9207's authorization_response_iss_parameter_supported.
	IssParameterSupported bool `json:"authorization_response_iss_parameter_supported,omitempty"`
	// ClientIDMetadataDocumentSupported says the server accepts an https URL as a
	// client_id (Client ID Metadata Documents).
	ClientIDMetadataDocumentSupported bool `json:"client_id_metadata_document_supported,omitempty"`
}

// ErrNoResourceMetadata says a server publishes no protected resource metadata:
// a server of the 2025-03-26 specification, or one that does not use OAuth.
var ErrNoResourceMetadata = errors.New("no protected resource metadata")

// Discovery is what a server's authorization was found to be.
type Discovery struct {
	// Resource is the resource indicator sent with every authorization and token
	// request (RFC 8707): the metadata's resource, else the server's URL.
	Resource string
	// Scopes are the scopes to ask for: the challenge's, else the resource's
	// scopes_supported; none when neither says.
	Scopes []string
	Server ServerMetadata
	// Assumed says the server published no metadata at all: its endpoints are
	// the 2025-03-26 specification's defaults.
	Assumed bool
}

// Discover finds the authorization of the MCP server at serverURL, starting from
// the Bearer challenge of its 401 (a zero Challenge when there was none). A server
// without resource metadata is looked at as the 2025-03-26 specification says
// (DiscoverLegacy, with defaults when it is set or the challenge is Bearer's).
func Discover(ctx context.Context, hc *http.Client, serverURL string, ch Challenge, defaults bool) (*Discovery, error) {
	rm, err := DiscoverResource(ctx, hc, serverURL, ch.ResourceMetadata())
	if errors.Is(err, ErrNoResourceMetadata) {
		// A Bearer challenge says the server wants OAuth: its default
		// endpoints are worth a try even when config does not say so.
		defaults = defaults || strings.EqualFold(ch.Scheme, "Bearer")
		if d, lerr := DiscoverLegacy(ctx, hc, serverURL, ch, defaults); lerr == nil {
			return d, nil
		}
	}
	if err != nil {
		return nil, err
	}
	d := &Discovery{Resource: rm.Resource}
	if s := ch.Scope(); s != "" {
		d.Scopes = strings.Fields(s)
	} else {
		d.Scopes = rm.ScopesSupported
	}
	if len(rm.AuthorizationServers) == 0 {
		return nil, fmt.Errorf("the protected resource metadata of %s names no authorization server", serverURL)
	}
	// The first listed server is used: the specification leaves the choice to the
	// client, and the first is the one a server lists as its own.
	md, err := DiscoverServer(ctx, hc, rm.AuthorizationServers[0])
	if err != nil {
		return nil, err
	}
	d.Server = *md
	return d, nil
}

// DiscoverLegacy finds the authorization of a server of the 2025-03-26
// specification, which publishes no resource metadata: its authorization server
// is its own origin, whose RFC 8414 metadata is used when there is some. When
// there is none and defaults is set (config says the server uses OAuth), the
// default endpoints /authorize, /token and /register of that origin are assumed,
// as that specification says.
func DiscoverLegacy(ctx context.Context, hc *http.Client, serverURL string, ch Challenge, defaults bool) (*Discovery, error) {
	su, err := url.Parse(serverURL)
	if err != nil {
		return nil, fmt.Errorf("the server URL %q: %w", serverURL, err)
	}
	origin := su.Scheme + "://" + su.Host
	d := &Discovery{Resource: canonicalResource(su), Scopes: strings.Fields(ch.Scope())}
	md, err := DiscoverServer(ctx, hc, origin)
	switch {
	case err == nil:
		d.Server = *md
	case defaults:
		d.Server = ServerMetadata{Issuer: origin, AuthorizationEndpoint: origin + "/authorize", TokenEndpoint: origin + "/token",
			RegistrationEndpoint: origin + "/register", CodeChallengeMethodsSupported: []string{"S256"}}
		d.Assumed = true
		if err := checkEndpoints(&d.Server); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	return d, nil
}

// DiscoverResource fetches the protected resource metadata of serverURL: from
// metadataURL when the challenge named one, else from the well-known URIs of RFC
// 9728 §3.1 (with the server's path, then at the root). The metadata's resource
// must be the server, or a prefix of its URL on a path boundary: a token meant
// for another resource is not asked for.
func DiscoverResource(ctx context.Context, hc *http.Client, serverURL, metadataURL string) (*ResourceMetadata, error) {
	su, err := url.Parse(serverURL)
	if err != nil {
		return nil, fmt.Errorf("the server URL %q: %w", serverURL, err)
	}
	candidates := []string{metadataURL}
	if metadataURL == "" {
		candidates = wellKnown(su, "oauth-protected-resource", false)
	}
	var rm ResourceMetadata
	var errs []error
	for _, c := range candidates {
		err := getJSON(ctx, hc, c, &rm)
		if err == nil {
			break
		}
		errs = append(errs, err)
		if len(errs) == len(candidates) {
			return nil, fmt.Errorf("%w for %s: %w", ErrNoResourceMetadata, serverURL, errors.Join(errs...))
		}
	}
	if rm.Resource == "" {
		rm.Resource = canonicalResource(su)
	}
	if !resourceCovers(rm.Resource, su) {
		return nil, fmt.Errorf("the protected resource metadata of %s is for another resource, %q: refusing to ask for a token for it", serverURL, rm.Resource)
	}
	return &rm, nil
}

// DiscoverServer fetches the metadata of the authorization server issuer, trying
// RFC 8414's URI, then OpenID Connect discovery's (with the path inserted, then
// appended), and checks the issuer it declares is exactly issuer (RFC 8414 §3.3):
// metadata an attacker serves for another issuer must not be believed.
func DiscoverServer(ctx context.Context, hc *http.Client, issuer string) (*ServerMetadata, error) {
	iu, err := url.Parse(issuer)
	if err != nil || iu.Scheme == "" || iu.Host == "" {
		return nil, fmt.Errorf("the authorization server %q is not an absolute URL", issuer)
	}
	candidates := wellKnown(iu, "oauth-authorization-server", true)
	candidates = append(candidates, wellKnown(iu, "openid-configuration", true)...)
	if p := strings.TrimSuffix(iu.Path, "/"); p != "" {
		candidates = append(candidates, iu.Scheme+"://"+iu.Host+p+"/.well-known/openid-configuration")
	}
	var errs []error
	for _, c := range slices.Compact(candidates) {
		var md ServerMetadata
		if err := getJSON(ctx, hc, c, &md); err != nil {
			errs = append(errs, err)
			continue
		}
		if md.Issuer != issuer {
			return nil, fmt.Errorf("the authorization server metadata at %s declares issuer %q, not %q: refusing it", c, md.Issuer, issuer)
		}
		if md.AuthorizationEndpoint == "" || md.TokenEndpoint == "" {
			return nil, fmt.Errorf("the authorization server metadata at %s lacks an authorization or token endpoint", c)
		}
		if err := checkEndpoints(&md); err != nil {
			return nil, fmt.Errorf("the authorization server metadata at %s: %w", c, err)
		}
		return &md, nil
	}
	return nil, fmt.Errorf("no authorization server metadata for %s: %w", issuer, errors.Join(errs...))
}

// checkEndpoints refuses endpoints a code, a token or a client secret would
// travel to in the clear: OAuth 2.1 wants TLS everywhere but on the loopback.
func checkEndpoints(md *ServerMetadata) error {
	for _, e := range []string{md.AuthorizationEndpoint, md.TokenEndpoint, md.RegistrationEndpoint} {
		if e == "" {
			continue
		}
		u, err := url.Parse(e)
		if err != nil || u.Host == "" {
			return fmt.Errorf("the endpoint %q is not an absolute URL", e)
		}
		if !secureScheme(u) {
			return fmt.Errorf("the endpoint %s is not https: refusing to send credentials to it", e)
		}
	}
	return nil
}

// secureScheme reports whether u may carry credentials: https, or http to this
// machine (where the dial guard lets it go only for a server that is local too).
func secureScheme(u *url.URL) bool {
	return u.Scheme == "https" || (u.Scheme == "http" && loopback(u.Hostname()))
}

// loopback reports whether host is this machine.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// wellKnown lists the well-known URIs of name for u: with u's path after the
// well-known segment, then (for resources, and issuers without a path) at the root.
func wellKnown(u *url.URL, name string, issuer bool) []string {
	base := u.Scheme + "://" + u.Host + "/.well-known/" + name
	p := strings.TrimSuffix(u.Path, "/")
	if p == "" {
		return []string{base}
	}
	if issuer {
		return []string{base + p}
	}
	return []string{base + p, base}
}

// canonicalResource is a server URL as a resource indicator: no fragment, no
// query, lower-case scheme and host.
func canonicalResource(u *url.URL) string {
	c := *u
	c.Fragment, c.RawQuery, c.RawFragment = "", "", ""
	c.Scheme, c.Host = strings.ToLower(c.Scheme), strings.ToLower(c.Host)
	return c.String()
}

// resourceCovers reports whether resource identifies the server at u: the same
// origin, and a path that is u's or a parent of it on a segment boundary.
func resourceCovers(resource string, u *url.URL) bool {
	r, err := url.Parse(resource)
	if err != nil || !strings.EqualFold(r.Scheme, u.Scheme) || !strings.EqualFold(r.Host, u.Host) {
		return false
	}
	rp, up := strings.TrimSuffix(r.Path, "/"), strings.TrimSuffix(u.Path, "/")
	return rp == "" || rp == up || strings.HasPrefix(up, rp+"/")
}

// getJSON GETs a JSON document into v. Only https is asked (http on the
// loopback), and a redirect is followed only within the document's origin.
func getJSON(ctx context.Context, hc *http.Client, u string, v any) error {
	pu, err := url.Parse(u)
	if err != nil || pu.Host == "" {
		return fmt.Errorf("the metadata URL %q is not an absolute URL", u)
	}
	if !secureScheme(pu) {
		return fmt.Errorf("the metadata URL %s is not https: refusing to fetch it", pu.Redacted())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := egress.WithRedirects(hc, egress.SameOrigin).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxMetadataBytes))
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxMetadataBytes)).Decode(v); err != nil {
		return fmt.Errorf("%s: decoding: %w", u, err)
	}
	return nil
}
