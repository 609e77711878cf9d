package policy

import (
	"fmt"
	"github.com/nexus-mcp/nexus/internal/suggest"
	"maps"
	"slices"
	"strings"
)

// Check reports latent permissions: entries that grant or deny nothing today and would
// silently start to when a server or tool of that name appears. known maps each server to
// the names of its tools (without the server prefix; an operator's rename, when the
// tool has one); a server
// present with a nil slice is known but its tools are not yet, so only its name is checked.
// A nil known skips those checks. Check also reports allow entries made useless by the same
// entry in the deny list. Empty and duplicate entries need no check: Compile refuses them.
func (p *Policy) Check(known map[string][]string) []Problem {
	var out []Problem
	servers := strings.Join(slices.Sorted(maps.Keys(known)), ", ")
	for _, r := range p.all() {
		for _, l := range []struct {
			name    string
			entries []string
		}{{"allow", r.list.Allow}, {"deny", r.list.Deny}} {
			for i, e := range l.entries {
				where := fmt.Sprintf("%s.%s[%d]", r.origin, l.name, i)
				if l.name == "allow" {
					if j := slices.Index(r.list.Deny, e); j >= 0 {
						out = append(out, Problem{where, e, fmt.Sprintf("also in deny[%d], which wins: this entry has no effect; remove one of them", j)})
					}
				}
				if msg := checkKnown(e, known, servers); msg != "" {
					out = append(out, Problem{where, e, msg})
				}
			}
		}
	}
	return out
}

// CheckEntry says why a policy entry matches nothing known ("" when it may match):
// known is as for Check, and may be built from the config alone, before any server
// runs, to warn when an entry is written.
func CheckEntry(entry string, known map[string][]string) string {
	return checkKnown(entry, known, strings.Join(slices.Sorted(maps.Keys(known)), ", "))
}

func checkKnown(e string, known map[string][]string, servers string) string {
	k, _, _ := parseEntry(e)
	if known == nil || (k != exact && k != server) {
		return ""
	}
	srv, tool, _ := strings.Cut(e, ".")
	tools, ok := known[srv]
	switch {
	case !ok:
		return fmt.Sprintf("no server is named %q (known: %s); fix the name or remove the entry", srv, servers)
	case k == server || tools == nil || slices.Contains(tools, tool):
		return ""
	}
	msg := fmt.Sprintf("server %q lists no tool %q", srv, tool)
	if near := suggest.Closest(tool, tools); near != "" {
		return msg + fmt.Sprintf("; did you mean %q?", srv+"."+near)
	}
	return msg + "; fix the name or remove the entry"
}

// all returns the configured policies, default first then agents by name.
func (p *Policy) all() []*rules {
	var rs []*rules
	if p.def.origin != BuiltinOrigin {
		rs = append(rs, p.def)
	}
	for _, name := range slices.Sorted(maps.Keys(p.agents)) {
		rs = append(rs, p.agents[name])
	}
	return rs
}
