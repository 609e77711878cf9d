package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/secrets"
)

// Installation is an entry filled in for one server name.
type Installation struct {
	// Server is the config entry to write under servers.NAME. It holds no secret:
	// each secret value appears in it as a ${keyring:NAME} reference.
	Server *config.Server
	// Secrets maps keyring names ("<server>/<VALUE>") to the values to store there
	// before Server is written, so that the references resolve.
	Secrets map[string]string
	// Hints are the entry's suggestions, keyed by canonical tool names.
	Hints Hints
}

// Hints are an entry's suggestions for the config, keyed by canonical tool names
// ("<server>.<tool>", "<server>.*"), ready to be merged into the config's "cache"
// and policy sections. They are suggestions: the CLI writes them only where the
// user has not set the key already. The entry's result lifetimes are not copied:
// the server entry names its catalog entry, and they apply from there
// (Entry.Lifetimes), so `list-tools` can say where a ttl came from.
type Hints struct {
	TTL   map[string]string // the entry's suggested lifetimes, for display
	Cache map[string]string // config "cache"
	// Annotations go into the server's "annotations" (keyed by the child's tool
	// name): they let the read-only policy work even for a child that does not mark
	// its tools.
	Annotations map[string]config.Annotations
	ReadOnly    []string // canonical names of the read-only tools
	Mutating    []string // canonical names of the mutating tools
	Allow       []string // a suggested allow list (canonical names or patterns)
	// SemanticFields names, per canonical tool, its free-text arguments. The config
	// has no key for them yet; they are shown by `nexus catalog show`.
	SemanticFields map[string][]string
}

// MissingError lists the required values that were not given. Its message says, for
// each, what to give and how, so that a run without a terminal fails with everything
// the user needs to write the next command.
type MissingError struct {
	Entry  string
	Values []Value
}

func (e *MissingError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "catalog entry %q needs %d more value(s); give each with --value NAME=VALUE (secrets are stored in the OS keychain):", e.Entry, len(e.Values))
	for _, v := range e.Values {
		b.WriteString("\n  ")
		b.WriteString(Describe(v))
	}
	return b.String()
}

// Describe is a one-line description of v for prompts and error messages.
func Describe(v Value) string {
	s := v.Name + ": " + v.Description
	var notes []string
	if v.Secret {
		notes = append(notes, "secret")
	}
	switch v.List {
	case ListPaths:
		notes = append(notes, fmt.Sprintf("several paths separated by %q", string(filepath.ListSeparator)))
	case ListWords:
		notes = append(notes, "a command line")
	}
	if v.Example != "" {
		notes = append(notes, "e.g. "+v.Example)
	}
	if v.Default != "" {
		notes = append(notes, "default "+v.Default)
	}
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, "; ") + ")"
	}
	return s
}

// Missing lists the required values that given lacks (an empty string counts as not
// given) and that have no default, in the order they should be asked for.
func (e *Entry) Missing(given map[string]string) []Value {
	var out []Value
	for _, v := range e.Values {
		if v.Required && v.Default == "" && given[v.Name] == "" {
			out = append(out, v)
		}
	}
	return out
}

