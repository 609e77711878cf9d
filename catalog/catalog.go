// Package catalog holds curated install specs for MCP servers, so that a user can write
// `nexus add github` instead of looking up a launch command, the environment it reads
// and which of its tools are safe to call.
//
// The built-in catalog is embedded in the binary (catalog.json beside this file). It
// can be extended, and its entries overridden by name, by further catalog files: the
// CLI passes $NEXUS_HOME/catalog.json and a catalog.json beside each config layer (see
// [LayerFiles]). Every file is validated strictly, because a typo in an install spec
// would otherwise surface much later as a child that does not start.
//
// An entry describes a server as templates over named values: "args":
// ["{{path}}"], "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "{{GITHUB_PERSONAL_ACCESS_TOKEN}}"},
// "headers": {"Authorization": "Bearer {{token}}"}. [Entry.Install] fills them in and
// keeps secret values out of the resulting config entry: they are returned separately,
// for the keychain, and the entry holds ${keyring:SERVER/VALUE} references instead.
package catalog

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/nexus-mcp/nexus/internal/suggest"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/nexus-mcp/nexus/config"
)

//go:embed catalog.json
var builtinJSON []byte

// BuiltinSource is the Source of entries from the embedded catalog.
const BuiltinSource = "(builtin)"

// SelfPlaceholder names the running nexus executable in a template: entries that run a
// sample server built into this binary use it, and the CLI fills it with
// os.Executable() so the entry keeps working whatever the PATH of the client is.
const SelfPlaceholder = "nexus"

// Kinds of list values.
const (
	ListNone  = ""      // one value
	ListPaths = "paths" // several paths separated by the OS path list separator (':' or ';'); each becomes one argument
	ListWords = "words" // a command line split into words (quotes group); the first is the program, the rest its first arguments
)

