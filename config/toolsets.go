package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/nexus-mcp/nexus/policy"
)

// Toolset modes: what an agent's tools/list holds.
const (
	// ToolsAll lists every tool the agent may call (the default).
	ToolsAll = "all"
	// ToolsSearch lists the pinned tools and nexus__find_tools and
	// nexus__call_tool, through which the agent reaches every other tool it may
	// call: a client pays for a short manifest instead of every schema on every turn.
	ToolsSearch = "search"
)

// MaxToolBudget bounds how many found tools one session's list may gain.
const MaxToolBudget = 64

// Toolset chooses what an agent's tools/list holds. In JSON it is "all",
// "search", or {"mode": "search", "pin": [...], "budget": N}.
type Toolset struct {
	// Mode is ToolsAll or ToolsSearch.
	Mode string `json:"mode"`
	// Pin lists tools (canonical names, "server.*" or "*") a search-mode list
	// holds besides the two search tools.
	Pin []string `json:"pin,omitempty"`
	// Budget is how many tools nexus__find_tools may add to the session's own
	// list (with list_changed), for clients that prefer calling tools directly;
	// 0 adds none, the oldest found leaves first when it is full.
	Budget int `json:"budget,omitempty"`
}

// UnmarshalJSON reads the short form ("search") and the object form.
func (t *Toolset) UnmarshalJSON(b []byte) error {
	var mode string
	if json.Unmarshal(b, &mode) == nil {
		*t = Toolset{Mode: mode}
		return nil
	}
	const want = `write "all", "search" or {"mode": "search", "pin": [...], "budget": N}`
	if trimmed := bytes.TrimSpace(b); len(trimmed) == 0 || trimmed[0] != '{' {
		return fmt.Errorf("%s, not %s", want, describe(b))
	}
	type plain Toolset
	var p plain
	if err := DecodeStrict(b, &p); err != nil {
		return fmt.Errorf("%s: %s", want, fieldError(err))
	}
	*t = Toolset(p)
	return nil
}

// Search reports whether the toolset is search mode.
func (t Toolset) Search() bool { return t.Mode == ToolsSearch }

// Pins reports whether a search-mode list holds the tool of that canonical name.
func (t Toolset) Pins(canonical string) bool {
	server, _, _ := strings.Cut(canonical, ".")
	for _, p := range t.Pin {
		if p == "*" || p == canonical || p == server+".*" {
			return true
		}
	}
	return false
}

// check says what is wrong with a toolset, in words a config error can carry.
func (t Toolset) check() error {
	if t.Mode != ToolsAll && t.Mode != ToolsSearch {
		return fmt.Errorf(`"mode" is %q (every tool the agent may call, the default) or %q (pinned tools and nexus__find_tools), not %q`, ToolsAll, ToolsSearch, t.Mode)
	}
	if t.Mode == ToolsAll && (len(t.Pin) > 0 || t.Budget != 0) {
		return fmt.Errorf(`"pin" and "budget" apply to "mode": %q only`, ToolsSearch)
	}
	for _, p := range t.Pin {
		server, tool, ok := strings.Cut(p, ".")
		switch {
		case p == "*":
		case ok && ValidServerName(server) && (tool == "*" || policy.ValidToolName(tool)):
		default:
			return fmt.Errorf(`pin entry %q is not a tool: write "server.tool", "server.*" or "*"`, p)
		}
	}
	if t.Budget < 0 || t.Budget > MaxToolBudget {
		return fmt.Errorf(`"budget" is a number from 0 (found tools are called through nexus__call_tool) to %d, not %d`, MaxToolBudget, t.Budget)
	}
	return nil
}

// ToolsetFor is the agent's toolset: its own (agents.NAME.tools), else the
// config's default (tools), else every tool.
func (c *Config) ToolsetFor(agent string) Toolset {
	if a, ok := c.Agents[agent]; ok && a.Tools != nil {
		return *a.Tools
	}
	if c.Tools != nil {
		return *c.Tools
	}
	return Toolset{Mode: ToolsAll}
}

// Names configures wire names.
type Names struct {
	// MaxLength is the longest wire name (default 64, what Claude Desktop, Cursor
	// and Codex accept). A client that adds its own prefix (Claude Code's
	// mcp__<server>__) or caps lower (Cursor, at 60) needs less.
	MaxLength int `json:"maxLength,omitempty"`
}

// Wire name bounds.
const (
	DefaultMaxNameLength = 64
	// MinNameLength leaves room for a hash suffix and a readable start.
	MinNameLength = 20
)

// MaxName is MaxLength or its default.
func (n Names) MaxName() int { return orDefault(n.MaxLength, DefaultMaxNameLength) }

