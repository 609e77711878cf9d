package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/nexus-mcp/nexus/policy"
)

// Error is a configuration mistake: where it is and what to write instead.
type Error struct {
	File string // the layer that holds the mistake
	Key  string // dotted path of the key, e.g. "servers.github.command"
	Msg  string
}

func (e *Error) Error() string {
	switch {
	case e.Key == "":
		return fmt.Sprintf("config %s: %s", e.File, e.Msg)
	default:
		return fmt.Sprintf("config %s: %s: %s", e.File, e.Key, e.Msg)
	}
}

// Keys a user may write, per level. Kept beside the structs they mirror.
var (
	topKeys = []string{"servers", "mcpServers", "toolNames", "maxMessageBytes", "policy",
		"agents", "ttl", "cache", "invalidate", "memory", "secrets", "locked", "projectLayers"}
	serverKeys = []string{"transport", "command", "args", "env", "cwd", "url", "headers",
		"timeout", "prefix", "disabled", "protocolVersion", "annotations", "cacheScope"}
	// Claude Desktop's, Cursor's and VS Code's mcpServers entries.
	mcpServersKeys = []string{"command", "args", "env", "cwd", "url", "headers", "type", "disabled", "timeout"}
)

// Layer is one config file in the stack.
type Layer struct {
	Path string
	// Optional layers may be missing (the personal file need not exist yet).
	Optional bool
	// Shared layers (team files, a project's .nexus/config.json) may be read by
	// others: a literal secret in one is refused.
	Shared bool
}

// Load reads the layers in order (later ones win) and returns the validated merged
// configuration. A missing file is an error unless it is optional.
func Load(layers []string, optional map[string]bool) (*Config, error) {
	ls := make([]Layer, len(layers))
	for i, p := range layers {
		ls[i] = Layer{Path: p, Optional: optional[p]}
	}
	return LoadLayers(ls)
}

// LoadLayers is Load with each layer's role spelled out.
func LoadLayers(layers []Layer) (*Config, error) {
	m := newMerger()
	var paths []string
	for _, l := range layers {
		data, err := os.ReadFile(l.Path)
		if errors.Is(err, fs.ErrNotExist) && l.Optional {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading config layer: %w", err)
		}
		if err := m.add(l.Path, data); err != nil {
			return nil, err
		}
		if l.Shared {
			if err := refuseLiteralSecrets(l.Path, data); err != nil {
				return nil, err
			}
		}
		paths = append(paths, l.Path)
	}
	cfg, err := m.build()
	if err != nil {
		return nil, err
	}
	cfg.Layers = paths
	return cfg, nil
}

// Parse validates one document on its own, as if it were the only layer.
func Parse(name string, data []byte) (*Config, error) {
	m := newMerger()
	if err := m.add(name, data); err != nil {
		return nil, err
	}
	return m.build()
}

// merger accumulates layers key by key.
type merger struct {
	servers    map[string]map[string]json.RawMessage
	serverFrom map[string]string // server -> last layer that touched it
	scalars    map[string]json.RawMessage
	scalarFrom map[string]string
	maps       map[string]map[string]json.RawMessage // agents, ttl, cache, invalidate, memory
	policy     map[string]*policyRules               // "policy.default", "policy.agents.NAME"
	policyFrom map[string]string
	locked     map[string]string // setting path -> layer that locked it
}

// policyRules accumulate across layers: deny entries add up (a team's "never" cannot
// be dropped by a personal file), allow comes from the most specific layer that says
// anything about it.
type policyRules struct {
	allow    []string
	hasAllow bool
	deny     []string
}

func newMerger() *merger {
	return &merger{
		servers: map[string]map[string]json.RawMessage{}, serverFrom: map[string]string{},
		scalars: map[string]json.RawMessage{}, scalarFrom: map[string]string{},
		maps:   map[string]map[string]json.RawMessage{},
		policy: map[string]*policyRules{}, policyFrom: map[string]string{}, locked: map[string]string{},
	}
}

func decodeObject(file, key string, data []byte) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&obj); err != nil || obj == nil {
		what := "an object"
		if key == "" {
			what = "a JSON object"
		}
		msg := fmt.Sprintf("must be %s", what)
		if err != nil {
			msg += fmt.Sprintf(" (%v)", err)
		}
		return nil, &Error{File: file, Key: key, Msg: msg}
	}
	if dec.More() {
		return nil, &Error{File: file, Key: key, Msg: "has trailing data after the JSON object"}
	}
	return obj, nil
}

