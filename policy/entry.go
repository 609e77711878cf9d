package policy

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// kind is the shape of an entry, in the order Decide consults them: the most specific entry
// that matches is the one a decision names.
type kind uint8

const (
	exact kind = iota
	server
	readOnly
	all
)

// ValidAgentName reports whether name may name an agent. Agent names follow the server-name
// pattern ^[a-z0-9][a-z0-9-]{0,31}$, which Anonymous satisfies, so that they are safe in
// config keys, CLI arguments and messages without quoting.
func ValidAgentName(name string) bool { return validServer(name) }

func validServer(s string) bool {
	if len(s) == 0 || len(s) > 32 || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// ValidToolName reports whether a child's tool name can be decided by policy (and so
// served): see validToolPart.
func ValidToolName(name string) bool { return validToolPart(name) }

// validToolPart reports whether s can be a child's tool name as policy sees it. The
// spec asks for letters, digits, "_", "-" and "." but children send slashes, spaces,
// "+" and non-ASCII too, and such a tool must still be matched (by "server.*", "*",
// or its own name): only what cannot be a name is refused: nothing, control
// characters, invalid UTF-8, surrounding spaces, and "*" (which would make a name
// look like a glob).
func validToolPart(s string) bool {
	if s == "" || !utf8.ValidString(s) || strings.TrimSpace(s) != s || strings.Contains(s, "*") {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// canonical reports whether name is a well-formed "<server>.<tool>" name.
func canonical(name string) bool {
	i := strings.IndexByte(name, '.')
	return i > 0 && validServer(name[:i]) && validToolPart(name[i+1:])
}

// parseEntry returns an entry's kind and its key (the tool name for exact entries, the server
// for globs), or a message saying what is wrong and what to write instead.
func parseEntry(e string) (kind, string, string) {
	switch {
	case e == "":
		return 0, "", `empty entry; remove it, or write a tool name such as "code-kg.kg_latest_graph"`
	case strings.TrimSpace(e) != e:
		return 0, "", fmt.Sprintf("surrounding spaces never match a tool; write %q", strings.TrimSpace(e))
	case e == All:
		return all, "", ""
	case e == ReadOnly:
		return readOnly, "", ""
	case e[0] == '@':
		return 0, "", `unknown group; the only group is "@readonly"`
	}
	srv, tool, ok := strings.Cut(e, ".")
	if !ok {
		if s, t, wire := strings.Cut(e, "__"); wire && validServer(s) && validToolPart(t) {
			return 0, "", fmt.Sprintf("this is a wire name; policies use canonical names: write %q", s+"."+t)
		}
		if s, glob := strings.CutSuffix(e, "*"); glob && validServer(s) {
			return 0, "", fmt.Sprintf(`globs match whole servers: write %q, or "*" for every tool`, s+".*")
		}
		return 0, "", fmt.Sprintf(`missing server: write "<server>.<tool>", e.g. %q, or "<server>.*"`, "code-kg."+e)
	}
	if !validServer(srv) {
		if strings.Contains(srv, "*") {
			return 0, "", `globs match whole servers, not parts of their names: write "<server>.*" for each server, or "*" for every tool`
		}
		if l := strings.ToLower(srv); validServer(l) {
			return 0, "", fmt.Sprintf("server names are lower case: write %q", l+"."+tool)
		}
		return 0, "", fmt.Sprintf("invalid server name %q: server names match ^[a-z0-9][a-z0-9-]{0,31}$", srv)
	}
	if tool == "*" {
		return server, srv, ""
	}
	if strings.Contains(tool, "*") {
		return 0, "", fmt.Sprintf("globs match whole servers, not parts of tool names: write %q or list the tools by name", srv+".*")
	}
	if !validToolPart(tool) {
		return 0, "", "invalid tool name: a tool name has no control characters and is valid UTF-8"
	}
	return exact, e, ""
}

func agentNameHint(name string) string {
	msg := "invalid agent name: agent names match ^[a-z0-9][a-z0-9-]{0,31}$"
	if s := strings.ToLower(strings.NewReplacer("_", "-", " ", "-").Replace(strings.TrimSpace(name))); validServer(s) {
		msg += fmt.Sprintf("; write %q", s)
	}
	return msg
}
