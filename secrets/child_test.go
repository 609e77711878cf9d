package secrets

import (
	"encoding/base64"
	"testing"
)

func TestRegisterChildValues(t *testing.T) {
	environ := map[string]string{
		"GH_TOKEN":   "ghp_from_the_environment",
		"HOME":       "/home/alice",
		"PLAIN_NAME": "value-of-plain-var",
		"SHARED":     "shared-env-value",
	}
	lookup := func(k string) (string, bool) { v, ok := environ[k]; return v, ok }
	basic := base64.StdEncoding.EncodeToString([]byte("alice:basic-password"))
	r := NewRedactor()
	RegisterChildValues(r, "fx", map[string]string{
		"GITHUB_TOKEN": "${env:GH_TOKEN}",
		"ROOT":         "${env:HOME}/projects",          // a place: not registered
		"OTHER":        "x-${env:PLAIN_NAME}",           // any env reference is registered
		"API_KEY":      "literal-api-key",               // literal under a secret-looking key
		"MODE":         "fast-mode",                     // literal, not secret-looking
		"DSN":          "postgres://u:dsn-pw@db/x",      // looks secret by value
		"ESCAPED":      "$${env:SHARED}",                // a literal "${env:SHARED}", not a reference
		"KEY_FROM_ENV": "${env:HOME}",                   // a place, but under a secret-looking key
		"STORED":       "${keyring:fx/env/STORED}",      // registered by the Redacting store instead
		"MISSING":      "${env:NOT_SET_ANYWHERE_12345}", // Expand will refuse it
	}, map[string]string{
		"Authorization": "Bearer literal-bearer-token",
		"X-Basic":       "Basic " + basic,
		"X-Trace":       "trace-id-123",
	}, lookup)

	for _, tc := range []struct {
		in, want string
	}{
		{"ghp_from_the_environment", "[redacted:fx/env/GITHUB_TOKEN]"},
		{"value-of-plain-var", "[redacted:fx/env/OTHER]"},
		{"literal-api-key", "[redacted:fx/env/API_KEY]"},
		{"postgres://u:dsn-pw@db/x", "[redacted:fx/env/DSN]"},
		{"/home/alice/projects/x", "[redacted:fx/env/KEY_FROM_ENV]/projects/x"},
		{"Bearer literal-bearer-token", "[redacted:fx/header/Authorization]"},
		{"token literal-bearer-token.", "token [redacted:fx/header/Authorization]."},
		{basic, "[redacted:fx/header/X-Basic]"},
		{"alice:basic-password", "[redacted:fx/header/X-Basic]"},
		{"pw basic-password", "pw [redacted:fx/header/X-Basic]"},
		{"fast-mode trace-id-123 shared-env-value", "fast-mode trace-id-123 shared-env-value"},
	} {
		if got := r.String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}

	// Without a secret-looking key, HOME is not registered.
	r2 := NewRedactor()
	RegisterChildValues(r2, "fx", map[string]string{"ROOT": "${env:HOME}/p"}, nil, lookup)
	if got := r2.String("/home/alice/p"); got != "/home/alice/p" {
		t.Errorf("a place variable was registered: %q", got)
	}
	// An escaped env value in a JSON message is caught too.
	msg := `{"text":"ghp\u005ffrom_the_environment"}`
	if got := string(r.JSON([]byte(msg))); got != `{"text":"[redacted:fx/env/GITHUB_TOKEN]"}` {
		t.Errorf("JSON(%s) = %s", msg, got)
	}
}
