package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// rules is one compiled policy. Every string a decision reports is built here, once, so
// that deciding allocates nothing.
type rules struct {
	origin string // "policy.agents.coder", DefaultOrigin or BuiltinOrigin
	source string // where origin was configured, if known
	allows string // what the policy allows, for refusals: "default allows @readonly only"
	list   Rules  // as written, for Check
	// revision is the policy's (Policy.Revision), stamped on each decision.
	revision string

	exact    map[string]match // by canonical tool name
	servers  map[string]match // by server name, for "<server>.*"
	readOnly match
	all      match
}

// match holds what a policy says about one entry: the entry itself and the rule text of
// its allow and deny occurrences ("" when absent).
type match struct{ entry, allow, deny string }

func compileRules(origin string, r Rules, source string, probs *[]Problem) *rules {
	x := &rules{
		origin:  origin,
		source:  source,
		allows:  summary(origin, r.Allow),
		list:    Rules{Allow: slices.Clone(r.Allow), Deny: slices.Clone(r.Deny)},
		exact:   make(map[string]match),
		servers: make(map[string]match),
	}
	add := func(list string, entries []string) {
		seen := make(map[string]int, len(entries))
		for i, e := range entries {
			where := fmt.Sprintf("%s.%s[%d]", origin, list, i)
			if j, dup := seen[e]; dup {
				*probs = append(*probs, Problem{where, e, fmt.Sprintf("duplicate of %s[%d]; remove one", list, j)})
				continue
			}
			seen[e] = i
			k, key, msg := parseEntry(e)
			if msg != "" {
				*probs = append(*probs, Problem{where, e, msg})
				continue
			}
			set := func(m match) match {
				m.entry = e
				if list == "deny" {
					m.deny = "deny " + strconv.Quote(e)
				} else {
					m.allow = "allow " + strconv.Quote(e)
				}
				return m
			}
			switch k {
			case exact:
				x.exact[key] = set(x.exact[key])
			case server:
				x.servers[key] = set(x.servers[key])
			case readOnly:
				x.readOnly = set(x.readOnly)
			case all:
				x.all = set(x.all)
			}
		}
	}
	add("allow", r.Allow)
	add("deny", r.Deny)
	return x
}

// summary says what a policy allows, short enough for a one-line refusal.
func summary(origin string, allow []string) string {
	who := "default"
	if origin != DefaultOrigin && origin != BuiltinOrigin {
		who = origin
	}
	switch n := len(allow); {
	case n == 0:
		return who + " allows nothing"
	case n <= 3:
		return who + " allows " + strings.Join(allow, ", ") + " only"
	default:
		return fmt.Sprintf("%s allows %s and %d more", who, strings.Join(allow[:3], ", "), n-3)
	}
}

// resolve returns the policy that applies to agent: its own if it has one, else the default.
func (p *Policy) resolve(agent string) (string, *rules) {
	if agent == "" {
		agent = Anonymous
	}
	if r, ok := p.agents[agent]; ok {
		return agent, r
	}
	return agent, p.def
}