// Entry is one install spec.
type Entry struct {
	Name        string `json:"-"`
	Description string `json:"description"`
	Docs        string `json:"docs,omitempty"`
	Transport   string `json:"transport"`
	// Command, Args, URL, Env and Headers are templates: "{{NAME}}" is replaced by
	// the value NAME (see Values) or, for "{{nexus}}", by the nexus executable.
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	URL     string            `json:"url,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// Values are what the user supplies, in the order to ask for them.
	Values []Value `json:"values,omitempty"`
	// TTL suggests result lifetimes per tool ("5m", "1d", "never"); "*" is every tool.
	TTL    map[string]string `json:"ttl,omitempty"`
	Policy PolicyHints       `json:"policy,omitzero"`
	Memory MemoryHints       `json:"memory,omitzero"`

	// Source is the catalog file the entry came from (BuiltinSource for the embedded one).
	Source string `json:"-"`
}

// Value is one thing the user supplies to install an entry: an env var, a header, an
// argument or a URL, or a part of one.
type Value struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Required    bool   `json:"required,omitempty"`
	// Secret values go to the keychain and never into a config file; a prompt hides them.
	Secret  bool   `json:"secret,omitempty"`
	Default string `json:"default,omitempty"`
	// Example is shown in prompts and in the list of missing values.
	Example string `json:"example,omitempty"`
	// List is "", "paths" or "words" (see ListPaths and ListWords).
	List string `json:"list,omitempty"`
}

// PolicyHints say which tools only read and which change things, so that the default
// read-only policy can be applied even to a child that does not annotate its tools.
type PolicyHints struct {
	ReadOnly []string `json:"readOnly,omitempty"`
	Mutating []string `json:"mutating,omitempty"`
	// Allow is a suggested allow list of tool names ("*" for all).
	Allow []string `json:"allow,omitempty"`
}

// MemoryHints guide the result cache.
type MemoryHints struct {
	// Cache is "never", "always" or "auto" per tool ("*" for all): "never" for tools
	// whose answer depends on state outside their arguments (time, a working tree).
	Cache map[string]string `json:"cache,omitempty"`
	// SemanticFields names, per tool, the free-text arguments worth comparing by meaning.
	SemanticFields map[string][]string `json:"semanticFields,omitempty"`
}

// Catalog is a set of entries by name.
type Catalog struct {
	entries map[string]*Entry
	// Files are the catalog files read after the builtin one, in order.
	Files []string
}

// Get returns the entry called name.
func (c *Catalog) Get(name string) (*Entry, bool) {
	e, ok := c.entries[name]
	return e, ok
}

// List returns every entry, sorted by name.
func (c *Catalog) List() []*Entry {
	out := make([]*Entry, 0, len(c.entries))
	for _, e := range c.entries {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Names returns every entry name, sorted.
func (c *Catalog) Names() []string {
	var names []string
	for _, e := range c.List() {
		names = append(names, e.Name)
	}
	return names
}

// Builtin returns the catalog embedded in the binary.
func Builtin() (*Catalog, error) {
	c := &Catalog{entries: map[string]*Entry{}}
	if err := c.add(BuiltinSource, builtinJSON); err != nil {
		return nil, err
	}
	return c, nil
}

// Load returns the builtin catalog extended by files, in order: an entry in a later
// file replaces the entry of the same name before it, whole (entries are not merged
// key by key, so an override never inherits a stale launch command). A file that does
// not exist is skipped, because the catalog files beside config layers are optional;
// every file that exists must be valid, and an error names the file and the key.
func Load(files ...string) (*Catalog, error) {
	c, err := Builtin()
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading catalog file (check its permissions or remove it): %w", err)
		}
		if err := c.add(f, data); err != nil {
			return nil, err
		}
		c.Files = append(c.Files, f)
	}
	return c, nil
}

// LayerFiles lists the catalog files that go with config layers: catalog.json in the
// directory of each layer, in the order of the layers and each directory once. The
// personal layer $NEXUS_HOME/config.json thus brings $NEXUS_HOME/catalog.json, and a
// project's .nexus/config.json brings .nexus/catalog.json.
func LayerFiles(layers []string) []string {
	var out []string
	for _, l := range layers {
		f := filepath.Join(filepath.Dir(l), "catalog.json")
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// Keys a catalog file may hold, per level.
var (
	topKeys    = []string{"servers"}
	entryKeys  = []string{"description", "docs", "transport", "command", "args", "url", "env", "headers", "values", "ttl", "policy", "memory"}
	valueKeys  = []string{"name", "description", "required", "secret", "default", "example", "list"}
	policyKeys = []string{"readOnly", "mutating", "allow"}
	memoryKeys = []string{"cache", "semanticFields"}
)

func (c *Catalog) add(file string, data []byte) error {
	top, err := object(file, "", data)
	if err != nil {
		return err
	}
	if err := checkKeys(file, "", top, topKeys); err != nil {
		return err
	}
	raw, ok := top["servers"]
	if !ok {
		return &config.Error{File: file, Msg: `write {"servers": {"NAME": {...}}}`}
	}
	servers, err := object(file, "servers", raw)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(servers))
	for n := range servers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		e, err := decodeEntry(file, "servers."+name, servers[name])
		if err != nil {
			return err
		}
		e.Name, e.Source = name, file
		if !config.ValidServerName(name) {
			return &config.Error{File: file, Key: "servers." + name, Msg: "an entry name is a server name: 1-32 lower-case letters, digits or '-', starting with a letter or digit"}
		}
		if err := e.validate(); err != nil {
			return &config.Error{File: file, Key: "servers." + name + keySuffix(err), Msg: msgOf(err), Err: err}
		}
		c.entries[name] = e
	}
	return nil
}

// fieldError is a validation error about one key of an entry.
type fieldError struct{ key, msg string }

func (f *fieldError) Error() string { return f.key + ": " + f.msg }

func keySuffix(err error) string {
	var fe *fieldError
	if errors.As(err, &fe) && fe.key != "" {
		return "." + fe.key
	}
	return ""
}

func msgOf(err error) string {
	var fe *fieldError
	if errors.As(err, &fe) {
		return fe.msg
	}
	return err.Error()
}

func decodeEntry(file, path string, raw json.RawMessage) (*Entry, error) {
	obj, err := object(file, path, raw)
	if err != nil {
		return nil, err
	}
	if err := checkKeys(file, path, obj, entryKeys); err != nil {
		return nil, err
	}
	if v, ok := obj["values"]; ok {
		var list []json.RawMessage
		if err := json.Unmarshal(v, &list); err != nil {
			return nil, &config.Error{File: file, Key: path + ".values", Msg: "must be a list of objects"}
		}
		for i, item := range list {
			p := fmt.Sprintf("%s.values[%d]", path, i)
			o, err := object(file, p, item)
			if err != nil {
				return nil, err
			}
			if err := checkKeys(file, p, o, valueKeys); err != nil {
				return nil, err
			}
		}
	}
	for key, valid := range map[string][]string{"policy": policyKeys, "memory": memoryKeys} {
		if v, ok := obj[key]; ok {
			o, err := object(file, path+"."+key, v)
			if err != nil {
				return nil, err
			}
			if err := checkKeys(file, path+"."+key, o, valid); err != nil {
				return nil, err
			}
		}
	}
	e := &Entry{}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		// Decode key by key so that a type error names its key.
		if err := config.DecodeStrict(obj[k], fieldOf(e, k)); err != nil {
			return nil, &config.Error{File: file, Key: path + "." + k, Msg: err.Error(), Err: err}
		}
	}
	return e, nil
}

func fieldOf(e *Entry, key string) any {
	switch key {
	case "description":
		return &e.Description
	case "docs":
		return &e.Docs
	case "transport":
		return &e.Transport
	case "command":
		return &e.Command
	case "args":
		return &e.Args
	case "url":
		return &e.URL
	case "env":
		return &e.Env
	case "headers":
		return &e.Headers
	case "values":
		return &e.Values
	case "ttl":
		return &e.TTL
	case "policy":
		return &e.Policy
	case "memory":
		return &e.Memory
	}
	panic("catalog: no field for key " + key) // entryKeys and fieldOf are kept in step
}

func object(file, key string, data []byte) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&obj); err != nil || obj == nil {
		msg := "must be a JSON object"
		if err != nil {
			msg += fmt.Sprintf(" (%v)", err)
		}
		return nil, &config.Error{File: file, Key: key, Msg: msg}
	}
	if dec.More() {
		return nil, &config.Error{File: file, Key: key, Msg: "has trailing data after the JSON object"}
	}
	return obj, nil
}

func checkKeys(file, path string, obj map[string]json.RawMessage, valid []string) error {
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if slices.Contains(valid, k) {
			continue
		}
		msg := fmt.Sprintf("unknown key %q", k)
		if best := suggest.Closest(k, valid); best != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", best)
		}
		msg += "; valid keys: " + strings.Join(valid, ", ")
		key := k
		if path != "" {
			key = path + "." + k
		}
		return &config.Error{File: file, Key: key, Msg: msg}
	}
	return nil
}

var (
	placeholderRE = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)
	valueNameRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	toolNameRE    = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$|^\*$`)
)

