package clients

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nexus-mcp/nexus/config"
)

// FormatCodex is Codex's ~/.codex/config.toml: a [mcp_servers.NAME] table per server
// with command, args and env.
//
// The file is edited as text, by hand, rather than decoded and re-encoded with a
// TOML library: a round trip through one would drop the user's comments and
// reorder their keys, and Nexus needs to change three keys of one table. Only
// those keys are rewritten; every other byte stays as written.
const FormatCodex Format = "codex"

// codexTable is the [mcp_servers.NAME] table of a Codex file, as byte spans of its
// text.
type codexTable struct {
	text string
	// start and end bound the table's body: after its header line, up to the next
	// header (or the end of the text).
	start, end int
	found      bool
}

var tomlHeader = regexp.MustCompile(`(?m)^[ \t]*\[([^\[\]\n]+)\][ \t]*(#.*)?$`)

// findTable finds the table whose dotted name is name (["mcp_servers", "nexus"]).
func findTable(text string, name []string) codexTable {
	t := codexTable{text: text}
	for _, m := range tomlHeader.FindAllStringSubmatchIndex(text, -1) {
		if t.found {
			t.end = m[0]
			return t
		}
		if slices.Equal(splitKey(text[m[2]:m[3]]), name) {
			t.found, t.start, t.end = true, min(m[1]+1, len(text)), len(text)
		}
	}
	return t
}

// splitKey splits a dotted TOML key into its parts, unquoting quoted ones.
func splitKey(s string) []string {
	var parts []string
	for s = strings.TrimSpace(s); s != ""; {
		var part string
		if s[0] == '"' || s[0] == '\'' {
			v, n, err := parseTOMLString(s)
			if err != nil {
				return nil
			}
			part, s = v, s[n:]
		} else {
			i := strings.IndexByte(s, '.')
			if i < 0 {
				i = len(s)
			}
			part, s = strings.TrimSpace(s[:i]), s[i:]
		}
		parts = append(parts, part)
		s = strings.TrimSpace(s)
		s = strings.TrimPrefix(s, ".")
		s = strings.TrimSpace(s)
	}
	return parts
}

