package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/nexus-mcp/nexus/internal/suggest"
	"io"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/nexus-mcp/nexus/policy"
)

// Keys a user may write, per level. Kept beside the structs they mirror.
var (
	topKeys = []string{"servers", "mcpServers", "toolNames", "maxMessageBytes", "maxChildMessageBytes", "policy",
		"agents", "ttl", "staleIfError", "cache", "invalidate", "memory", "secrets", "audit", "tracing", "status", "http", "reload", "limits", "locked", "projectLayers", "tools", "names", "children"}
	serverKeys = []string{"transport", "command", "args", "env", "cwd", "url", "headers",
		"timeout", "prefix", "disabled", "protocolVersion", "annotations", "cacheScope", "catalog", "tools", "auth", "oauth", "sessions", "maxSessions", "maxSessionsPerAgent",
		"start", "idleTimeout", "maxLifetime", "pin", "pins"}
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

// LoadLayers is Load with each layer's role spelled out. It reports every mistake
// of every layer, each once, joined (Problems splits them).
func LoadLayers(layers []Layer) (*Config, error) {
	m := newMerger()
	var paths []string
	for _, l := range layers {
		data, err := os.ReadFile(l.Path)
		if errors.Is(err, fs.ErrNotExist) && l.Optional {
			continue
		}
		if err != nil {
			m.errs.add(readError(l.Path, err))
			continue
		}
		if !m.add(l.Path, data) {
			continue
		}
		if l.Shared {
			m.errs.add(refuseLiteralSecrets(l.Path, data))
		}
		paths = append(paths, l.Path)
	}
	cfg := m.build()
	if err := m.errs.err(); err != nil {
		return nil, err
	}
	cfg.Layers = paths
	return cfg, nil
}

// readError is a layer that cannot be read, said without repeating its path.
func readError(path string, err error) *Error {
	if errors.Is(err, fs.ErrNotExist) {
		return &Error{File: path, Msg: "does not exist: check the path given with --config or NEXUS_CONFIG"}
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &Error{File: path, Msg: "cannot be read: " + err.Error()}
}

// Parse validates one document on its own, as if it were the only layer.
func Parse(name string, data []byte) (*Config, error) {
	m := newMerger()
	m.add(name, data)
	cfg := m.build()
	if err := m.errs.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// merger accumulates layers key by key, and the mistakes found on the way.
type merger struct {
	servers    map[string]map[string]json.RawMessage
	serverFrom map[string]string            // server -> last layer that touched it
	keyFrom    map[string]map[string]string // server -> key -> layer that set it
	scalars    map[string]json.RawMessage
	scalarFrom map[string]string
	maps       map[string]map[string]json.RawMessage // agents, ttl, cache, invalidate, memory
	mapFrom    map[string]map[string]string          // section -> key -> layer that set it
	policy     map[string]*policyRules               // "policy.default", "policy.agents.NAME"
	policyFrom map[string]string
	locked     map[string]string // setting path -> layer that locked it
	data       map[string][]byte // layer -> its bytes, to locate keys
	errs       problems
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
		servers: map[string]map[string]json.RawMessage{}, serverFrom: map[string]string{}, keyFrom: map[string]map[string]string{},
		scalars: map[string]json.RawMessage{}, scalarFrom: map[string]string{},
		maps: map[string]map[string]json.RawMessage{}, mapFrom: map[string]map[string]string{},
		policy: map[string]*policyRules{}, policyFrom: map[string]string{}, locked: map[string]string{},
		data: map[string][]byte{},
	}
}

// errAt is a mistake at the key path (its segments) of file, located in the file's
// text when the key is there.
func (m *merger) errAt(file, msg string, path ...string) *Error {
	e := &Error{File: file, Key: strings.Join(path, "."), Msg: msg}
	if data := m.data[file]; data != nil {
		e.Line, e.Col = position(data, path...)
		if e.Line == 0 && len(path) > 1 && path[0] == "servers" {
			e.Line, e.Col = position(data, append([]string{"mcpServers"}, path[1:]...)...)
		}
	}
	return e
}

// object decodes raw as a JSON object, recording a mistake at path if it is none.
func (m *merger) object(file string, raw json.RawMessage, path ...string) (map[string]json.RawMessage, bool) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		m.errs.add(m.errAt(file, fmt.Sprintf("must be an object ({...}), not %s", describe(raw)), path...))
		return nil, false
	}
	return obj, true
}