// ToolOverride renames a child's tool or rewrites what it says of itself; an
// empty field keeps the child's.
type ToolOverride struct {
	// Name replaces the child's name in the canonical name (<server>.<name>),
	// the wire name, policy entries and memory keys; the child is still called
	// by its own.
	Name        string `json:"name,omitempty"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
}

// overrideNameRE is what an operator may name a tool: what every client accepts.
var overrideNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// checkToolOverrides refuses overrides that could not be applied: a name a
// canonical name cannot hold, or two tools given one name.
func checkToolOverrides(tools map[string]ToolOverride) error {
	given := map[string]string{}
	for _, child := range slices.Sorted(maps.Keys(tools)) {
		o := tools[child]
		if !policy.ValidToolName(child) {
			return fmt.Errorf(`"tools" key %q is not a tool name: write the child's own name for the tool`, child)
		}
		if o.Name == "" {
			continue
		}
		if !overrideNameRE.MatchString(o.Name) {
			return fmt.Errorf(`"tools.%s.name" %q may hold only letters, digits, '_' and '-' (at most 64)`, child, o.Name)
		}
		if other, dup := given[o.Name]; dup {
			return fmt.Errorf(`"tools.%s.name" and "tools.%s.name" are both %q; give each tool its own`, other, child, o.Name)
		}
		given[o.Name] = child
	}
	return nil
}

// takeBadAgentToolsets reports, at agents.NAME.tools, a toolset that does not
// decode, and drops it, so that the agent's other keys are still read and the
// mistake is named where it is (decoding the whole agent would name only the
// agent). It runs before the agents section is decoded.
func (m *merger) takeBadAgentToolsets() {
	for _, name := range slices.Sorted(maps.Keys(m.maps["agents"])) {
		var entry map[string]json.RawMessage
		if json.Unmarshal(m.maps["agents"][name], &entry) != nil || entry["tools"] == nil {
			continue
		}
		var t Toolset
		if err := json.Unmarshal(entry["tools"], &t); err != nil {
			m.errs.add(m.errAt(m.mapFrom["agents"][name], err.Error(), "agents", name, "tools"))
			delete(entry, "tools")
			m.maps["agents"][name], _ = json.Marshal(entry)
		}
	}
}

// buildToolsets checks the toolsets (the default and each agent's) and names.
func (m *merger) buildToolsets(cfg *Config) {
	if raw, ok := m.scalars["tools"]; ok {
		var t Toolset
		err := json.Unmarshal(raw, &t)
		if err == nil {
			err = t.check()
		}
		if err != nil {
			m.errs.add(m.errAt(m.scalarFrom["tools"], err.Error(), "tools"))
		} else {
			cfg.Tools = &t
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Agents)) {
		if t := cfg.Agents[name].Tools; t != nil {
			if err := t.check(); err != nil {
				m.errs.add(m.errAt(m.mapFrom["agents"][name], err.Error(), "agents", name, "tools"))
			}
		}
	}
	m.decodeSection("names", &cfg.Names)
	if n := cfg.Names.MaxLength; n != 0 && (n < MinNameLength || n > DefaultMaxNameLength) {
		m.errs.add(m.errAt(m.mapFrom["names"]["maxLength"], fmt.Sprintf("write a number from %d to %d (default %d)", MinNameLength, DefaultMaxNameLength, DefaultMaxNameLength), "names", "maxLength"))
	}
}

// AgentNames are the agents the config names (in agents or policy.agents) and
// the anonymous one, sorted: those a report per agent shows.
func (c *Config) AgentNames() []string {
	names := map[string]bool{policy.Anonymous: true}
	for n := range c.Agents {
		names[n] = true
	}
	for n := range c.Policy.Agents {
		names[n] = true
	}
	return slices.Sorted(maps.Keys(names))
}

// PinProblems reports the pin entries (of tools and agents.NAME.tools) that name
// no server or tool of known, which maps each server to its tools' names (nil:
// the server's tools are not known yet): a pin that pins nothing is a setting its
// author believes in and does not have.
func (c *Config) PinProblems(known map[string][]string) []string {
	var out []string
	check := func(where string, t *Toolset) {
		if t == nil {
			return
		}
		for i, p := range t.Pin {
			server, tool, _ := strings.Cut(p, ".")
			tools, ok := known[server]
			switch {
			case p == "*":
			case !ok:
				out = append(out, fmt.Sprintf("%s.pin[%d] %q: no server is named %q", where, i, p, server))
			case tool != "*" && tools != nil && !slices.Contains(tools, tool):
				out = append(out, fmt.Sprintf("%s.pin[%d] %q: server %q lists no tool %q", where, i, p, server, tool))
			}
		}
	}
	check("tools", c.Tools)
	for _, name := range slices.Sorted(maps.Keys(c.Agents)) {
		check("agents."+name+".tools", c.Agents[name].Tools)
	}
	return out
}
