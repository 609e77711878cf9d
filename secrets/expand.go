package secrets

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Reference syntax. "$${" before a known kind escapes it: "$${env:X}" is the literal
// text "${env:X}". Any other "${...}" is left alone, so values that happen to contain
// shell-like syntax pass through unchanged.
const (
	keyringPrefix = "${keyring:"
	envPrefix     = "${env:"
)

// Expand resolves ${keyring:NAME} and ${env:NAME} references in a config value. Call
// it only when a child is started or a request is sent, and never write the result
// back: config keeps the reference.
//
// It returns the resolved value and the names of the keyring secrets it used (each
// once, in order of first use), so the caller can report where secrets are used. A
// resolved value is inserted as is, never expanded again, so a secret that contains
// "${env:...}" cannot pull in other values. An unset environment variable or a missing
// keyring item is an error (wrapping ErrNotFound) that names it and says how to set it.
// lookupEnv nil means os.LookupEnv.
//
// To have every resolved keyring value redacted, pass a store wrapped by Redacting.
// Values from the environment and literal values are not registered here, since that
// depends on the key they are given under: RegisterChildValues does it for a child.
func Expand(ctx context.Context, value string, store Store, lookupEnv func(string) (string, bool)) (string, []string, error) {
	if !strings.Contains(value, "${") {
		return value, nil, nil // the common case: no references
	}
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	var (
		b     strings.Builder
		used  []string
		cache map[string]string
	)
	rest := value
	for {
		i := strings.Index(rest, "${")
		if i < 0 {
			b.WriteString(rest)
			break
		}
		ref := rest[i:]
		kind, isRef := refKind(ref)
		if !isRef {
			b.WriteString(rest[:i+2])
			rest = rest[i+2:]
			continue
		}
		if i > 0 && rest[i-1] == '$' {
			// "$${kind:" is the escape for a literal "${kind:".
			b.WriteString(rest[:i-1])
			b.WriteString("${")
			rest = rest[i+2:]
			continue
		}
		b.WriteString(rest[:i])
		name, n, err := parseRef(ref, kind)
		if err != nil {
			return "", nil, err
		}
		rest = ref[n:]
		switch kind {
		case envPrefix:
			v, ok := lookupEnv(name)
			if !ok {
				return "", nil, fmt.Errorf("%w: environment variable %s (referenced as ${env:%s}) is not set; set it in the environment Nexus starts from, or store the value with `nexus secrets set` and use ${keyring:NAME}", ErrNotFound, name, name)
			}
			b.WriteString(v)
		case keyringPrefix:
			v, ok := cache[name]
			if !ok {
				if store == nil {
					return "", nil, fmt.Errorf("${keyring:%s}: no secret store is open", name)
				}
				var err error
				v, err = store.Get(ctx, name)
				if errors.Is(err, ErrNotFound) {
					return "", nil, fmt.Errorf("${keyring:%s}: %w", name, err)
				}
				if err != nil {
					return "", nil, fmt.Errorf("resolving ${keyring:%s}: %w", name, err)
				}
				if cache == nil {
					cache = map[string]string{}
				}
				cache[name] = v
				used = append(used, name)
			}
			b.WriteString(v)
		}
	}
	return b.String(), used, nil
}

// Refs lists the ${keyring:NAME} names a value references, each once, in order of
// first appearance (for `nexus secrets list` and for purging a removed server's
// secrets). Malformed references are skipped; Expand reports them.
func Refs(value string) []string {
	var names []string
	rest := value
	for {
		i := strings.Index(rest, keyringPrefix)
		if i < 0 {
			return names
		}
		escaped := i > 0 && rest[i-1] == '$'
		rest = rest[i:]
		name, n, err := parseRef(rest, keyringPrefix)
		if err != nil || escaped {
			rest = rest[len(keyringPrefix):]
			continue
		}
		rest = rest[n:]
		if !contains(names, name) {
			names = append(names, name)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// refKind reports whether s starts a reference Nexus resolves.
func refKind(s string) (string, bool) {
	switch {
	case strings.HasPrefix(s, keyringPrefix):
		return keyringPrefix, true
	case strings.HasPrefix(s, envPrefix):
		return envPrefix, true
	}
	return "", false
}

// parseRef parses "${kind:NAME}" at the start of s and returns NAME and the length of
// the reference.
func parseRef(s, kind string) (string, int, error) {
	end := strings.IndexByte(s, '}')
	if end < 0 {
		return "", 0, fmt.Errorf("unterminated reference %q: close it with }", truncate(s, 40))
	}
	name := s[len(kind):end]
	if kind == envPrefix {
		if !validEnvName(name) {
			return "", 0, fmt.Errorf("invalid reference %q: an environment variable name is a letter or _ followed by letters, digits or _", s[:end+1])
		}
	} else if err := ValidateName(name); err != nil {
		return "", 0, fmt.Errorf("invalid reference %q: %w", s[:end+1], err)
	}
	return name, end + 1, nil
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9' {
			continue
		}
		return false
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