// Value returns the value spec called name.
func (e *Entry) Value(name string) (Value, bool) {
	for _, v := range e.Values {
		if v.Name == name {
			return v, true
		}
	}
	return Value{}, false
}

// validate checks an entry on its own: its text, its values, its transport,
// every placeholder (it names a declared value, and every value is used), and
// the memory and policy hints. The first problem found is the one reported, in
// that order.
func (e *Entry) validate() error {
	for _, check := range []func() error{e.validateText, e.validateValues, e.validateTransport, e.validatePlaceholders, e.validateMemory, e.validatePolicy} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateText checks the description and the docs link.
func (e *Entry) validateText() error {
	if strings.TrimSpace(e.Description) == "" || strings.ContainsAny(e.Description, "\n\r") {
		return &fieldError{"description", "write one line saying what the server does"}
	}
	if e.Docs != "" && !strings.HasPrefix(e.Docs, "https://") && !strings.HasPrefix(e.Docs, "http://") {
		return &fieldError{"docs", "must be a link starting with https://"}
	}
	return nil
}

// validateValues checks the declared values on their own.
func (e *Entry) validateValues() error {
	seen := map[string]bool{}
	for i, v := range e.Values {
		key := fmt.Sprintf("values[%d]", i)
		switch {
		case !valueNameRE.MatchString(v.Name):
			return &fieldError{key + ".name", fmt.Sprintf("%q: a value name is letters, digits and '_' (e.g. \"token\" or \"GITHUB_TOKEN\")", v.Name)}
		case v.Name == SelfPlaceholder:
			return &fieldError{key + ".name", fmt.Sprintf("%q is reserved for the nexus executable", v.Name)}
		case seen[v.Name]:
			return &fieldError{key + ".name", fmt.Sprintf("%q is declared twice", v.Name)}
		case strings.TrimSpace(v.Description) == "" || strings.ContainsAny(v.Description, "\n\r"):
			return &fieldError{key + ".description", "write one line saying what to give (it is shown in prompts)"}
		case v.Secret && v.Default != "":
			return &fieldError{key + ".default", "a secret value cannot have a default: it would sit in a file"}
		case v.Secret && v.List != ListNone:
			return &fieldError{key + ".list", "a secret value cannot be a list"}
		case v.List != ListNone && v.List != ListPaths && v.List != ListWords:
			return &fieldError{key + ".list", fmt.Sprintf("%q: write %q or %q, or leave it out", v.List, ListPaths, ListWords)}
		}
		seen[v.Name] = true
	}
	return nil
}

// validateTransport checks that the transport has what it needs and nothing
// of another transport.
func (e *Entry) validateTransport() error {
	switch e.Transport {
	case config.TransportStdio:
		if e.Command == "" {
			return &fieldError{"command", "a stdio entry needs the program to run"}
		}
		if e.URL != "" || len(e.Headers) > 0 {
			return &fieldError{"url", `a stdio entry takes no "url" or "headers"`}
		}
	case config.TransportSSE, config.TransportStreamableHTTP:
		if e.URL == "" {
			return &fieldError{"url", fmt.Sprintf("a %s entry needs a url", e.Transport)}
		}
		if e.Command != "" || len(e.Args) > 0 || len(e.Env) > 0 {
			return &fieldError{"command", fmt.Sprintf(`a %s entry takes no "command", "args" or "env"`, e.Transport)}
		}
		if !strings.HasPrefix(e.URL, "{{") && !strings.HasPrefix(e.URL, "http://") && !strings.HasPrefix(e.URL, "https://") {
			return &fieldError{"url", "must start with http://, https:// or a {{value}}"}
		}
	default:
		return &fieldError{"transport", fmt.Sprintf("%q: write %q, %q or %q", e.Transport, config.TransportStdio, config.TransportSSE, config.TransportStreamableHTTP)}
	}
	return nil
}

// validatePlaceholders checks every template of the entry and that every
// declared value is used by one.
func (e *Entry) validatePlaceholders() error {
	used := map[string]bool{}
	if err := e.checkTemplate(used, "command", e.Command, "command"); err != nil {
		return err
	}
	for i, a := range e.Args {
		if err := e.checkTemplate(used, fmt.Sprintf("args[%d]", i), a, "args"); err != nil {
			return err
		}
	}
	if err := e.checkTemplate(used, "url", e.URL, "url"); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(e.Env)) {
		if err := e.checkTemplate(used, "env."+k, e.Env[k], "env"); err != nil {
			return err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(e.Headers)) {
		if err := e.checkTemplate(used, "headers."+k, e.Headers[k], "headers"); err != nil {
			return err
		}
	}
	for _, v := range e.Values {
		if !used[v.Name] {
			return &fieldError{"values", fmt.Sprintf("%q is never used; put {{%s}} in the command, args, url, env or headers, or remove it", v.Name, v.Name)}
		}
	}
	return nil
}

// checkTemplate checks the placeholders of one template, at key, of the kind
// where ("command", "args", "url", "env", "headers"), and records the values it
// uses.
func (e *Entry) checkTemplate(used map[string]bool, key, tmpl string, where string) error {
	for _, m := range placeholderRE.FindAllStringSubmatch(tmpl, -1) {
		name := m[1]
		if name == SelfPlaceholder {
			if where != "command" {
				return &fieldError{key, "{{nexus}} may only be the command"}
			}
			continue
		}
		v, ok := e.Value(name)
		if !ok {
			return &fieldError{key, fmt.Sprintf("unknown placeholder {{%s}}; declare it in \"values\" (declared: %s)", name, valueNames(e.Values))}
		}
		used[name] = true
		whole := strings.TrimSpace(tmpl) == m[0]
		switch {
		case v.List == ListPaths && (where != "args" || !whole):
			return &fieldError{key, fmt.Sprintf("the path list {{%s}} must be a whole argument", name)}
		case v.List == ListWords && (where != "command" || !whole):
			return &fieldError{key, fmt.Sprintf("the command line {{%s}} must be the whole command", name)}
		case v.Secret && where != "env" && where != "headers":
			return &fieldError{key, fmt.Sprintf("the secret {{%s}} may only be used in env or headers: the gateway resolves keychain references there alone, and process lists show arguments", name)}
		case (where == "command" || where == "url") && !v.Required && v.Default == "":
			return &fieldError{key, fmt.Sprintf("{{%s}} must be required or have a default: the %s cannot be left out", name, where)}
		}
	}
	if strings.Contains(placeholderRE.ReplaceAllString(tmpl, ""), "{{") {
		return &fieldError{key, fmt.Sprintf("malformed placeholder in %q: write {{NAME}}", tmpl)}
	}
	return nil
}

// validateMemory checks the memory hints: TTLs, cache modes and free-text
// fields, each keyed by a tool name.
func (e *Entry) validateMemory() error {
	for _, k := range slices.Sorted(maps.Keys(e.TTL)) {
		if !toolNameRE.MatchString(k) {
			return &fieldError{"ttl." + k, "not a tool name"}
		}
		if e.TTL[k] != "never" {
			if _, err := config.ParseDuration(e.TTL[k]); err != nil {
				return &fieldError{"ttl." + k, err.Error() + ` or "never"`}
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(e.Memory.Cache)) {
		if !toolNameRE.MatchString(k) {
			return &fieldError{"memory.cache." + k, "not a tool name"}
		}
		switch e.Memory.Cache[k] {
		case "never", "always", "auto":
		default:
			return &fieldError{"memory.cache." + k, fmt.Sprintf("%q: write \"never\", \"always\" or \"auto\"", e.Memory.Cache[k])}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(e.Memory.SemanticFields)) {
		if !toolNameRE.MatchString(k) || k == "*" {
			return &fieldError{"memory.semanticFields." + k, "not a tool name"}
		}
	}
	return nil
}

// validatePolicy checks the suggested policy: tool names, and no tool both
// read-only and mutating, or mutating and suggested for allowing.
func (e *Entry) validatePolicy() error {
	for key, list := range map[string][]string{"policy.readOnly": e.Policy.ReadOnly, "policy.mutating": e.Policy.Mutating, "policy.allow": e.Policy.Allow} {
		for _, t := range list {
			if !toolNameRE.MatchString(t) || (t == "*" && key != "policy.allow") {
				return &fieldError{key, fmt.Sprintf("%q is not a tool name", t)}
			}
		}
	}
	for _, t := range e.Policy.ReadOnly {
		if slices.Contains(e.Policy.Mutating, t) {
			return &fieldError{"policy", fmt.Sprintf("%q is listed as both read-only and mutating", t)}
		}
	}
	for _, t := range e.Policy.Allow {
		if slices.Contains(e.Policy.Mutating, t) {
			return &fieldError{"policy.allow", fmt.Sprintf("%q is mutating; a suggested allow list holds read-only tools", t)}
		}
	}
	return nil
}

func valueNames(vs []Value) string {
	if len(vs) == 0 {
		return "none"
	}
	var names []string
	for _, v := range vs {
		names = append(names, v.Name)
	}
	return strings.Join(names, ", ")
}