// Install fills the entry in for a server called server. values holds the user's
// values by name; self is the path of the nexus executable (os.Executable()), needed
// only by entries whose command is {{nexus}}.
//
// A secret value is written into the entry as ${keyring:<server>/<VALUE>} and returned
// in Secrets for the caller to store; a secret given already as a ${keyring:...} or
// ${env:...} reference is kept as written and not returned. An optional value that is
// not given leaves out the env var, header or argument that uses it.
//
// Required values that are missing give a *MissingError; a value the entry does not
// declare is an error too, because a misspelt name would otherwise be dropped.
func (e *Entry) Install(server string, values map[string]string, self string) (*Installation, error) {
	if !config.ValidServerName(server) {
		return nil, fmt.Errorf("server name %q: use 1-32 lower-case letters, digits or '-', starting with a letter or digit", server)
	}
	for _, name := range slices.Sorted(maps.Keys(values)) {
		if _, ok := e.Value(name); !ok {
			return nil, fmt.Errorf("catalog entry %q takes no value %q; it takes: %s", e.Name, name, valueNames(e.Values))
		}
	}
	if m := e.Missing(values); len(m) > 0 {
		return nil, &MissingError{Entry: e.Name, Values: m}
	}
	inst := &Installation{Secrets: map[string]string{}}
	// resolved is what each placeholder becomes in the config; absent means "left out".
	resolved := map[string][]string{}
	for _, v := range e.Values {
		val, ok := values[v.Name]
		if !ok || val == "" {
			val = v.Default
		}
		if val == "" {
			continue
		}
		switch {
		case v.Secret && secrets.IsReference(val):
			resolved[v.Name] = []string{val}
		case v.Secret:
			ref := e.secretName(server, v.Name)
			inst.Secrets[ref] = val
			resolved[v.Name] = []string{"${keyring:" + ref + "}"}
		case secrets.URLHasPassword(val):
			return nil, fmt.Errorf("value %s holds a password, which would be written to the config in plain text; give it without the password (%s)", v.Name, v.Description)
		case v.List == ListPaths:
			parts := slices.DeleteFunc(filepath.SplitList(val), func(s string) bool { return s == "" })
			resolved[v.Name] = parts
		case v.List == ListWords:
			words, err := splitWords(val)
			if err != nil {
				return nil, fmt.Errorf("value %s: %w", v.Name, err)
			}
			resolved[v.Name] = words
		default:
			if strings.ContainsAny(val, "\n\r") {
				return nil, fmt.Errorf("value %s: write it on one line", v.Name)
			}
			resolved[v.Name] = []string{val}
		}
	}
	if e.usesSelf() {
		if self == "" {
			return nil, fmt.Errorf("catalog entry %q runs the nexus binary itself, but its path is unknown; pass the path of the nexus executable", e.Name)
		}
		resolved[SelfPlaceholder] = []string{self}
	}

	s := &config.Server{Transport: e.Transport, Name: server}
	if e.Command != "" {
		words, ok := fillWords(e.Command, resolved)
		if !ok || len(words) == 0 || words[0] == "" {
			return nil, fmt.Errorf("catalog entry %q: the command is empty; give the program to run", e.Name)
		}
		s.Command, s.Args = words[0], words[1:]
	}
	for _, a := range e.Args {
		if words, ok := fillWords(a, resolved); ok {
			s.Args = append(s.Args, words...)
		}
	}
	if e.URL != "" {
		u, ok := fill(e.URL, resolved)
		if !ok {
			return nil, fmt.Errorf("catalog entry %q: the url is empty; give it", e.Name)
		}
		s.URL = u
	}
	s.Env = fillMap(e.Env, resolved)
	s.Headers = fillMap(e.Headers, resolved)

	// Validate as config does, so an install never writes an entry that load refuses.
	doc, err := json.Marshal(map[string]any{"servers": map[string]*config.Server{server: s}})
	if err != nil {
		return nil, fmt.Errorf("encoding the server entry: %w", err)
	}
	if _, err := config.Parse("catalog entry "+e.Name, doc); err != nil {
		return nil, fmt.Errorf("the values given do not make a valid server entry; check them: %w", err)
	}
	s.Catalog = e.Name
	inst.Server = s
	inst.Hints = e.hints(server)
	return inst, nil
}

// Lifetimes are the entry's suggested result lifetimes for a server installed
// from it under the name server, keyed by tool pattern ("server.tool",
// "server.*"): what memory keeps answers for when neither the config nor `nexus
// cache ttl` says otherwise.
func (e *Entry) Lifetimes(server string) (map[string]memory.TTL, error) {
	out := make(map[string]memory.TTL, len(e.TTL))
	for tool, v := range e.TTL {
		raw, _ := json.Marshal(v)
		ttl, err := memory.ParseTTL(raw)
		if err != nil {
			return nil, fmt.Errorf("catalog entry %s: ttl %s: %w", e.Name, tool, err)
		}
		out[canonical(server, tool)] = ttl
	}
	return out, nil
}

// secretName is the keyring name of secret value v: "<server>/env/<KEY>" or
// "<server>/header/<NAME>" after its first use (env first, keys sorted), the names
// `nexus add --env/--header` uses, so that `nexus remove` purges them alike.
func (e *Entry) secretName(server, v string) string {
	ph := "{{" + v + "}}"
	for _, k := range slices.Sorted(maps.Keys(e.Env)) {
		if strings.Contains(normalize(e.Env[k]), ph) {
			return secrets.EnvName(server, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(e.Headers)) {
		if strings.Contains(normalize(e.Headers[k]), ph) {
			return secrets.HeaderName(server, k)
		}
	}
	return server + "/" + v // unreachable: validate puts secrets in env or headers only
}

// normalize writes every placeholder of tmpl as {{NAME}}, without spaces.
func normalize(tmpl string) string {
	return placeholderRE.ReplaceAllString(tmpl, "{{$1}}")
}

func (e *Entry) usesSelf() bool {
	for _, m := range placeholderRE.FindAllStringSubmatch(e.Command, -1) {
		if m[1] == SelfPlaceholder {
			return true
		}
	}
	return false
}

// fill replaces the placeholders of tmpl; ok is false when one of them has no value.
func fill(tmpl string, resolved map[string][]string) (string, bool) {
	ok := true
	out := placeholderRE.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := placeholderRE.FindStringSubmatch(m)[1]
		v, has := resolved[name]
		if !has || len(v) != 1 {
			ok = false
			return ""
		}
		return v[0]
	})
	return out, ok
}