// describe names the kind of a JSON value for an error message.
func describe(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '[':
		return "a list"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// decodeDocument reads a whole layer: one JSON object, nothing after it.
func decodeDocument(file string, data []byte) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&obj); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, &Error{File: file, Line: 1, Col: 1, Msg: "the file must hold one JSON object ({...})"}
		}
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: file, Msg: "the file is empty; write {} at least"}
		}
		return nil, syntaxError(file, data, err)
	}
	if obj == nil {
		return nil, &Error{File: file, Line: 1, Col: 1, Msg: "the file must hold one JSON object ({...})"}
	}
	if _, err := dec.Token(); err != io.EOF {
		line, col := lineCol(data, skipSeparators(data, dec.InputOffset()))
		return nil, &Error{File: file, Line: line, Col: col, Msg: "trailing data after the JSON object; a file holds one object"}
	}
	return obj, nil
}

func (m *merger) unknownKey(file, key string, valid []string, path ...string) {
	msg := fmt.Sprintf("unknown key %q", key)
	if where := misplaced(key, path); where != "" {
		msg += " (" + where + ")"
	} else if near := suggest.Closest(key, valid); near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", near)
	}
	msg += "; valid keys: " + strings.Join(valid, ", ")
	m.errs.add(m.errAt(file, msg, append(path, key)...))
}

// misplaced says where key belongs when it is a top-level key written inside a
// section (a server's "ttl"): the right place, not the nearest spelling of a key
// of the section ("url"), is what the person needs.
func misplaced(key string, path []string) string {
	if len(path) == 0 || !slices.Contains(topKeys, key) {
		return ""
	}
	where := fmt.Sprintf("%q is a top-level key, beside \"servers\"", key)
	if byTool := []string{"ttl", "cache", "staleIfError", "invalidate"}; len(path) == 2 && path[0] == "servers" && slices.Contains(byTool, key) {
		where += fmt.Sprintf(", keyed by tool: \"%s\": {\"%s.*\": ...}", key, path[1])
	}
	return where
}

// add merges one layer; false when the layer is not a JSON object at all.
func (m *merger) add(file string, data []byte) bool {
	m.data[file] = data
	top, err := decodeDocument(file, data)
	if err != nil {
		m.errs.add(err)
		return false
	}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if !slices.Contains(topKeys, k) {
			m.unknownKey(file, k, topKeys)
		}
	}
	touched := func(path ...string) bool {
		dotted := strings.Join(path, ".")
		for _, lockPath := range slices.Sorted(maps.Keys(m.locked)) {
			by := m.locked[lockPath]
			if by != file && (dotted == lockPath || strings.HasPrefix(dotted, lockPath+".")) {
				m.errs.add(m.errAt(file, fmt.Sprintf("%s is locked by %s; remove it from this file (a later layer cannot loosen a locked setting)", lockPath, by), path...))
				return false
			}
		}
		return true
	}
	m.addServers(file, top, touched)
	for _, k := range []string{"toolNames", "maxMessageBytes", "maxChildMessageBytes", "projectLayers", "tools"} {
		if raw, ok := top[k]; ok && touched(k) {
			m.scalars[k] = raw
			m.scalarFrom[k] = file
		}
	}
	for _, k := range []string{"agents", "ttl", "staleIfError", "cache", "invalidate", "memory", "secrets", "audit", "tracing", "status", "http", "reload", "limits", "names", "children"} {
		raw, ok := top[k]
		if !ok {
			continue
		}
		obj, ok := m.object(file, raw, k)
		if !ok {
			continue
		}
		if m.maps[k] == nil {
			m.maps[k], m.mapFrom[k] = map[string]json.RawMessage{}, map[string]string{}
		}
		for _, sub := range slices.Sorted(maps.Keys(obj)) {
			if touched(k, sub) {
				m.maps[k][sub], m.mapFrom[k][sub] = obj[sub], file
			}
		}
	}
	if raw, ok := top["policy"]; ok {
		m.addPolicies(file, raw, touched)
	}
	// Locks apply to the layers after this one.
	if raw, ok := top["locked"]; ok {
		m.addLocks(file, raw)
	}
	return true
}

