package policy

import (
	"fmt"
	"maps"
	"slices"
)

// Allow returns a copy of cfg in which agent's policy allows entry, which is also removed
// from the agent's deny list so that the latest command wins. A deny glob covering entry
// still wins over it; Decide tells whether the tool is now allowed.
//
// An agent without a policy of its own starts from a copy of the effective default: its
// policy replaces the default, so starting from nothing would make granting one write tool
// silently revoke the agent's read-only access.
func Allow(cfg Config, agent, entry string) (Config, error) {
	return edit(cfg, agent, entry, "allow")
}

// Deny returns a copy of cfg in which agent's policy denies entry, which is also removed from
// the agent's allow list. An agent without a policy starts from the effective default, as
// for Allow.
func Deny(cfg Config, agent, entry string) (Config, error) {
	return edit(cfg, agent, entry, "deny")
}

// Revoke returns a copy of cfg in which entry is in neither list of agent's policy. An agent
// without a policy starts from the effective default, as for Allow. Revoking an entry the
// agent's effective policy does not hold is an error, so that a typo is not taken for
// success.
func Revoke(cfg Config, agent, entry string) (Config, error) {
	return edit(cfg, agent, entry, "revoke")
}

// Reset returns a copy of cfg without agent's own policy, so that the default applies to
// it again.
func Reset(cfg Config, agent string) (Config, error) {
	if !ValidAgentName(agent) {
		return cfg, &Error{[]Problem{{"policy.agents." + agent, agent, agentNameHint(agent)}}}
	}
	out := clone(cfg)
	delete(out.Agents, agent)
	return out, nil
}

func edit(cfg Config, agent, entry, op string) (Config, error) {
	where := "policy.agents." + agent
	if !ValidAgentName(agent) {
		return cfg, &Error{[]Problem{{where, agent, agentNameHint(agent)}}}
	}
	out := clone(cfg)
	r, ok := out.Agents[agent]
	if !ok {
		r = EffectiveDefault(cfg)
	}
	r, err := editRules(r, where, entry, op)
	if err != nil {
		return cfg, err
	}
	out.Agents[agent] = r
	return out, nil
}

// AllowDefault, DenyDefault and RevokeDefault edit policy.default, the rules of
// every agent without a policy of its own, as Allow, Deny and Revoke edit an
// agent's. A config without a default starts from the built-in one (@readonly), so
// that allowing one tool does not take the read-only tools away.
func AllowDefault(cfg Config, entry string) (Config, error) { return editDefault(cfg, entry, "allow") }

// DenyDefault: see AllowDefault.
func DenyDefault(cfg Config, entry string) (Config, error) { return editDefault(cfg, entry, "deny") }

// RevokeDefault: see AllowDefault.
func RevokeDefault(cfg Config, entry string) (Config, error) {
	return editDefault(cfg, entry, "revoke")
}

func editDefault(cfg Config, entry, op string) (Config, error) {
	r, err := editRules(EffectiveDefault(cfg), DefaultOrigin, entry, op)
	if err != nil {
		return cfg, err
	}
	out := clone(cfg)
	out.Default = &r
	return out, nil
}

// editRules applies one allow, deny or revoke of entry to r; where names r in
// errors.
func editRules(r Rules, where, entry, op string) (Rules, error) {
	if _, _, msg := parseEntry(entry); msg != "" {
		return r, &Error{[]Problem{{where, entry, msg}}}
	}
	if op == "revoke" && !slices.Contains(r.Allow, entry) && !slices.Contains(r.Deny, entry) {
		return r, fmt.Errorf("%s: nothing to revoke: %q is in neither allow nor deny", where, entry)
	}
	r.Allow = slices.DeleteFunc(r.Allow, func(s string) bool { return s == entry })
	r.Deny = slices.DeleteFunc(r.Deny, func(s string) bool { return s == entry })
	switch op {
	case "allow":
		r.Allow = append(r.Allow, entry)
	case "deny":
		r.Deny = append(r.Deny, entry)
	}
	return r, nil
}

// clone copies cfg deeply enough that editing the copy leaves cfg untouched.
func clone(cfg Config) Config {
	out := Config{Agents: make(map[string]Rules, len(cfg.Agents)+1), Sources: maps.Clone(cfg.Sources)}
	if cfg.Default != nil {
		d := EffectiveDefault(cfg)
		out.Default = &d
	}
	for name, r := range cfg.Agents {
		out.Agents[name] = Rules{Allow: slices.Clone(r.Allow), Deny: slices.Clone(r.Deny)}
	}
	return out
}
