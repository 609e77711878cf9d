package oauth

import (
	"net/http"
	"strings"
)

// Challenge is one challenge of a WWW-Authenticate header (RFC 9110 §11.6.1).
type Challenge struct {
	Scheme string            // as sent; compare with strings.EqualFold
	Params map[string]string // keys lower-cased
}

// Bearer returns the first Bearer challenge of h, and whether there is one.
func Bearer(h http.Header) (Challenge, bool) {
	for _, c := range ParseChallenges(h.Values("WWW-Authenticate")) {
		if strings.EqualFold(c.Scheme, "Bearer") {
			return c, true
		}
	}
	return Challenge{}, false
}

// ResourceMetadata is the resource_metadata URL a challenge names (RFC 9728 §5.1).
func (c Challenge) ResourceMetadata() string { return c.Params["resource_metadata"] }

// Scope is the scope a challenge asks for (RFC 6750 §3).
func (c Challenge) Scope() string { return c.Params["scope"] }

// Error is the challenge's error code, e.g. "invalid_token" or "insufficient_scope".
func (c Challenge) Error() string { return c.Params["error"] }

// ParseChallenges reads the challenges of WWW-Authenticate header values. It is
// lenient: a malformed parameter ends its challenge, never the whole header.
func ParseChallenges(values []string) []Challenge {
	var out []Challenge
	for _, v := range values {
		p := &challengeParser{s: v}
		out = append(out, p.all()...)
	}
	return out
}

type challengeParser struct {
	s string
	i int
}

func (p *challengeParser) all() []Challenge {
	var out []Challenge
	for {
		p.skip(" \t,")
		scheme := p.token()
		if scheme == "" {
			return out
		}
		c := Challenge{Scheme: scheme, Params: map[string]string{}}
		for {
			p.skip(" \t")
			save := p.i
			key := p.token()
			p.skip(" \t")
			if key == "" || p.i >= len(p.s) || p.s[p.i] != '=' {
				// Not a parameter: a token68, or the next challenge's scheme.
				if key != "" && (p.i >= len(p.s) || p.s[p.i] == ',') && len(c.Params) == 0 {
					continue // a token68 such as "Basic abc=="'s value; skipped
				}
				p.i = save
				break
			}
			p.i++ // '='
			p.skip(" \t")
			c.Params[strings.ToLower(key)] = p.value()
			p.skip(" \t")
			if p.i < len(p.s) && p.s[p.i] == ',' {
				p.i++
			}
		}
		out = append(out, c)
	}
}

func (p *challengeParser) skip(chars string) {
	for p.i < len(p.s) && strings.IndexByte(chars, p.s[p.i]) >= 0 {
		p.i++
	}
}

// token reads an RFC 9110 token (plus '/' and '=' tails of token68 are left).
func (p *challengeParser) token() string {
	start := p.i
	for p.i < len(p.s) && tokenByte(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

func (p *challengeParser) value() string {
	if p.i < len(p.s) && p.s[p.i] == '"' {
		p.i++
		var b strings.Builder
		for p.i < len(p.s) && p.s[p.i] != '"' {
			if p.s[p.i] == '\\' && p.i+1 < len(p.s) {
				p.i++
			}
			b.WriteByte(p.s[p.i])
			p.i++
		}
		p.i++ // closing quote
		return b.String()
	}
	start := p.i
	for p.i < len(p.s) && p.s[p.i] != ',' && p.s[p.i] != ' ' && p.s[p.i] != '\t' {
		p.i++
	}
	return p.s[start:p.i]
}

func tokenByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
