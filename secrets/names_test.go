package secrets

import "testing"

func TestChildSecretNames(t *testing.T) {
	tests := []struct{ got, want string }{
		{EnvName("github", "GITHUB_TOKEN"), "github/env/GITHUB_TOKEN"},
		{HeaderName("docs", "Authorization"), "docs/header/Authorization"},
		{HeaderName("docs", "X-Api:Key é"), "docs/header/X-Api_Key__"},
		{EnvName("a", "../etc"), "a/env/.._etc"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
		if err := ValidateName(tc.got); err != nil {
			t.Errorf("%q is not a valid keyring name: %v", tc.got, err)
		}
	}
}