func unknownKey(file, path, key string, valid []string) error {
	msg := fmt.Sprintf("unknown key %q", key)
	if near := closest(key, valid); near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", near)
	}
	msg += "; valid keys: " + strings.Join(valid, ", ")
	return &Error{File: file, Key: joinKey(path, key), Msg: msg}
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (m *merger) add(file string, data []byte) error {
	top, err := decodeObject(file, "", data)
	if err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if !slices.Contains(topKeys, k) {
			return unknownKey(file, "", k, topKeys)
		}
	}
	touched := func(path string) error {
		for lockPath, by := range m.locked {
			if by != file && (path == lockPath || strings.HasPrefix(path, lockPath+".")) {
				return &Error{File: file, Key: path, Msg: fmt.Sprintf("%s is locked by %s; remove it from this file (a later layer cannot loosen a locked setting)", lockPath, by)}
			}
		}
		return nil
	}
	seen := map[string]string{}
	for _, section := range []string{"servers", "mcpServers"} {
		raw, ok := top[section]
		if !ok {
			continue
		}
		entries, err := decodeObject(file, section, raw)
		if err != nil {
			return err
		}
		for _, name := range slices.Sorted(maps.Keys(entries)) {
			path := section + "." + name
			if !ValidServerName(name) {
				return &Error{File: file, Key: path, Msg: "a server name is 1-32 lower-case letters, digits or '-', starting with a letter or digit (e.g. \"code-kg\")"}
			}
			if other, dup := seen[name]; dup {
				return &Error{File: file, Key: path, Msg: fmt.Sprintf("also defined under %q in the same file; keep one", other)}
			}
			seen[name] = section
			entry, err := decodeObject(file, path, entries[name])
			if err != nil {
				return err
			}
			if section == "mcpServers" {
				if entry, err = fromMCPServers(file, path, entry); err != nil {
					return err
				}
			}
			for _, k := range slices.Sorted(maps.Keys(entry)) {
				if !slices.Contains(serverKeys, k) {
					return unknownKey(file, path, k, serverKeys)
				}
			}
			if err := touched("servers." + name); err != nil {
				return err
			}
			merged := m.servers[name]
			if merged == nil {
				merged = map[string]json.RawMessage{}
				m.servers[name] = merged
			}
			// Annotation overrides merge tool by tool; every other key is replaced.
			if ann, ok := entry["annotations"]; ok && merged["annotations"] != nil {
				prev, err1 := decodeObject(file, path+".annotations", merged["annotations"])
				next, err2 := decodeObject(file, path+".annotations", ann)
				if err := errors.Join(err1, err2); err != nil {
					return err
				}
				maps.Copy(prev, next)
				entry["annotations"], _ = json.Marshal(prev)
			}
			maps.Copy(merged, entry)
			m.serverFrom[name] = file
		}
	}
	for _, k := range []string{"toolNames", "maxMessageBytes", "projectLayers"} {
		if raw, ok := top[k]; ok {
			if err := touched(k); err != nil {
				return err
			}
			m.scalars[k] = raw
			m.scalarFrom[k] = file
		}
	}
	for _, k := range []string{"agents", "ttl", "cache", "invalidate", "memory", "secrets"} {
		raw, ok := top[k]
		if !ok {
			continue
		}
		obj, err := decodeObject(file, k, raw)
		if err != nil {
			return err
		}
		for _, sub := range slices.Sorted(maps.Keys(obj)) {
			if err := touched(k + "." + sub); err != nil {
				return err
			}
		}
		if m.maps[k] == nil {
			m.maps[k] = map[string]json.RawMessage{}
		}
		maps.Copy(m.maps[k], obj)
	}
	if raw, ok := top["policy"]; ok {
		obj, err := decodeObject(file, "policy", raw)
		if err != nil {
			return err
		}
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			switch k {
			case "default":
				if err := m.addPolicy(file, "policy.default", obj[k], touched); err != nil {
					return err
				}
			case "agents":
				agents, err := decodeObject(file, "policy.agents", obj[k])
				if err != nil {
					return err
				}
				for _, name := range slices.Sorted(maps.Keys(agents)) {
					if err := m.addPolicy(file, "policy.agents."+name, agents[name], touched); err != nil {
						return err
					}
				}
			default:
				return unknownKey(file, "policy", k, []string{"default", "agents"})
			}
		}
	}
	// Locks apply to the layers after this one.
	if raw, ok := top["locked"]; ok {
		var paths []string
		if err := json.Unmarshal(raw, &paths); err != nil {
			return &Error{File: file, Key: "locked", Msg: `write a list of setting paths, e.g. ["policy.default", "servers.code-kg", "ttl"]`}
		}
		for _, p := range paths {
			if p == "" || !slices.Contains(topKeys, strings.SplitN(p, ".", 2)[0]) || p == "locked" {
				return &Error{File: file, Key: "locked", Msg: fmt.Sprintf("%q is not a setting path; write e.g. \"policy.default\", \"policy.agents.NAME\", \"servers.NAME\", \"ttl\" or \"memory\"", p)}
			}
			if _, already := m.locked[p]; !already {
				m.locked[p] = file
			}
		}
	}
	return nil
}

