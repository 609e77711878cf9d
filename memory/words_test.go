package memory

import (
	"slices"
	"testing"
)

func TestCanonWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"List the repositories", []string{"list", "the", "repo"}},
		{"open a pull request", []string{"open", "a", "pr"}},
		{"remove folders", []string{"delete", "dir"}},
		{"", []string{}},
	} {
		if got := CanonWords(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("CanonWords(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