// keyRE matches `key =` at the start of a line.
func keyRE(key string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^[ \t]*(?:` + regexp.QuoteMeta(key) + `|"` + regexp.QuoteMeta(key) + `")[ \t]*=[ \t]*`)
}

// hasKey reports whether the table's body sets key, readable or not.
func (t codexTable) hasKey(key string) bool { return keyRE(key).MatchString(t.text[t.start:t.end]) }

// keySpan finds `key = value` at the start of a line in the table's body and
// returns the span of the value; ok is false when it is missing or unreadable
// (hasKey tells which).
func (t codexTable) keySpan(key string) (start, end int, ok bool) {
	body := t.text[t.start:t.end]
	m := keyRE(key).FindStringIndex(body)
	if m == nil {
		return 0, 0, false
	}
	n, err := tomlValueLen(body[m[1]:])
	if err != nil {
		return 0, 0, false
	}
	return t.start + m[1], t.start + m[1] + n, true
}

// tomlValueLen is the length of the TOML value s starts with: a string, an array
// or an inline table of those, or a bare scalar up to the end of its line.
func tomlValueLen(s string) (int, error) {
	if s == "" {
		return 0, errors.New("missing value")
	}
	switch s[0] {
	case '"', '\'':
		_, n, err := parseTOMLString(s)
		return n, err
	case '[', '{':
		closer := byte(']')
		if s[0] == '{' {
			closer = '}'
		}
		i := 1
		for i < len(s) {
			switch c := s[i]; {
			case c == closer:
				return i + 1, nil
			case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == '=':
				i++
			case c == '#':
				j := strings.IndexByte(s[i:], '\n')
				if j < 0 {
					return 0, errors.New("unterminated array")
				}
				i += j
			case s[0] == '{' && c != '"' && c != '\'' && c != '[' && c != '{' && isBareKey(c):
				for i < len(s) && (isBareKey(s[i]) || s[i] == '.') {
					i++
				}
			default:
				n, err := tomlValueLen(s[i:])
				if err != nil {
					return 0, err
				}
				i += n
			}
		}
		return 0, errors.New("unterminated array or table")
	}
	end := strings.IndexAny(s, "\n#,]}")
	if end < 0 {
		end = len(s)
	}
	return len(strings.TrimRight(s[:end], " \t\r")), nil
}

func isBareKey(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// parseTOMLString reads the basic ("...") or literal ('...') string s starts with,
// and returns its value and length. Multi-line strings are not read.
func parseTOMLString(s string) (string, int, error) {
	q := s[0]
	if strings.HasPrefix(s, string([]byte{q, q, q})) {
		return "", 0, errors.New("multi-line strings are not supported here")
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == q:
			return b.String(), i + 1, nil
		case c == '\n':
			return "", 0, errors.New("unterminated string")
		case c == '\\' && q == '"' && i+1 < len(s):
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'u', 'U':
				n := 4
				if s[i] == 'U' {
					n = 8
				}
				if i+n >= len(s) {
					return "", 0, errors.New("bad escape")
				}
				var r rune
				if _, err := fmt.Sscanf(s[i+1:i+1+n], "%x", &r); err != nil {
					return "", 0, errors.New("bad escape")
				}
				b.WriteRune(r)
				i += n
			default:
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, errors.New("unterminated string")
}

// tomlString writes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f || r == utf8.RuneError:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func tomlKey(k string) string {
	for i := 0; i < len(k); i++ {
		if !isBareKey(k[i]) {
			return tomlString(k)
		}
	}
	if k == "" {
		return `""`
	}
	return k
}

func tomlArray(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = tomlString(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// tomlStrings reads a value that is a string array.
func tomlStrings(v string) ([]string, bool) {
	v = strings.TrimSpace(v)
	if !strings.HasPrefix(v, "[") || !strings.HasSuffix(v, "]") {
		return nil, false
	}
	var out []string
	s := v[1 : len(v)-1]
	for {
		s = strings.TrimLeft(s, " \t\r\n,")
		for strings.HasPrefix(s, "#") {
			i := strings.IndexByte(s, '\n')
			if i < 0 {
				s = ""
				break
			}
			s = strings.TrimLeft(s[i:], " \t\r\n,")
		}
		if s == "" {
			return out, true
		}
		if s[0] != '"' && s[0] != '\'' {
			return nil, false
		}
		str, n, err := parseTOMLString(s)
		if err != nil {
			return nil, false
		}
		out = append(out, str)
		s = s[n:]
	}
}

// tomlInlineTable reads a value that is an inline table of strings.
func tomlInlineTable(v string) (map[string]string, bool) {
	v = strings.TrimSpace(v)
	if !strings.HasPrefix(v, "{") || !strings.HasSuffix(v, "}") {
		return nil, false
	}
	out := map[string]string{}
	for _, line := range splitTopLevel(v[1 : len(v)-1]) {
		k, val, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		key := splitKey(k)
		str, _, err := parseTOMLString(strings.TrimSpace(val))
		if len(key) != 1 || err != nil {
			return nil, false
		}
		out[key[0]] = str
	}
	return out, true
}

// splitTopLevel splits an inline table's body at commas outside strings.
func splitTopLevel(s string) []string {
	var parts []string
	start, quote := 0, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == '\\' && quote == '"':
			i++
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		case quote == 0 && c == ',':
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// codexEntry reads the Nexus table of a Codex file: its command, args and env.
// A value it cannot read (args that are not strings, a multi-line string) is an
// error rather than a value taken as missing: an edit would then replace what the
// user wrote.
func codexEntry(text, name string) (Entry, bool, error) {
	t := findTable(text, []string{"mcp_servers", name})
	if !t.found {
		return Entry{}, false, nil
	}
	where := "[mcp_servers." + tomlKey(name) + "]"
	for _, k := range []string{"command", "args", "env"} {
		if _, _, ok := t.keySpan(k); !ok && t.hasKey(k) {
			return Entry{}, true, fmt.Errorf("%s: %s has a value Nexus can read only as a one-line string, array of strings or inline table of strings", where, k)
		}
	}
	e := Entry{Name: name}
	var err error
	if s, end, ok := t.keySpan("command"); ok {
		if e.Command, _, err = parseTOMLString(text[s:end]); err != nil {
			return Entry{}, true, fmt.Errorf("%s: command is not a string Nexus can read", where)
		}
	}
	if s, end, ok := t.keySpan("args"); ok {
		var read bool
		if e.Args, read = tomlStrings(text[s:end]); !read {
			return Entry{}, true, fmt.Errorf("%s: args is not an array of strings Nexus can read", where)
		}
	}
	if s, end, ok := t.keySpan("env"); ok {
		var read bool
		if e.Env, read = tomlInlineTable(text[s:end]); !read {
			return Entry{}, true, fmt.Errorf("%s: env is not a table of strings Nexus can read", where)
		}
	} else if sub := findTable(text, []string{"mcp_servers", name, "env"}); sub.found {
		e.Env = map[string]string{}
		for _, m := range regexp.MustCompile(`(?m)^[ \t]*("(?:[^"\\]|\\.)*"|[A-Za-z0-9_-]+)[ \t]*=[ \t]*`).FindAllStringSubmatchIndex(text[sub.start:sub.end], -1) {
			key := splitKey(text[sub.start+m[2] : sub.start+m[3]])
			v, _, err := parseTOMLString(text[sub.start+m[1]:])
			if len(key) != 1 || err != nil {
				return Entry{}, true, fmt.Errorf("%s.env: %s is not a string Nexus can read", where, text[sub.start+m[2]:sub.start+m[3]])
			}
			e.Env[key[0]] = v
		}
	}
	return e, true, nil
}