// addServers merges the layer's servers and mcpServers entries.
func (m *merger) addServers(file string, top map[string]json.RawMessage, touched func(...string) bool) {
	seen := map[string]string{}
	for _, section := range []string{"servers", "mcpServers"} {
		raw, ok := top[section]
		if !ok {
			continue
		}
		entries, ok := m.object(file, raw, section)
		if !ok {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(entries)) {
			if !ValidServerName(name) {
				m.errs.add(m.errAt(file, "a server name is 1-32 lower-case letters, digits or '-', starting with a letter or digit (e.g. \"code-kg\")", section, name))
				continue
			}
			if other, dup := seen[name]; dup {
				m.errs.add(m.errAt(file, fmt.Sprintf("also defined under %q in the same file; keep one", other), section, name))
				continue
			}
			seen[name] = section
			entry, ok := m.object(file, entries[name], section, name)
			if !ok {
				continue
			}
			if section == "mcpServers" {
				if entry = m.fromMCPServers(file, name, entry); entry == nil {
					continue
				}
			}
			for _, k := range slices.Sorted(maps.Keys(entry)) {
				if !slices.Contains(serverKeys, k) {
					m.unknownKey(file, k, serverKeys, section, name)
					delete(entry, k)
				}
			}
			if !touched("servers", name) {
				continue
			}
			m.mergeServer(file, name, entry)
		}
	}
}

// mergeServer folds one layer's entry for a server into the accumulated one.
func (m *merger) mergeServer(file, name string, entry map[string]json.RawMessage) {
	merged := m.servers[name]
	if merged == nil {
		merged = map[string]json.RawMessage{}
		m.servers[name], m.keyFrom[name] = merged, map[string]string{}
	}
	// Annotation and tool overrides, and pins, merge tool by tool; every other key is
	// replaced.
	for _, byTool := range []string{"annotations", "tools", "pins"} {
		if next, ok := entry[byTool]; ok && merged[byTool] != nil {
			prev, ok1 := m.object(file, merged[byTool], "servers", name, byTool)
			next, ok2 := m.object(file, next, "servers", name, byTool)
			if ok1 && ok2 {
				maps.Copy(prev, next)
				entry[byTool], _ = json.Marshal(prev)
			}
		}
	}
	maps.Copy(merged, entry)
	for k := range entry {
		m.keyFrom[name][k] = file
	}
	m.serverFrom[name] = file
}

// addPolicies merges the layer's policy section.
func (m *merger) addPolicies(file string, raw json.RawMessage, touched func(...string) bool) {
	obj, ok := m.object(file, raw, "policy")
	if !ok {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		switch k {
		case "default":
			m.addPolicy(file, obj[k], touched, "policy", "default")
		case "agents":
			agents, ok := m.object(file, obj[k], "policy", "agents")
			if !ok {
				continue
			}
			for _, name := range slices.Sorted(maps.Keys(agents)) {
				m.addPolicy(file, agents[name], touched, "policy", "agents", name)
			}
		default:
			m.unknownKey(file, k, []string{"default", "agents"}, "policy")
		}
	}
}

// addLocks records the setting paths a layer locks for the layers after it.
func (m *merger) addLocks(file string, raw json.RawMessage) {
	var paths []string
	if err := json.Unmarshal(raw, &paths); err != nil {
		m.errs.add(m.errAt(file, `write a list of setting paths, e.g. ["policy.default", "servers.code-kg", "ttl"]`, "locked"))
		return
	}
	for _, p := range paths {
		if p == "" || !slices.Contains(topKeys, strings.SplitN(p, ".", 2)[0]) || p == "locked" {
			m.errs.add(m.errAt(file, fmt.Sprintf("%q is not a setting path; write e.g. \"policy.default\", \"policy.agents.NAME\", \"servers.NAME\", \"ttl\" or \"memory\"", p), "locked"))
			continue
		}
		if _, already := m.locked[p]; !already {
			m.locked[p] = file
		}
	}
}

