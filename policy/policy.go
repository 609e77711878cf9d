// Package policy decides which tools each agent may see and call through the gateway.
//
// Every tool behind the gateway has a canonical name "<server>.<tool>". A policy is a pair of
// lists, allow and deny, whose entries are an exact canonical name ("doc-kg.doc_kg_search"),
// a server glob ("code-kg.*"), "*" (every tool) or "@readonly" (every tool whose effective
// readOnlyHint is true and destructiveHint is not). The configuration holds one default
// policy and one policy per agent:
//
//   - an agent's policy replaces the default, it is not merged with it, so that reading one
//     policy is enough to know what an agent may do;
//   - without a configured default the built-in default {"allow": ["@readonly"]} applies, so
//     that an agent nobody thought about can read but cannot change anything;
//   - deny beats allow, and a tool no allow entry matches is denied.
//
// Matching is exact and case-sensitive: the gateway resolves wire names to canonical names
// before asking, and a policy that guessed (trimmed, folded case, matched prefixes) would
// grant what nobody wrote. A name that is not canonical matches nothing, not even "*".
//
// The package is pure logic: [Compile] turns a [Config] into an immutable [Policy] whose
// [Policy.Decide] is cheap enough to run on every call and every tools/list. [Policy.Check]
// reports entries that grant nothing today but could grant something tomorrow (an unknown
// server or tool), [Allow], [Deny], [Revoke] and [Reset] edit a Config for the CLI, and
// [Counter] counts denials for auditing.
package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Anonymous is the agent name used when a caller did not identify itself.
const Anonymous = "anonymous"

// Special entries.
const (
	All      = "*"         // every tool
	ReadOnly = "@readonly" // every tool annotated read-only and not destructive
)

// Origins of a decision that are not an agent's policy.
const (
	DefaultOrigin = "policy.default"
	BuiltinOrigin = "built-in default"
)

// Rules is one policy: the tools it allows and those it denies.
type Rules struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// Config is the "policy" section of the configuration.
type Config struct {
	// Default applies to agents without an entry in Agents; nil means BuiltinDefault.
	Default *Rules `json:"default,omitempty"`
	// Agents holds the per-agent policies, each replacing Default for that agent.
	Agents map[string]Rules `json:"agents,omitempty"`
	// Sources optionally names where each policy came from
	// ("policy.default" -> "/home/u/.nexus/config.json"), so that a refusal can say which
	// file to edit; may be nil.
	Sources map[string]string `json:"-"`
}

// BuiltinDefault returns the policy used when the configuration has no default: read-only
// tools only.
func BuiltinDefault() Rules { return Rules{Allow: []string{ReadOnly}} }

// EffectiveDefault returns a copy of the policy that applies to agents without an entry.
func EffectiveDefault(cfg Config) Rules {
	if cfg.Default == nil {
		return BuiltinDefault()
	}
	return Rules{Allow: slices.Clone(cfg.Default.Allow), Deny: slices.Clone(cfg.Default.Deny)}
}

// Tool is what policy needs to know of a tool: its canonical name and its effective
// annotations, after any operator override.
type Tool struct {
	Name        string // canonical "<server>.<tool>"
	ReadOnly    bool
	Destructive bool
}

// Server returns the server part of the tool's name, or "" if the name has none.
func (t Tool) Server() string {
	if i := strings.IndexByte(t.Name, '.'); i > 0 {
		return t.Name[:i]
	}
	return ""
}

// readOnly reports whether @readonly covers t. A tool that claims both read-only and
// destructive is treated as destructive: the safer reading of contradictory hints.
func (t Tool) readOnly() bool { return t.ReadOnly && !t.Destructive }

// A Problem is one fault found in a configuration.
type Problem struct {
	Where   string // e.g. "policy.agents.coder.allow[2]"
	Entry   string // the offending entry or agent name
	Message string // what is wrong and what to write instead
}

func (p Problem) String() string { return fmt.Sprintf("%s %q: %s", p.Where, p.Entry, p.Message) }

// Error is returned by Compile and the editing functions. It lists every problem found, so
// that one pass over the configuration fixes them all.
type Error struct{ Problems []Problem }

func (e *Error) Error() string {
	s := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		s[i] = p.String()
	}
	return "invalid policy: " + strings.Join(s, "; ")
}

// Policy is a compiled Config. It is immutable and safe for concurrent use; to change the
// policy, compile a new Config and swap the pointer.
type Policy struct {
	def      *rules
	agents   map[string]*rules
	revision string
}

// Compile checks the syntax of cfg and compiles it. It refuses empty and duplicate entries,
// malformed entries and invalid agent names; whether the servers and tools named exist is
// a separate question, answered by Check, because the catalog changes while a config stays.
func Compile(cfg Config) (*Policy, error) {
	var probs []Problem
	p := &Policy{agents: make(map[string]*rules, len(cfg.Agents))}
	if cfg.Default != nil {
		p.def = compileRules(DefaultOrigin, *cfg.Default, cfg.Sources[DefaultOrigin], &probs)
	} else {
		p.def = compileRules(BuiltinOrigin, BuiltinDefault(), "", &probs)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Agents)) {
		where := "policy.agents." + name
		if !ValidAgentName(name) {
			probs = append(probs, Problem{where, name, agentNameHint(name)})
			continue
		}
		p.agents[name] = compileRules(where, cfg.Agents[name], cfg.Sources[where], &probs)
	}
	if len(probs) > 0 {
		return nil, &Error{probs}
	}
	p.revision = revisionOf(cfg)
	p.def.revision = p.revision
	for _, r := range p.agents {
		r.revision = p.revision
	}
	return p, nil
}

// Revision names what the policy says: the first 12 hex digits of the SHA-256 of
// its rules (the default, built-in or not, and each agent's, in a canonical JSON
// form). Two gateways with the same rules have the same revision; any edit of a
// rule changes it; where a rule was written (Sources) does not. The audit
// record carries it, so that a decision can be traced to the rules in force.
func (p *Policy) Revision() string { return p.revision }

func revisionOf(cfg Config) string {
	canon := struct {
		Default Rules            `json:"default"`
		Agents  map[string]Rules `json:"agents"`
	}{EffectiveDefault(cfg), cfg.Agents}
	b, _ := json.Marshal(canon) // maps marshal in key order
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}
