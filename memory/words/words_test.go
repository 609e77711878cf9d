package words

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
		if got := Canonical(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Canonical(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCanonWord(t *testing.T) {
	for in, want := range map[string]string{
		"authentication": "auth", "repositories": "repo", "configuring": "config", "databases": "db",
		"kubernetes": "k8s", "documentation": "doc", "environments": "env", "https": "https",
		"connections": "connect",
	} {
		if got := Canon(in); got != want {
			t.Errorf("Canon(%q) = %q, want %q", in, got, want)
		}
	}
	if Canon("deploying") != Canon("deployed") || Canon("deploy") != Canon("deploys") {
		t.Error("inflections of deploy differ")
	}
	got := Tokens("open pull requests on-call")
	want := []string{"open", "pr", "oncall"}
	if len(got) != len(want) {
		t.Fatalf("Tokens = %v", got)
	}
	for i, w := range want {
		if got[i].Canon != w {
			t.Errorf("Tokens[%d] = %q, want %q", i, got[i].Canon, w)
		}
	}
}