// addPolicy folds one layer's rules for path into the accumulated ones. A locked
// policy may still gain deny entries: that only tightens it.
func (m *merger) addPolicy(file string, raw json.RawMessage, touched func(...string) bool, path ...string) {
	obj, ok := m.object(file, raw, path...)
	if !ok {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if k != "allow" && k != "deny" {
			m.unknownKey(file, k, []string{"allow", "deny"}, path...)
		}
	}
	var r policy.Rules
	for _, k := range []string{"allow", "deny"} {
		var list []string
		if v, ok := obj[k]; ok && json.Unmarshal(v, &list) != nil {
			m.errs.add(m.errAt(file, `write a list of tool names or patterns, e.g. ["@readonly", "code-kg.*"]`, append(path, k)...))
			return
		}
		if k == "allow" {
			r.Allow = list
		} else {
			r.Deny = list
		}
	}
	dotted := strings.Join(path, ".")
	acc := m.policy[dotted]
	if acc == nil {
		acc = &policyRules{}
		m.policy[dotted] = acc
	}
	if _, ok := obj["allow"]; ok && touched(path...) {
		acc.allow, acc.hasAllow = r.Allow, true
	}
	for _, d := range r.Deny {
		if !slices.Contains(acc.deny, d) {
			acc.deny = append(acc.deny, d)
		}
	}
	m.policyFrom[dotted] = file
}

// fromMCPServers turns a Claude Desktop / Cursor style entry into a Nexus one,
// recording unknown keys and an unknown type as mistakes; nil when it cannot.
func (m *merger) fromMCPServers(file, name string, e map[string]json.RawMessage) map[string]json.RawMessage {
	out, unknown, err := ClientEntry(e)
	for _, k := range unknown {
		m.unknownKey(file, k, clientEntryKeys, "mcpServers", name)
	}
	if err != nil {
		m.errs.add(m.errAt(file, err.Error(), "mcpServers", name, "type"))
		return nil
	}
	return out
}

// build decodes the merged layers into a Config, recording every mistake; the
// Config is only meaningful when none was found.
func (m *merger) build() *Config {
	cfg := &Config{Servers: map[string]*Server{}}
	for _, name := range slices.Sorted(maps.Keys(m.servers)) {
		if s := m.buildServer(name); s != nil {
			cfg.Servers[name] = s
		}
	}
	if raw, ok := m.scalars["toolNames"]; ok {
		if err := json.Unmarshal(raw, &cfg.ToolNames); err != nil || (cfg.ToolNames != ToolNamesWire && cfg.ToolNames != ToolNamesDotted) {
			m.errs.add(m.errAt(m.scalarFrom["toolNames"], `write "wire" (default: <server>__<tool>) or "dotted" (<server>.<tool>)`, "toolNames"))
		}
	}
	if raw, ok := m.scalars["maxMessageBytes"]; ok {
		if err := json.Unmarshal(raw, &cfg.MaxMessageBytes); err != nil || cfg.MaxMessageBytes < 1024 {
			m.errs.add(m.errAt(m.scalarFrom["maxMessageBytes"], "write a number of bytes of at least 1024 (default 4194304)", "maxMessageBytes"))
		}
	}
	if raw, ok := m.scalars["maxChildMessageBytes"]; ok {
		if err := json.Unmarshal(raw, &cfg.MaxChildMessageBytes); err != nil || cfg.MaxChildMessageBytes < 1024 {
			m.errs.add(m.errAt(m.scalarFrom["maxChildMessageBytes"], "write a number of bytes of at least 1024 (default 67108864)", "maxChildMessageBytes"))
		}
	}
	if raw, ok := m.scalars["projectLayers"]; ok {
		if err := json.Unmarshal(raw, &cfg.ProjectLayers); err != nil {
			m.errs.add(m.errAt(m.scalarFrom["projectLayers"], "write true or false", "projectLayers"))
		}
	}
	m.takeBadAgentToolsets()
	m.decodeSection("agents", &cfg.Agents)
	m.decodeSection("ttl", &cfg.TTL)
	m.decodeSection("staleIfError", &cfg.StaleIfError)
	m.decodeSection("cache", &cfg.Cache)
	m.decodeSection("invalidate", &cfg.Invalidate)
	m.decodeSection("memory", &cfg.Memory)
	m.decodeSection("secrets", &cfg.Secrets)
	m.buildObserve(cfg)
	m.buildExposure(cfg)
	m.buildLimits(cfg)
	m.buildChildren(cfg)
	for _, name := range slices.Sorted(maps.Keys(cfg.Agents)) {
		file := m.mapFrom["agents"][name]
		if !policy.ValidAgentName(name) {
			m.errs.add(m.errAt(file, "an agent name is 1-32 lower-case letters, digits or '-'", "agents", name))
		}
		if tok := cfg.Agents[name].TokenSHA256; tok != "" && !isHex64(tok) {
			m.errs.add(m.errAt(file, "write the 64-character hex SHA-256 of the token (nexus agent add NAME does it for you), never the token", "agents", name, "tokenSha256"))
		}
	}
	m.buildToolsets(cfg)
	m.buildPolicy(cfg)
	cfg.Locked = maps.Clone(m.locked)
	m.buildMemoryRules(cfg)
	return cfg
}