// addPolicy folds one layer's rules for path into the accumulated ones. A locked
// policy may still gain deny entries: that only tightens it.
func (m *merger) addPolicy(file, path string, raw json.RawMessage, touched func(string) error) error {
	obj, err := decodeObject(file, path, raw)
	if err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if k != "allow" && k != "deny" {
			return unknownKey(file, path, k, []string{"allow", "deny"})
		}
	}
	var r policy.Rules
	if err := DecodeStrict(raw, &r); err != nil {
		return &Error{File: file, Key: path, Msg: err.Error() + ` (write {"allow": [...], "deny": [...]})`}
	}
	acc := m.policy[path]
	if acc == nil {
		acc = &policyRules{}
		m.policy[path] = acc
	}
	if _, ok := obj["allow"]; ok {
		if err := touched(path); err != nil {
			return err
		}
		acc.allow, acc.hasAllow = r.Allow, true
	}
	for _, d := range r.Deny {
		if !slices.Contains(acc.deny, d) {
			acc.deny = append(acc.deny, d)
		}
	}
	m.policyFrom[path] = file
	return nil
}

// fromMCPServers turns a Claude Desktop / Cursor style entry into a Nexus one.
func fromMCPServers(file, path string, e map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	for _, k := range slices.Sorted(maps.Keys(e)) {
		if !slices.Contains(mcpServersKeys, k) {
			return nil, unknownKey(file, path, k, mcpServersKeys)
		}
	}
	out := maps.Clone(e)
	delete(out, "type")
	transport := TransportStdio
	if _, hasURL := e["url"]; hasURL {
		transport = TransportStreamableHTTP
		var typ string
		if raw, ok := e["type"]; ok && json.Unmarshal(raw, &typ) == nil && typ == "sse" {
			transport = TransportSSE
		}
	}
	out["transport"], _ = json.Marshal(transport)
	return out, nil
}

