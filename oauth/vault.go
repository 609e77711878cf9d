package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nexus-mcp/nexus/secrets"
)

// Grant is what a login obtained for one server from one authorization server.
type Grant struct {
	AccessToken  string    `json:"-"`
	RefreshToken string    `json:"-"`
	Expiry       time.Time `json:"expiry,omitzero"` // zero: the server did not say
	Scope        string    `json:"scope,omitempty"`
	Issuer       string    `json:"issuer"`
	Resource     string    `json:"resource"`
	Obtained     time.Time `json:"obtained"`
	// Wanted is the scope a server asked for beyond Scope (a 403
	// insufficient_scope): the next login asks for it too.
	Wanted string `json:"wanted,omitempty"`
}

// expiresWithin reports whether the access token ends within d from now.
func (g *Grant) expiresWithin(d time.Duration) bool {
	return !g.Expiry.IsZero() && time.Until(g.Expiry) < d
}

// ClientInfo is the client Nexus is at one authorization server.
type ClientInfo struct {
	ID     string `json:"client_id"`
	Secret string `json:"client_secret,omitempty"`
	// AuthMethod is how the client authenticates at the token endpoint: "none",
	// "client_secret_basic" or "client_secret_post".
	AuthMethod  string `json:"token_endpoint_auth_method"`
	RedirectURI string `json:"redirect_uri,omitempty"` // the one it was registered with
	// Registered says the client came from Dynamic Client Registration (and may be
	// registered again when its redirect URI cannot be served).
	Registered bool `json:"registered,omitempty"`
}

// Vault keeps grants and registered clients in a secrets store. Every name holds
// the issuer's key, so a token or a client obtained from one authorization server
// is never found when another is asked about.
//
// The names, all under "oauth/":
//
//	oauth/<server>/<issuer key>/access    the access token
//	oauth/<server>/<issuer key>/refresh   the refresh token
//	oauth/<server>/<issuer key>/grant     the rest (expiry, scope), JSON
//	oauth/<server>/issuer                 the issuer last logged in to (for status and logout)
//	oauth/client/<issuer key>             a registered client, JSON
//
// Tokens are stored apart from each other, and one longer than the store takes at
// once (a large JWT) in parts: <name>/1, <name>/2...
type Vault struct {
	Store secrets.Store
	// Register, when set, learns every credential read or stored (a token, a
	// client secret) under a name, so the redactor removes it from all output.
	Register func(name, value string)
}

// IssuerKey is the part of a secret name that stands for issuer: its host, made
// name-safe, and a hash of the whole URL, so two issuers on one host differ.
func IssuerKey(issuer string) string {
	host := issuer
	if u, err := url.Parse(issuer); err == nil && u.Host != "" {
		host = u.Host
	}
	var b strings.Builder
	for _, c := range strings.ToLower(host) {
		if 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	h := b.String()
	if len(h) > 48 {
		h = h[:48]
	}
	sum := sha256.Sum256([]byte(issuer))
	return h + "-" + hex.EncodeToString(sum[:5])
}

func grantName(server, issuer, part string) string {
	return "oauth/" + server + "/" + IssuerKey(issuer) + "/" + part
}

func issuerName(server string) string { return "oauth/" + server + "/issuer" }

func clientName(issuer string) string { return "oauth/client/" + IssuerKey(issuer) }

// Grant returns the grant stored for server from issuer, or an error wrapping
// secrets.ErrNotFound.
func (v *Vault) Grant(ctx context.Context, server, issuer string) (*Grant, error) {
	raw, err := v.Store.Get(ctx, grantName(server, issuer, "grant"))
	if err != nil {
		return nil, err
	}
	var g Grant
	if err := json.Unmarshal([]byte(raw), &g); err != nil {
		return nil, fmt.Errorf("the stored grant of %s: %w", server, err)
	}
	if g.Issuer != issuer {
		return nil, fmt.Errorf("the stored grant of %s is from %q, not %q: %w", server, g.Issuer, issuer, secrets.ErrNotFound)
	}
	if g.AccessToken, err = v.getLong(ctx, grantName(server, issuer, "access")); err != nil {
		return nil, err
	}
	g.RefreshToken, err = v.getLong(ctx, grantName(server, issuer, "refresh"))
	if err != nil && !errors.Is(err, secrets.ErrNotFound) {
		return nil, err
	}
	v.learn(server, &g)
	return &g, nil
}

// SaveGrant stores g for server under g.Issuer, and records the issuer as the
// server's current one.
func (v *Vault) SaveGrant(ctx context.Context, server string, g *Grant) error {
	v.learn(server, g)
	meta, err := json.Marshal(g)
	if err != nil {
		return err
	}
	if err := v.setLong(ctx, grantName(server, g.Issuer, "access"), g.AccessToken); err != nil {
		return fmt.Errorf("storing the access token of %s: %w", server, err)
	}
	if g.RefreshToken != "" {
		if err := v.setLong(ctx, grantName(server, g.Issuer, "refresh"), g.RefreshToken); err != nil {
			return fmt.Errorf("storing the refresh token of %s: %w", server, err)
		}
	} else if err := v.deleteLong(ctx, grantName(server, g.Issuer, "refresh")); err != nil {
		return fmt.Errorf("removing the old refresh token of %s: %w", server, err)
	}
	if err := v.Store.Set(ctx, grantName(server, g.Issuer, "grant"), string(meta)); err != nil {
		return fmt.Errorf("storing the grant of %s: %w", server, err)
	}
	if err := v.Store.Set(ctx, issuerName(server), g.Issuer); err != nil {
		return fmt.Errorf("recording the issuer of %s: %w", server, err)
	}
	return nil
}

// CurrentIssuer is the issuer server last logged in to, or an error wrapping
// secrets.ErrNotFound.
func (v *Vault) CurrentIssuer(ctx context.Context, server string) (string, error) {
	return v.Store.Get(ctx, issuerName(server))
}

// DeleteGrant removes what server obtained from issuer, and the record of the
// issuer when it is the current one.
func (v *Vault) DeleteGrant(ctx context.Context, server, issuer string) error {
	for _, part := range []string{"access", "refresh", "grant"} {
		if err := v.deleteLong(ctx, grantName(server, issuer, part)); err != nil {
			return fmt.Errorf("removing the %s of %s: %w", part, server, err)
		}
	}
	if cur, err := v.CurrentIssuer(ctx, server); err == nil && cur == issuer {
		return v.Store.Delete(ctx, issuerName(server))
	}
	return nil
}

// Client returns the client registered at issuer, or an error wrapping
// secrets.ErrNotFound.
func (v *Vault) Client(ctx context.Context, issuer string) (*ClientInfo, error) {
	raw, err := v.Store.Get(ctx, clientName(issuer))
	if err != nil {
		return nil, err
	}
	var c ClientInfo
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return nil, fmt.Errorf("the stored client of %s: %w", issuer, err)
	}
	v.learnClient(issuer, &c)
	return &c, nil
}