// buildServer decodes one merged server entry key by key, so that each mistake
// names its key (a duration's own error does not), and then checks the whole.
func (m *merger) buildServer(name string) *Server {
	entry, from := m.servers[name], m.keyFrom[name]
	ok := true
	for _, k := range slices.Sorted(maps.Keys(entry)) {
		one, _ := json.Marshal(map[string]json.RawMessage{k: entry[k]})
		if err := DecodeStrict(one, &Server{}); err != nil {
			m.errs.add(m.errAt(from[k], fieldError(err), "servers", name, k))
			ok = false
		}
	}
	if !ok {
		return nil
	}
	raw, _ := json.Marshal(entry)
	s := &Server{}
	if err := DecodeStrict(raw, s); err != nil {
		m.errs.add(m.errAt(m.serverFrom[name], err.Error(), "servers", name))
		return nil
	}
	s.Name, s.Source = name, m.serverFrom[name]
	if err := validateServer(s); err != nil {
		m.errs.add(m.errAt(m.serverFrom[name], err.Error(), "servers", name))
		return nil
	}
	return s
}

// fieldError is a decoding error without encoding/json's Go-side wording ("cannot
// unmarshal string into Go struct field Server.args of type []string").
func fieldError(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "cannot unmarshal "); i >= 0 {
		rest := msg[i+len("cannot unmarshal "):]
		if kind, _, ok := strings.Cut(rest, " into "); ok {
			want := "another type"
			if j := strings.LastIndex(rest, " of type "); j >= 0 {
				want = goTypeInWords(rest[j+len(" of type "):])
			}
			return fmt.Sprintf("must be %s, not %s", want, withArticle(kind))
		}
	}
	return msg
}

func goTypeInWords(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "an object"
	case t == "string":
		return "a string"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "float"):
		return "a number"
	}
	return "an object"
}

func withArticle(kind string) string {
	switch kind {
	case "array":
		return "a list"
	case "object":
		return "an object"
	case "number", "string", "bool":
		return "a " + kind
	}
	return kind
}