func (m *merger) build() (*Config, error) {
	cfg := &Config{Servers: map[string]*Server{}}
	for _, name := range slices.Sorted(maps.Keys(m.servers)) {
		file := m.serverFrom[name]
		path := "servers." + name
		raw, _ := json.Marshal(m.servers[name])
		s := &Server{}
		if err := DecodeStrict(raw, s); err != nil {
			return nil, &Error{File: file, Key: path, Msg: err.Error()}
		}
		s.Name, s.Source = name, file
		if err := validateServer(s); err != nil {
			return nil, &Error{File: file, Key: path, Msg: err.Error()}
		}
		cfg.Servers[name] = s
	}
	if raw, ok := m.scalars["toolNames"]; ok {
		if err := json.Unmarshal(raw, &cfg.ToolNames); err != nil || (cfg.ToolNames != ToolNamesWire && cfg.ToolNames != ToolNamesDotted) {
			return nil, &Error{File: m.scalarFrom["toolNames"], Key: "toolNames", Msg: `write "wire" (default: <server>__<tool>) or "dotted" (<server>.<tool>)`}
		}
	}
	if raw, ok := m.scalars["maxMessageBytes"]; ok {
		if err := json.Unmarshal(raw, &cfg.MaxMessageBytes); err != nil || cfg.MaxMessageBytes < 1024 {
			return nil, &Error{File: m.scalarFrom["maxMessageBytes"], Key: "maxMessageBytes", Msg: "write a number of bytes of at least 1024 (default 4194304)"}
		}
	}
	decodeSection := func(key string, v any) error {
		obj, ok := m.maps[key]
		if !ok {
			return nil
		}
		raw, _ := json.Marshal(obj)
		if err := DecodeStrict(raw, v); err != nil {
			return &Error{File: "(merged layers)", Key: key, Msg: err.Error()}
		}
		return nil
	}
	for key, v := range map[string]any{"agents": &cfg.Agents, "ttl": &cfg.TTL, "cache": &cfg.Cache,
		"invalidate": &cfg.Invalidate, "memory": &cfg.Memory, "secrets": &cfg.Secrets} {
		if err := decodeSection(key, v); err != nil {
			return nil, err
		}
	}
	for name, a := range cfg.Agents {
		if !policy.ValidAgentName(name) {
			return nil, &Error{File: "(merged layers)", Key: "agents." + name, Msg: "an agent name is 1-32 lower-case letters, digits or '-'"}
		}
		if a.TokenSHA256 != "" && !isHex64(a.TokenSHA256) {
			return nil, &Error{File: "(merged layers)", Key: "agents." + name + ".tokenSha256", Msg: "write the 64-character hex SHA-256 of the token (nexus agent add NAME does it for you), never the token"}
		}
	}
	for _, path := range slices.Sorted(maps.Keys(m.policy)) {
		acc := m.policy[path]
		r := policy.Rules{Deny: acc.deny}
		switch {
		case acc.hasAllow:
			r.Allow = acc.allow
		case path != "policy.default" && len(acc.deny) > 0:
			// Only denies were said for this agent: they tighten whatever it would
			// otherwise get, rather than leaving it with nothing allowed.
			if d, ok := m.policy["policy.default"]; ok && d.hasAllow {
				r.Allow = d.allow
			} else {
				r.Allow = policy.BuiltinDefault().Allow
			}
		}
		if path == "policy.default" {
			cfg.Policy.Default = &r
			continue
		}
		if cfg.Policy.Agents == nil {
			cfg.Policy.Agents = map[string]policy.Rules{}
		}
		cfg.Policy.Agents[strings.TrimPrefix(path, "policy.agents.")] = r
	}
	cfg.Policy.Sources = maps.Clone(m.policyFrom)
	if raw, ok := m.scalars["projectLayers"]; ok {
		if err := json.Unmarshal(raw, &cfg.ProjectLayers); err != nil {
			return nil, &Error{File: m.scalarFrom["projectLayers"], Key: "projectLayers", Msg: "write true or false"}
		}
	}
	cfg.Locked = maps.Clone(m.locked)
	if _, err := policy.Compile(cfg.Policy); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return cfg, nil
}

// DecodeStrict decodes raw into v refusing unknown fields, with the error text
// stripped of its "json: " prefix so it reads well inside a config error.
func DecodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

func validateServer(s *Server) error {
	switch s.Transport {
	case "":
		switch {
		case s.Command != "":
			s.Transport = TransportStdio
		case s.URL != "":
			s.Transport = TransportStreamableHTTP
		default:
			return fmt.Errorf(`needs "command" (a local stdio server) or "url" (a remote one)`)
		}
	case TransportStdio, TransportSSE, TransportStreamableHTTP:
	default:
		return fmt.Errorf("transport %q is unknown; write %q, %q or %q", s.Transport, TransportStdio, TransportSSE, TransportStreamableHTTP)
	}
	switch s.Transport {
	case TransportStdio:
		if s.Command == "" {
			return fmt.Errorf(`a stdio server needs "command": the program to run (e.g. "npx"), with its arguments in "args"`)
		}
		if s.URL != "" {
			return fmt.Errorf(`a stdio server takes no "url"; remove it or set "transport" to %q`, TransportStreamableHTTP)
		}
	default:
		if s.URL == "" {
			return fmt.Errorf(`a %s server needs "url" (e.g. "https://host/mcp")`, s.Transport)
		}
		if !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") {
			return fmt.Errorf(`"url" must start with http:// or https://, got %q`, s.URL)
		}
		if s.Command != "" {
			return fmt.Errorf(`a %s server takes no "command"; remove it or set "transport" to "stdio"`, s.Transport)
		}
	}
	if s.Prefix != nil && *s.Prefix != "" && !wirePrefixRE.MatchString(*s.Prefix) {
		return fmt.Errorf(`"prefix" %q may hold only letters, digits, '_' and '-' (at most 32)`, *s.Prefix)
	}
	switch s.CacheScope {
	case "", "server", "agent":
	default:
		return fmt.Errorf(`"cacheScope" is "server" (default) or "agent", not %q`, s.CacheScope)
	}
	return nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}

// closest returns the candidate nearest to s by edit distance, if near enough.
func closest(s string, candidates []string) string {
	best, bestD := "", len(s)/2+2
	for _, c := range candidates {
		if d := Levenshtein(strings.ToLower(s), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// Levenshtein is the edit distance between a and b.
func Levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
