package secrets

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	ctx := context.Background()
	store := NewFake()
	store.Set(ctx, "github/GITHUB_TOKEN", "ghp_secret")
	store.Set(ctx, "doc-kg/token", "bearer-xyz")
	store.Set(ctx, "tricky", "${env:HOME}") // resolved values are never expanded again
	env := map[string]string{"HOME": "/home/u", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	for _, tc := range []struct {
		in, want string
		used     []string
		errHas   string
	}{
		{in: "plain", want: "plain"},
		{in: "", want: ""},
		{in: "${keyring:github/GITHUB_TOKEN}", want: "ghp_secret", used: []string{"github/GITHUB_TOKEN"}},
		{in: "Bearer ${keyring:doc-kg/token}", want: "Bearer bearer-xyz", used: []string{"doc-kg/token"}},
		{in: "${keyring:doc-kg/token}:${keyring:github/GITHUB_TOKEN}:${keyring:doc-kg/token}",
			want: "bearer-xyz:ghp_secret:bearer-xyz", used: []string{"doc-kg/token", "github/GITHUB_TOKEN"}},
		{in: "${env:HOME}/x${env:EMPTY}", want: "/home/u/x"},
		{in: "${keyring:tricky}", want: "${env:HOME}", used: []string{"tricky"}},
		{in: "$${env:HOME} and $${keyring:x}", want: "${env:HOME} and ${keyring:x}"},
		{in: "${HOME} ${other:x} $5 {x}", want: "${HOME} ${other:x} $5 {x}"},
		{in: "${env:NOPE}", errHas: "environment variable NOPE"},
		{in: "${keyring:missing/KEY}", errHas: "nexus secrets set missing/KEY"},
		{in: "${keyring:github/GITHUB_TOKEN", errHas: "unterminated"},
		{in: "${keyring:bad name}", errHas: "invalid reference"},
		{in: "${env:1X}", errHas: "invalid reference"},
	} {
		got, used, err := Expand(ctx, tc.in, store, lookup)
		if tc.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("Expand(%q) error = %v, want one containing %q", tc.in, err, tc.errHas)
			}
			if strings.Contains(tc.errHas, "set") && !errors.Is(err, ErrNotFound) {
				t.Errorf("Expand(%q) error %v does not wrap ErrNotFound", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want || !slices.Equal(used, tc.used) {
			t.Errorf("Expand(%q) = %q, %q, %v; want %q, %q", tc.in, got, used, err, tc.want, tc.used)
		}
	}
}

func TestExpandUnavailable(t *testing.T) {
	k := &Keyring{backend: &fakeBackend{err: errors.New("no bus")}}
	_, _, err := Expand(context.Background(), "${keyring:a}", k, nil)
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("Expand with a broken keychain: %v, want ErrUnavailable", err)
	}
}

func TestRefs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"${env:HOME}", nil},
		{"${keyring:a/B}", []string{"a/B"}},
		{"x ${keyring:a/B} ${keyring:c} ${keyring:a/B}", []string{"a/B", "c"}},
		{"$${keyring:escaped} ${keyring:bad name} ${keyring:open", nil},
		{"${keyring:${keyring:inner}", []string{"inner"}},
	} {
		if got := Refs(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Refs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