// editCodex returns text with the Nexus table set to entry: command replaced, args
// merged (MergeArgs) and env merged key by key (MergePathList for PATH); the table
// and its env sub-table are added at the end when missing.
func editCodex(text string, entry Entry) (string, error) {
	old, exists, err := codexEntry(text, entry.Name)
	if err != nil {
		return "", err
	}
	args := MergeArgs(old.Args, entry.Args)
	env := map[string]string{}
	for k, v := range old.Env {
		env[k] = v
	}
	for k, v := range entry.Env {
		if have, ok := old.Env[k]; ok && k == "PATH" {
			v = MergePathList(have, v)
		}
		env[k] = v
	}
	if !exists {
		var b strings.Builder
		b.WriteString(text)
		if text != "" && !strings.HasSuffix(text, "\n") {
			b.WriteByte('\n')
		}
		if text != "" {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "[mcp_servers.%s]\ncommand = %s\nargs = %s\n", tomlKey(entry.Name), tomlString(entry.Command), tomlArray(args))
		if len(env) > 0 {
			fmt.Fprintf(&b, "\n[mcp_servers.%s.env]\n", tomlKey(entry.Name))
			for _, k := range sortedKeys(env) {
				fmt.Fprintf(&b, "%s = %s\n", tomlKey(k), tomlString(env[k]))
			}
		}
		return b.String(), nil
	}
	// Replace values in place, last span first so earlier offsets stay right.
	type edit struct {
		start, end int
		with       string
	}
	t := findTable(text, []string{"mcp_servers", entry.Name})
	var edits []edit
	var missing []string
	set := func(key, value string) {
		if s, e, ok := t.keySpan(key); ok {
			if text[s:e] != value {
				edits = append(edits, edit{s, e, value})
			}
			return
		}
		missing = append(missing, fmt.Sprintf("%s = %s\n", key, value))
	}
	if c, _ := parseTOMLStringValue(t, "command"); c != entry.Command {
		set("command", tomlString(entry.Command))
	}
	if !slices.Equal(old.Args, args) {
		set("args", tomlArray(args))
	}
	envChanged := len(env) != len(old.Env)
	for k, v := range env {
		if old.Env[k] != v {
			envChanged = true
		}
	}
	sub := findTable(text, []string{"mcp_servers", entry.Name, "env"})
	if _, _, inline := t.keySpan("env"); envChanged && (inline || !sub.found) {
		parts := make([]string, 0, len(env))
		for _, k := range sortedKeys(env) {
			parts = append(parts, tomlKey(k)+" = "+tomlString(env[k]))
		}
		set("env", "{ "+strings.Join(parts, ", ")+" }")
	} else if envChanged {
		var add strings.Builder
		for _, k := range sortedKeys(entry.Env) {
			v := env[k]
			if have, ok := old.Env[k]; ok && have == v {
				continue
			}
			s, e, ok := sub.keySpan(k)
			if ok {
				edits = append(edits, edit{s, e, tomlString(v)})
				continue
			}
			fmt.Fprintf(&add, "%s = %s\n", tomlKey(k), tomlString(v))
		}
		if add.Len() > 0 {
			at, prefix := endOfContent(text, sub.start, sub.end)
			edits = append(edits, edit{at, at, prefix + add.String()})
		}
	}
	if len(missing) > 0 {
		edits = append(edits, edit{t.start, t.start, strings.Join(missing, "")})
	}
	slices.SortFunc(edits, func(a, b edit) int { return b.start - a.start })
	for _, e := range edits {
		text = text[:e.start] + e.with + text[e.end:]
	}
	return text, nil
}

