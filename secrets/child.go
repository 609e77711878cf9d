package secrets

import (
	"encoding/base64"
	"os"
	"slices"
	"strings"
)

// placeVars are environment variables that name places and people, not credentials.
// A child given ${env:HOME} would otherwise have every path under the home directory
// redacted from its results.
var placeVars = []string{
	"HOME", "USERPROFILE", "PATH", "PWD", "USER", "USERNAME", "LOGNAME", "SHELL", "TMPDIR", "TEMP", "TMP",
	"LANG", "LC_ALL", "TERM", "APPDATA", "LOCALAPPDATA", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
	"XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR",
}

// EnvName is the keyring name of the secret a child gets in its env var key:
// "<server>/env/<KEY>". `nexus add --env`, `nexus import` and catalog installs all
// name it so, which lets `nexus remove` find what to purge.
func EnvName(server, key string) string { return server + "/env/" + nameSafe(key) }

// HeaderName is the keyring name of the secret a child gets in its header:
// "<server>/header/<NAME>", with any character a name may not hold made '_'.
func HeaderName(server, header string) string { return server + "/header/" + nameSafe(header) }

// nameSafe replaces the characters ValidateName refuses.
func nameSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x80 && nameByte(byte(r)) && r != '/' {
			return r
		}
		return '_'
	}, s)
}

// RegisterChildValues registers with r every value that server's child is given and
// that may be a secret, so that nothing the child echoes back (in results, errors,
// notifications, lists, stderr) shows it. Call it when the child is started (or
// dialled), before its first message is read, with the child's env and headers as
// written in config: references unresolved.
//
// Registered, under "<server>/env/<KEY>" or "<server>/header/<NAME>":
//   - the value of every ${env:NAME} the values use, except variables that name
//     places (HOME, PATH, TMPDIR...) under a key that does not look secret;
//   - a literal value under a key that looks secret (LooksSecretKey for env,
//     LooksSecretHeader for headers), or that looks like a credential itself
//     (LooksSecretValue), with, for "Bearer X", "Basic X" or "token X", X alone too,
//     and for Basic the decoded "user:password" and password.
//
// Values of ${keyring:NAME} are registered, under NAME, as they are read through a
// store wrapped by Redacting; resolve them through one. lookupEnv nil means
// os.LookupEnv (it must be the lookup the child's values are resolved with).
func RegisterChildValues(r *Redactor, server string, env, headers map[string]string, lookupEnv func(string) (string, bool)) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	for k, v := range env {
		registerValue(r, EnvName(server, k), v, LooksSecretKey(k), lookupEnv)
	}
	for k, v := range headers {
		registerValue(r, HeaderName(server, k), v, LooksSecretHeader(k), lookupEnv)
	}
}

func registerValue(r *Redactor, label, v string, secretKey bool, lookupEnv func(string) (string, bool)) {
	if !strings.Contains(v, "${") {
		if secretKey || LooksSecretValue(v) {
			registerCredential(r, label, v)
		}
		return
	}
	for _, name := range envRefs(v) {
		if val, ok := lookupEnv(name); ok && (secretKey || !slices.Contains(placeVars, name)) {
			registerCredential(r, label, val)
		}
	}
}

// registerCredential registers v and, for an Authorization-style value, the
// credential after its scheme.
func registerCredential(r *Redactor, label, v string) {
	r.Add(label, v)
	scheme, cred, ok := strings.Cut(v, " ")
	if !ok {
		return
	}
	switch strings.ToLower(scheme) {
	case "bearer", "token":
		r.Add(label, strings.TrimSpace(cred))
	case "basic":
		cred = strings.TrimSpace(cred)
		r.Add(label, cred)
		if dec, err := base64.StdEncoding.DecodeString(cred); err == nil {
			r.Add(label, string(dec))
			if _, pw, ok := strings.Cut(string(dec), ":"); ok {
				r.Add(label, pw)
			}
		}
	}
}

// envRefs lists the NAMEs of the ${env:NAME} references in v, as Expand reads them
// ("$${env:X}" is a literal, not a reference); malformed ones are skipped, since
// Expand refuses them and the child is not started.
func envRefs(v string) []string {
	var names []string
	for rest := v; ; {
		i := strings.Index(rest, envPrefix)
		if i < 0 {
			return names
		}
		escaped := i > 0 && rest[i-1] == '$'
		rest = rest[i:]
		name, n, err := parseRef(rest, envPrefix)
		if err != nil || escaped {
			rest = rest[len(envPrefix):]
			continue
		}
		rest = rest[n:]
		names = append(names, name)
	}
}