// SaveClient stores a client registered at issuer.
func (v *Vault) SaveClient(ctx context.Context, issuer string, c *ClientInfo) error {
	v.learnClient(issuer, c)
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := v.Store.Set(ctx, clientName(issuer), string(raw)); err != nil {
		return fmt.Errorf("storing the client registered at %s: %w", issuer, err)
	}
	return nil
}

// DeleteClient forgets the client registered at issuer.
func (v *Vault) DeleteClient(ctx context.Context, issuer string) error {
	return v.Store.Delete(ctx, clientName(issuer))
}

// chunked marks a value stored in parts: tokens (JWTs above all) may be longer
// than the store's limit for one value, Windows Credential Manager's.
const chunked = "nexus-chunks:"

// chunkBytes is the size of one part of a long value.
const chunkBytes = secrets.MaxValueBytes

// maxChunks bounds the parts of one value (about 40 KB).
const maxChunks = 16

// setLong stores value under name, in parts name/1, name/2... when it is longer
// than the store takes at once; name then holds how many.
func (v *Vault) setLong(ctx context.Context, name, value string) error {
	if len(value) <= chunkBytes && !strings.HasPrefix(value, chunked) {
		return v.Store.Set(ctx, name, value)
	}
	n := (len(value) + chunkBytes - 1) / chunkBytes
	if n > maxChunks {
		return fmt.Errorf("%s is %d bytes: longer than the %d Nexus keeps", name, len(value), maxChunks*chunkBytes)
	}
	for i := range n {
		part := value[i*chunkBytes : min((i+1)*chunkBytes, len(value))]
		if err := v.Store.Set(ctx, fmt.Sprintf("%s/%d", name, i+1), part); err != nil {
			return err
		}
	}
	return v.Store.Set(ctx, name, fmt.Sprintf("%s%d", chunked, n))
}

// getLong reads what setLong stored.
func (v *Vault) getLong(ctx context.Context, name string) (string, error) {
	head, err := v.Store.Get(ctx, name)
	if err != nil || !strings.HasPrefix(head, chunked) {
		return head, err
	}
	n, err := strconv.Atoi(strings.TrimPrefix(head, chunked))
	if err != nil || n < 1 || n > maxChunks {
		return "", fmt.Errorf("%s: a damaged record of its parts", name)
	}
	var b strings.Builder
	for i := range n {
		part, err := v.Store.Get(ctx, fmt.Sprintf("%s/%d", name, i+1))
		if err != nil {
			return "", fmt.Errorf("%s, part %d: %w", name, i+1, err)
		}
		b.WriteString(part)
	}
	return b.String(), nil
}

// deleteLong removes what setLong stored.
func (v *Vault) deleteLong(ctx context.Context, name string) error {
	head, err := v.Store.Get(ctx, name)
	if err == nil && strings.HasPrefix(head, chunked) {
		if n, err := strconv.Atoi(strings.TrimPrefix(head, chunked)); err == nil && n <= maxChunks {
			for i := range n {
				if err := v.Store.Delete(ctx, fmt.Sprintf("%s/%d", name, i+1)); err != nil {
					return err
				}
			}
		}
	}
	return v.Store.Delete(ctx, name)
}

func (v *Vault) learn(server string, g *Grant) {
	if v.Register == nil {
		return
	}
	v.Register(grantName(server, g.Issuer, "access"), g.AccessToken)
	if g.RefreshToken != "" {
		v.Register(grantName(server, g.Issuer, "refresh"), g.RefreshToken)
	}
}

func (v *Vault) learnClient(issuer string, c *ClientInfo) {
	if v.Register != nil && c.Secret != "" {
		v.Register(clientName(issuer)+"/secret", c.Secret)
	}
}