// decodeSection decodes a merged by-key section (agents, ttl, cache...) entry by
// entry, so that each mistake names its key and the layer that wrote it.
func (m *merger) decodeSection(section string, v any) {
	obj, ok := m.maps[section]
	if !ok {
		return
	}
	raw, _ := json.Marshal(obj)
	if err := DecodeStrict(raw, v); err == nil {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		one, _ := json.Marshal(map[string]json.RawMessage{k: obj[k]})
		probe := reflect.New(reflect.TypeOf(v).Elem()).Interface()
		if err := DecodeStrict(one, probe); err != nil {
			msg := fieldError(err)
			if strings.HasPrefix(msg, "unknown field") {
				m.unknownKey(m.mapFrom[section][k], k, jsonKeys(v), section)
				continue
			}
			m.errs.add(m.errAt(m.mapFrom[section][k], msg, section, k))
		}
	}
}

// jsonKeys lists the JSON keys of the struct v points to (nil for a map).
func jsonKeys(v any) []string {
	t := reflect.TypeOf(v).Elem()
	if t.Kind() != reflect.Struct {
		return nil
	}
	var keys []string
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}

// buildPolicy turns the accumulated rules into the config's policy and compiles it.
func (m *merger) buildPolicy(cfg *Config) {
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
	_, err := policy.Compile(cfg.Policy)
	var pe *policy.Error
	if !errors.As(err, &pe) {
		m.errs.add(err)
		return
	}
	for _, p := range pe.Problems {
		// p.Where is e.g. "policy.agents.coder.allow[2]"; its file is the policy's.
		owner := p.Where
		for _, list := range []string{".allow", ".deny"} {
			if before, _, ok := strings.Cut(p.Where, list); ok {
				owner = before
				break
			}
		}
		path := strings.SplitN(owner, ".", 3)
		e := m.errAt(m.policyFrom[owner], fmt.Sprintf("%q: %s", p.Entry, p.Message), path...)
		e.Key = p.Where
		m.errs.add(e)
	}
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
	if v := s.ProtocolVersion; v != "" && !slices.Contains(ProtocolVersions, v) {
		return fmt.Errorf(`"protocolVersion" is one of %s, not %q; leave it unset to let Nexus find the server's era (server/discover, then initialize)`, strings.Join(ProtocolVersions, ", "), v)
	}
	if s.ProtocolVersion == ModernProtocolVersion && s.Transport == TransportSSE {
		return fmt.Errorf(`"protocolVersion" %s needs the streamable-http or stdio transport: the sse transport predates it`, ModernProtocolVersion)
	}
	switch s.CacheScope {
	case "", "server", "agent":
	default:
		return fmt.Errorf(`"cacheScope" is "server" (default) or "agent", not %q`, s.CacheScope)
	}
	switch s.Sessions {
	case "", SessionsShared, SessionsClient:
	default:
		return fmt.Errorf(`"sessions" is %q (default: one upstream session for every client) or %q (one per client session), not %q`, SessionsShared, SessionsClient, s.Sessions)
	}
	if s.MaxSessions < 0 {
		return fmt.Errorf(`"maxSessions" is a positive number of upstream sessions (default %d), not %d`, DefaultMaxUpstreamSessions, s.MaxSessions)
	}
	if s.MaxSessions > 0 && !s.PerClient() {
		return fmt.Errorf(`"maxSessions" bounds the sessions of a server with "sessions": %q; set that, or remove maxSessions`, SessionsClient)
	}
	if s.MaxSessionsPerAgent < 0 {
		return fmt.Errorf(`"maxSessionsPerAgent" is a positive number of upstream sessions (default maxSessions divided among the agents), not %d`, s.MaxSessionsPerAgent)
	}
	if s.MaxSessionsPerAgent > 0 && !s.PerClient() {
		return fmt.Errorf(`"maxSessionsPerAgent" bounds the sessions of a server with "sessions": %q; set that, or remove maxSessionsPerAgent`, SessionsClient)
	}
	if err := checkToolOverrides(s.Tools); err != nil {
		return err
	}
	if err := checkPins(s); err != nil {
		return err
	}
	if err := checkStart(s.Start); err != nil {
		return err
	}
	for key, d := range map[string]*Duration{"idleTimeout": s.IdleTimeout, "maxLifetime": s.MaxLifetime} {
		if d == nil {
			continue
		}
		if err := checkLifecycleDuration(key, d.D); err != nil {
			return err
		}
		if s.Transport != TransportStdio && d.D != 0 {
			return fmt.Errorf("%q stops or restarts a stdio server's process; a %s server has none: remove it", key, s.Transport)
		}
	}
	return validateAuth(s)
}