func parseTOMLStringValue(t codexTable, key string) (string, bool) {
	s, e, ok := t.keySpan(key)
	if !ok {
		return "", false
	}
	v, _, err := parseTOMLString(t.text[s:e])
	return v, err == nil
}

// endOfContent is where a line added to the table body [start, end) goes: after
// its last non-blank line. prefix is the newline to write first when that line
// ends the file without one.
func endOfContent(text string, start, end int) (at int, prefix string) {
	at = start + len(strings.TrimRight(text[start:end], " \t\r\n"))
	if at < len(text) && text[at] == '\n' {
		return at + 1, ""
	}
	if at > 0 && text[at-1] != '\n' {
		return at, "\n"
	}
	return at, ""
}

// SetupCodex adds the Nexus table to a Codex config.toml, as Setup does for a JSON
// client file: only the keys it sets change, a backup comes first, the write is
// atomic, and a file that already has the entry is left alone.
func SetupCodex(path string, entry Entry, opts SetupOptions) (*Result, error) {
	if entry.Name == "" || entry.Command == "" {
		return nil, errors.New("the nexus entry needs a name and a command (the path of the nexus executable)")
	}
	data, err := os.ReadFile(path)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	before := string(data)
	_, had, _ := codexEntry(before, entry.Name)
	after, err := editCodex(before, entry)
	if err != nil {
		return nil, fmt.Errorf("%s: %w; fix it by hand, nothing was changed", path, err)
	}
	if !strings.HasSuffix(after, "\n") {
		after += "\n"
	}
	res := &Result{Created: !exists, Replaced: had && after != before, Changed: after != before && after != before+"\n"}
	if !res.Changed {
		return res, nil
	}
	res.Diff = UnifiedDiff(path, path+" (after nexus setup)", redact([]byte(before)), redact([]byte(after)))
	if opts.DryRun {
		return res, nil
	}
	perm := fs.FileMode(0o600)
	if exists {
		if st, err := os.Stat(path); err == nil {
			perm = st.Mode().Perm()
		}
		now := opts.Now
		if now.IsZero() {
			now = time.Now()
		}
		if res.Backup, err = writeBackup(path, data, now); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(dirOf(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating the directory of %s: %w", path, err)
	}
	if err := config.WriteFileAtomic(path, []byte(after), perm); err != nil {
		return nil, fmt.Errorf("writing %s (the original is unchanged): %w", path, err)
	}
	return res, nil
}

func dirOf(path string) string {
	i := strings.LastIndexAny(path, `/\`)
	if i <= 0 {
		return "."
	}
	return path[:i]
}