// fillWords is fill for templates that may be a whole list placeholder.
func fillWords(tmpl string, resolved map[string][]string) ([]string, bool) {
	if m := placeholderRE.FindStringSubmatch(tmpl); m != nil && m[0] == strings.TrimSpace(tmpl) {
		v, has := resolved[m[1]]
		return v, has && len(v) > 0
	}
	s, ok := fill(tmpl, resolved)
	if !ok {
		return nil, false
	}
	return []string{s}, true
}

func fillMap(tmpl map[string]string, resolved map[string][]string) map[string]string {
	var out map[string]string
	for _, k := range slices.Sorted(maps.Keys(tmpl)) {
		v, ok := fill(tmpl[k], resolved)
		if !ok {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}

// splitWords splits a command line into words. Single and double quotes group words
// and a backslash outside single quotes escapes the next character, as in a POSIX
// shell, except that a backslash before a character other than a quote, a backslash
// or a space is kept, so that Windows paths need no doubling.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\\' && i+1 < len(rs) && strings.ContainsRune(`"'\ `, rs[i+1]):
			if quote == '"' && rs[i+1] == '\'' {
				cur.WriteRune(r)
				continue
			}
			i++
			cur.WriteRune(rs[i])
			inWord = true
		case quote == '"':
			if r == '"' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case r == '\n' || r == '\r':
			return nil, errors.New("write the command on one line")
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unclosed %c quote in %q", quote, s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

func canonical(server, tool string) string { return server + "." + tool }

func (e *Entry) hints(server string) Hints {
	h := Hints{}
	keyed := func(m map[string]string) map[string]string {
		if len(m) == 0 {
			return nil
		}
		out := map[string]string{}
		for k, v := range m {
			out[canonical(server, k)] = v
		}
		return out
	}
	h.TTL = keyed(e.TTL)
	h.Cache = keyed(e.Memory.Cache)
	for k, fields := range e.Memory.SemanticFields {
		if h.SemanticFields == nil {
			h.SemanticFields = map[string][]string{}
		}
		h.SemanticFields[canonical(server, k)] = slices.Clone(fields)
	}
	t, f := true, false
	for _, tool := range e.Policy.ReadOnly {
		h.ReadOnly = append(h.ReadOnly, canonical(server, tool))
		if h.Annotations == nil {
			h.Annotations = map[string]config.Annotations{}
		}
		h.Annotations[tool] = config.Annotations{ReadOnlyHint: &t}
	}
	for _, tool := range e.Policy.Mutating {
		h.Mutating = append(h.Mutating, canonical(server, tool))
		if h.Annotations == nil {
			h.Annotations = map[string]config.Annotations{}
		}
		h.Annotations[tool] = config.Annotations{ReadOnlyHint: &f}
	}
	for _, tool := range e.Policy.Allow {
		h.Allow = append(h.Allow, canonical(server, tool))
	}
	sort.Strings(h.ReadOnly)
	sort.Strings(h.Mutating)
	return h
}

// CheckPaths reports the first path of a "paths" value in values that does not
// exist: a server told to serve a directory that is not there refuses to start,
// and says why only on its stderr. The check is the one place the catalog reads
// the file system, so Install stays a function of its arguments.
func (e *Entry) CheckPaths(values map[string]string) error {
	for _, v := range e.Values {
		if v.List != ListPaths {
			continue
		}
		val := values[v.Name]
		if val == "" {
			val = v.Default
		}
		if strings.Contains(val, "${") {
			continue // a reference is resolved when the server starts
		}
		for _, p := range filepath.SplitList(val) {
			if p == "" {
				continue
			}
			if _, err := os.Stat(p); err != nil {
				return fmt.Errorf("value %s: %s does not exist (%v); create it, or give a path that exists", v.Name, p, errors.Unwrap(err))
			}
		}
	}
	return nil
}