// checkPins checks "pin" and "pins": a mode, and hex SHA-256 hashes.
func checkPins(s *Server) error {
	switch s.Pin {
	case "", PinStrict, PinWarn, PinOff:
	default:
		return fmt.Errorf(`"pin" is %q (hold changed, new and renamed tools until approved), %q (default: list them with a warning) or %q, not %q`, PinStrict, PinWarn, PinOff, s.Pin)
	}
	for _, tool := range slices.Sorted(maps.Keys(s.Pins)) {
		if h := s.Pins[tool]; !sha256HexRE.MatchString(h) {
			return fmt.Errorf(`"pins": %q is %q, not a SHA-256 in hex (64 characters 0-9a-f); nexus tools pins SERVER prints them`, tool, h)
		}
	}
	return nil
}

var sha256HexRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// validateAuth checks "auth" and "oauth": OAuth is for remote servers, and a
// client secret is a reference, so it lives in the secrets store.
func validateAuth(s *Server) error {
	switch s.Auth {
	case "", AuthOAuth:
	default:
		return fmt.Errorf(`"auth" is %q or absent, not %q`, AuthOAuth, s.Auth)
	}
	if s.Transport == TransportStdio && (s.Auth != "" || s.OAuth != nil) {
		return fmt.Errorf(`"auth" and "oauth" are for remote servers (a "url"); a stdio server gets its credentials in "env"`)
	}
	o := s.OAuth
	if o == nil {
		return nil
	}
	if o.ClientSecret != "" && !secretRef(o.ClientSecret) {
		return fmt.Errorf(`"oauth.clientSecret" must be a reference such as "${keyring:%s/oauth/clientSecret}" (store the value with nexus secrets set), never the secret itself`, s.Name)
	}
	if o.ClientSecret != "" && o.ClientID == "" {
		return fmt.Errorf(`"oauth.clientSecret" needs "oauth.clientId", the client it belongs to`)
	}
	switch o.TokenEndpointAuthMethod {
	case "", "none", "client_secret_basic", "client_secret_post":
	default:
		return fmt.Errorf(`"oauth.tokenEndpointAuthMethod" is "none", "client_secret_basic" or "client_secret_post", not %q`, o.TokenEndpointAuthMethod)
	}
	if m := o.TokenEndpointAuthMethod; (m == "client_secret_basic" || m == "client_secret_post") && o.ClientSecret == "" {
		return fmt.Errorf(`"oauth.tokenEndpointAuthMethod" %q needs "oauth.clientSecret"`, m)
	}
	if u := o.ClientMetadataURL; u != "" {
		pu, err := url.Parse(u)
		if err != nil || pu.Scheme != "https" || pu.Host == "" || pu.Path == "" || pu.Path == "/" {
			return fmt.Errorf(`"oauth.clientMetadataUrl" must be an https URL with a path (the Client ID Metadata Document), not %q`, u)
		}
	}
	for _, sc := range o.Scopes {
		if sc == "" || strings.ContainsAny(sc, " \t\"\\") {
			return fmt.Errorf(`"oauth.scopes" holds %q: each scope is one word, without spaces or quotes`, sc)
		}
	}
	for _, a := range o.AllowAddresses {
		if _, err := parseAddressOrPrefix(a); err != nil {
			return fmt.Errorf(`"oauth.allowAddresses" holds %q: each entry is an IP address or a CIDR prefix such as "10.0.0.0/8"`, a)
		}
	}
	return nil
}

// secretRef reports whether v is exactly one ${keyring:NAME} or ${env:NAME}.
func secretRef(v string) bool {
	return (strings.HasPrefix(v, "${keyring:") || strings.HasPrefix(v, "${env:")) && strings.HasSuffix(v, "}") && strings.Count(v, "${") == 1
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
