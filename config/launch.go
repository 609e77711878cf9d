package config

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Launch says what a server entry runs, for a person to check before it does:
// the exact command line (or the URL), its working directory, and the names of
// the environment variables and headers it is given, never their values.
func (s *Server) Launch() string {
	var parts []string
	if s.URL != "" {
		parts = append(parts, "url: "+s.URL)
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

// shellWord quotes a word that a shell would split or expand.
func shellWord(w string) string {
	if w != "" && !strings.ContainsAny(w, " \t\n'\"\\$`;&|<>()*?[]{}~#!") {
		return w
	}
	return strconv.Quote(w)
}
