package secrets

import (
	"regexp"
	"strings"
)

// What looks like a secret. Used where a value is about to be written somewhere it
// could be shared (a team config layer, an imported client config): the check errs
// towards yes, because a value needlessly kept in the keychain costs little and a
// token left in a shared file does not.

var secretKeyWords = []string{"TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "PASS", "AUTH", "CREDENTIAL", "PRIVATE", "COOKIE", "SESSION", "PAT"}

// LooksSecretKey reports whether an environment variable called name probably holds a
// secret.
func LooksSecretKey(name string) bool {
	up := strings.ToUpper(name)
	for _, w := range secretKeyWords {
		if w == "PAT" {
			// PAT only as a whole word: GITHUB_PAT, not PATH.
			for _, part := range strings.FieldsFunc(up, func(r rune) bool { return r == '_' || r == '-' }) {
				if part == "PAT" {
					return true
				}
			}
			continue
		}
		if strings.Contains(up, w) {
			return true
		}
	}
	return false
}

// LooksSecretHeader reports whether an HTTP header called name probably carries a
// credential.
func LooksSecretHeader(name string) bool {
	return LooksSecretKey(name) || strings.EqualFold(name, "Authorization") || strings.EqualFold(name, "Proxy-Authorization")
}

var secretPrefixes = []string{"Bearer ", "Basic ", "ghp_", "gho_", "ghs_", "github_pat_", "glpat-", "sk-", "xoxb-", "xoxp-", "xapp-", "AKIA", "AIza"}

var urlPasswordRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://[^/@:\s]*:[^/@\s]+@`)

// LooksSecretValue reports whether a value looks like a credential whatever its key: a
// bearer value, a well-known token prefix, or a URL with a password.
func LooksSecretValue(v string) bool {
	for _, p := range secretPrefixes {
		if strings.HasPrefix(v, p) {
			return true
		}
	}
	return URLHasPassword(v)
}

// URLHasPassword reports whether v is a URL with a password in it
// (postgres://user:pw@host/db).
func URLHasPassword(v string) bool { return urlPasswordRE.MatchString(v) }

// IsReference reports whether s is one whole ${keyring:...} or ${env:...} reference.
func IsReference(s string) bool {
	for _, kind := range []string{"${keyring:", "${env:"} {
		if strings.HasPrefix(s, kind) && strings.HasSuffix(s, "}") && strings.Count(s, "}") == 1 {
			return true
		}
	}
	return false
}
