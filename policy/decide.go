package policy

import (
	"fmt"
	"strings"
)

// A Decision is the answer to "may this agent call this tool?", with enough context to
// explain a refusal to the person who can change it.
type Decision struct {
	Allowed bool
	Agent   string // the agent decided for; Anonymous when the caller gave no name
	Tool    string // the canonical tool name
	// Rule is the rule that decided: `deny "code-kg.*"`, `allow "@readonly"`,
	// "no allow rule matches", or "not a canonical <server>.<tool> name".
	Rule string
	// Entry is the entry of Rule ("code-kg.*"), or "" when no entry decided.
	Entry string
	// Origin is the policy Rule belongs to: "policy.agents.coder", DefaultOrigin or
	// BuiltinOrigin.
	Origin string
	// Source is where Origin was configured (Config.Sources), or "" if unknown.
	Source string
	// Revision is the revision of the policy that decided (Policy.Revision).
	Revision string

	denied       uint8 // bit k set: an entry of kind k denies the tool
	allowMatched bool  // some allow entry matches, even if a deny entry won
	malformed    bool
	allows       string
}

// Decide reports whether agent may call t. An empty agent is Anonymous; an agent without a
// policy of its own gets the default. Decide does not allocate.
func (p *Policy) Decide(agent string, t Tool) Decision {
	agent, r := p.resolve(agent)
	return r.decide(agent, t)
}

// DecideItem decides whether agent may see and use a prompt or a resource of server:
// things that are read, never run, so "@readonly" covers them. A prompt is matched like
// a tool by "<server>.<prompt>" (and "<server>.*", "*", "@readonly"). Resources and
// resource templates pass name "": a URI is not a name an entry can spell, so only
// "<server>.*", "*" and "@readonly" match them, and the decision's Tool is "<server>.*"
// (what a grant would add). A prompt whose name no entry can spell is decided the
// same way.
func (p *Policy) DecideItem(agent, srv, name string) Decision {
	agent, r := p.resolve(agent)
	if name != "" && canonical(srv+"."+name) {
		return r.decide(agent, Tool{Name: srv + "." + name, ReadOnly: true})
	}
	d := Decision{Agent: agent, Tool: srv + ".*", Origin: r.origin, Source: r.source, Revision: r.revision, allows: r.allows}
	if !validServer(srv) {
		d.Rule, d.malformed = "not a valid server name", true
		return d
	}
	return r.match(d, [...]match{server: r.servers[srv], readOnly: r.readOnly, all: r.all})
}

func (r *rules) decide(agent string, t Tool) Decision {
	d := Decision{Agent: agent, Tool: t.Name, Origin: r.origin, Source: r.source, Revision: r.revision, allows: r.allows}
	if !canonical(t.Name) {
		d.Rule, d.malformed = "not a canonical <server>.<tool> name", true
		return d
	}
	ms := [...]match{exact: r.exact[t.Name], server: r.servers[t.Server()], all: r.all}
	if t.readOnly() {
		ms[readOnly] = r.readOnly
	}
	return r.match(d, ms)
}

// match applies the entries that match, most specific first: deny beats allow.
func (r *rules) match(d Decision, ms [all + 1]match) Decision {
	var allow match
	for k, m := range ms {
		if m.deny != "" {
			if d.denied == 0 {
				d.Rule, d.Entry = m.deny, m.entry
			}
			d.denied |= 1 << k
		}
		if m.allow != "" && allow.allow == "" {
			allow = m
		}
	}
	d.allowMatched = allow.allow != ""
	switch {
	case d.denied != 0:
	case d.allowMatched:
		d.Allowed, d.Rule, d.Entry = true, allow.allow, allow.entry
	default:
		d.Rule = "no allow rule matches"
	}
	return d
}

// Filter returns the tools agent may call, in their original order: what tools/list shows.
// Hiding denied tools keeps agents from planning around tools they cannot use.
func (p *Policy) Filter(agent string, tools []Tool) []Tool {
	agent, r := p.resolve(agent)
	out := make([]Tool, 0, len(tools))
	for _, t := range tools {
		if r.decide(agent, t).Allowed {
			out = append(out, t)
		}
	}
	return out
}

// Explain decides every tool for agent, for "nexus policy show".
func (p *Policy) Explain(agent string, tools []Tool) []Decision {
	agent, r := p.resolve(agent)
	out := make([]Decision, len(tools))
	for i, t := range tools {
		out[i] = r.decide(agent, t)
	}
	return out
}

// Message returns the sentence a user sees, naming the agent, the tool, the rule and the
// policy that decided and, for a refusal, how to grant the tool:
//
//	agent "anonymous" may not call "code-kg.kg_regenerate": denied by policy.default (no allow rule matches; default allows @readonly only). To grant it: nexus policy allow --agent anonymous code-kg.kg_regenerate
func (d Decision) Message() string {
	verb, by, why := "may call", "allowed", d.Rule
	if !d.Allowed {
		verb, by = "may not call", "denied"
		switch {
		case d.malformed:
			why = fmt.Sprintf("%q is not a canonical <server>.<tool> name, so no rule can match it", d.Tool)
		case d.denied == 0:
			why += "; " + d.allows
		}
	}
	origin := d.Origin
	if d.Source != "" {
		origin += " in " + d.Source
	}
	s := fmt.Sprintf("agent %q %s %q: %s by %s (%s)", d.Agent, verb, d.Tool, by, origin, why)
	if h := d.Hint(); h != "" {
		s += ". To grant it: " + h
	}
	return s
}

// Hint returns the CLI commands that would grant a denied tool, or "" if the tool is
// allowed or cannot be granted (a malformed name). Deny entries other than the tool's own
// name must be revoked, since deny beats allow; "nexus policy allow" then both removes the
// tool's own deny entry and adds the allow entry.
func (d Decision) Hint() string {
	if d.Allowed || d.malformed {
		return ""
	}
	var cmds []string
	globs := [...]string{server: Tool{Name: d.Tool}.Server() + ".*", readOnly: ReadOnly, all: All}
	for k := server; k <= all; k++ {
		if d.denied&(1<<k) != 0 {
			cmds = append(cmds, command("revoke", d.Agent, globs[k]))
		}
	}
	if d.denied&(1<<exact) != 0 || !d.allowMatched {
		cmds = append(cmds, command("allow", d.Agent, d.Tool))
	}
	return strings.Join(cmds, " && ")
}

// command formats a CLI command, quoting globs so that no shell expands them.
func command(verb, agent, entry string) string {
	if strings.Contains(entry, "*") {
		entry = "'" + entry + "'"
	}
	return "nexus policy " + verb + " --agent " + agent + " " + entry
}
