package config

import (
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Launch says what a server entry runs, for a person to check before it does:
// the exact command line (or the URL, without a password), its working
// directory, and the names of the environment variables and headers it is
// given, never their values.
func (s *Server) Launch() string {
	var parts []string
	if s.URL != "" {
		parts = append(parts, "url: "+withoutPassword(s.URL))
	} else {
		line := []string{shellWord(s.Command)}
		for _, a := range s.Args {
			line = append(line, shellWord(a))
		}
		parts = append(parts, "command: "+strings.Join(line, " "))
	}
	if s.Cwd != "" {
		parts = append(parts, "in: "+s.Cwd)
	}
	if len(s.Env) > 0 {
		parts = append(parts, "env: "+strings.Join(slices.Sorted(maps.Keys(s.Env)), ", "))
	}
	if len(s.Headers) > 0 {
		parts = append(parts, "headers: "+strings.Join(slices.Sorted(maps.Keys(s.Headers)), ", "))
	}
	return strings.Join(parts, "; ")
}

// withoutPassword is the URL with the password of its user info, if any,
// replaced: what a person checks is where it connects, and the screen may be
// shared.
func withoutPassword(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, set := u.User.Password(); !set {
		return raw
	}
	u.User = url.UserPassword(u.User.Username(), "xxxxx")
	return u.String()
}

// shellWord quotes a word that a shell would split or expand.
func shellWord(w string) string {
	if w != "" && !strings.ContainsAny(w, " \t\n'\"\\$`;&|<>()*?[]{}~#!") {
		return w
	}
	return strconv.Quote(w)
}
