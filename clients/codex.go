package clients

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

// FormatCodex is Codex's ~/.codex/config.toml: a [mcp_servers.NAME] table per server
// with command, args and env (or url and http_headers).
//
// The file is read with a TOML library, so that multi-line strings, dotted keys
// and inline tables mean what TOML says they mean, and edited as text: a round
// trip through the library would drop the user's comments and reorder their
// keys. An edit changes the values of the keys Nexus sets and nothing else, and
// is checked by reading the result again: the servers must be what Nexus meant
// and every other value as it was, or the edit is refused.
const FormatCodex Format = "codex"

// codexDocument is a Codex config.toml being edited.
type codexDocument struct {
	file string
	text string
	// root is text decoded; order lists its servers in file order.
	root  map[string]any
	order []string
}

// parseCodex parses a Codex file; an error names the file and line.
func parseCodex(file string, data []byte) (*codexDocument, error) {
	d := &codexDocument{file: file, text: string(data)}
	if err := d.decode(); err != nil {
		var perr toml.ParseError
		if errors.As(err, &perr) {
			return nil, fmt.Errorf("%s:%d: not valid TOML (%s); fix it by hand or restore a backup, nothing was changed", file, perr.Position.Line, perr.Message)
		}
		return nil, fmt.Errorf("%s: not valid TOML (%v); fix it by hand or restore a backup, nothing was changed", file, err)
	}
	if raw, ok := d.root["mcp_servers"]; ok {
		if _, isTable := raw.(map[string]any); !isTable {
			return nil, fmt.Errorf("%s: mcp_servers must be a table of servers by name; fix it by hand, nothing was changed", file)
		}
	}
	return d, nil
}

// decode reads text into root and order.
func (d *codexDocument) decode() error {
	root := map[string]any{}
	md, err := toml.Decode(d.text, &root)
	if err != nil {
		return err
	}
	d.root, d.order = root, nil
	for _, k := range md.Keys() {
		if len(k) >= 2 && k[0] == "mcp_servers" && !slices.Contains(d.order, k[1]) {
			d.order = append(d.order, k[1])
		}
	}
	return nil
}

func (d *codexDocument) servers() map[string]any {
	m, _ := d.root["mcp_servers"].(map[string]any)
	return m
}

func (d *codexDocument) names() []string { return slices.Clone(d.order) }

func (d *codexDocument) bytes() []byte { return []byte(d.text) }

// entry converts a Codex server table to the common shape: http_headers are
// headers, and bearer_token_env_var becomes an Authorization header that reads
// the variable (${env:NAME}) when Nexus connects.
func (d *codexDocument) entry(name string) (json.RawMessage, bool) {
	t, ok := d.servers()[name].(map[string]any)
	if !ok {
		if v, exists := d.servers()[name]; exists {
			raw, _ := json.Marshal(v)
			return raw, true
		}
		return nil, false
	}
	out := maps.Clone(t)
	if h, ok := out["http_headers"]; ok {
		out["headers"] = h
		delete(out, "http_headers")
	}
	if v, ok := out["bearer_token_env_var"].(string); ok {
		headers, _ := out["headers"].(map[string]any)
		headers = maps.Clone(headers)
		if headers == nil {
			headers = map[string]any{}
		}
		headers["Authorization"] = "Bearer ${env:" + v + "}"
		out["headers"] = headers
		delete(out, "bearer_token_env_var")
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, false
	}
	return raw, true
}

// codexEntry reads the Nexus table of a Codex file: its command, args and env.
// A value of the wrong type is an error rather than a value taken as missing:
// an edit would then replace what the user wrote.
func (d *codexDocument) codexEntry(name string) (Entry, bool, error) {
	v, exists := d.servers()[name]
	if !exists {
		return Entry{}, false, nil
	}
	where := "[mcp_servers." + tomlKey(name) + "]"
	t, ok := v.(map[string]any)
	if !ok {
		return Entry{}, true, fmt.Errorf("%s is not a table Nexus can read", where)
	}
	e := Entry{Name: name}
	if c, ok := t["command"]; ok {
		if e.Command, ok = c.(string); !ok {
			return Entry{}, true, fmt.Errorf("%s: command is not a string Nexus can read", where)
		}
	}
	if a, ok := t["args"]; ok {
		list, ok := a.([]any)
		if !ok {
			return Entry{}, true, fmt.Errorf("%s: args is not an array of strings Nexus can read", where)
		}
		for _, item := range list {
			s, ok := item.(string)
			if !ok {
				return Entry{}, true, fmt.Errorf("%s: args is not an array of strings Nexus can read", where)
			}
			e.Args = append(e.Args, s)
		}
	}
	if env, ok := t["env"]; ok {
		m, ok := env.(map[string]any)
		if !ok {
			return Entry{}, true, fmt.Errorf("%s: env is not a table of strings Nexus can read", where)
		}
		e.Env = map[string]string{}
		for k, v := range m {
			s, ok := v.(string)
			if !ok {
				return Entry{}, true, fmt.Errorf("%s: env is not a table of strings Nexus can read (%s)", where, k)
			}
			e.Env[k] = s
		}
	}
	return e, true, nil
}

// put sets the Nexus table: command replaced, args merged (MergeArgs), env
// merged key by key (MergePathList for PATH); the table and its env sub-table
// are added at the end when missing.
func (d *codexDocument) put(entry Entry) error {
	old, exists, err := d.codexEntry(entry.Name)
	if err != nil {
		return err
	}
	args := MergeArgs(old.Args, entry.Args)
	env := mergeEnv(old.Env, entry.Env)
	if exists && old.Command == entry.Command && slices.Equal(old.Args, args) && maps.Equal(old.Env, env) {
		return nil
	}
	var text string
	if !exists {
		text = d.appendTable(entry.Name, entry.Command, args, env)
	} else if text, err = d.editTable(entry.Name, old, entry.Command, args, env); err != nil {
		return err
	}
	want := maps.Clone(d.servers())
	if want == nil {
		want = map[string]any{}
	}
	table := map[string]any{}
	if t, ok := want[entry.Name].(map[string]any); ok {
		table = maps.Clone(t)
	}
	table["command"] = entry.Command
	table["args"] = args
	if len(env) > 0 {
		table["env"] = env
	}
	want[entry.Name] = table
	return d.replace(text, want)
}

// remove takes the tables of server name out: [mcp_servers.NAME] and its
// sub-tables, each with its body.
func (d *codexDocument) remove(name string) error {
	spans := d.tablesUnder([]string{"mcp_servers", name})
	if len(spans) == 0 {
		return fmt.Errorf("[mcp_servers.%s] is written as dotted keys or an inline table, which Nexus does not edit, so nothing was changed: take it out by hand", tomlKey(name))
	}
	text := d.text
	for i := len(spans) - 1; i >= 0; i-- {
		text = text[:spans[i][0]] + text[spans[i][1]:]
	}
	want := maps.Clone(d.servers())
	delete(want, name)
	return d.replace(text, want)
}

// replace makes text the document's, after checking that it decodes to the
// same document with mcp_servers as want: an edit that would change anything
// else is refused.
func (d *codexDocument) replace(text string, want map[string]any) error {
	next := &codexDocument{file: d.file, text: text}
	if err := next.decode(); err != nil {
		return fmt.Errorf("editing the Nexus table here would break the file (%v), so nothing was changed: edit it by hand", err)
	}
	expect, got := maps.Clone(d.root), maps.Clone(next.root)
	expect["mcp_servers"] = want
	// No servers left: no mcp_servers table and an empty one are alike.
	for _, m := range []map[string]any{expect, got} {
		if t, _ := m["mcp_servers"].(map[string]any); len(t) == 0 {
			delete(m, "mcp_servers")
		}
	}
	if !reflect.DeepEqual(normalTOML(expect), normalTOML(got)) {
		return fmt.Errorf("[mcp_servers] is written in a way Nexus does not edit (dotted keys or an inline table), so nothing was changed: write the Nexus server as a [mcp_servers.nexus] table, or add it by hand")
	}
	d.text, d.root, d.order = next.text, next.root, next.order
	return nil
}

// normalTOML turns decoded values and the values Nexus builds into one form
// (maps of any, slices of any, strings), so that they compare.
func normalTOML(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = normalTOML(x)
		}
		return out
	case map[string]string:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = x
		}
		return out
	case []string:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = x
		}
		return out
	case []map[string]any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = normalTOML(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = normalTOML(x)
		}
		return out
	}
	return v
}

// appendTable is the text with a new [mcp_servers.NAME] table at its end.
func (d *codexDocument) appendTable(name, command string, args []string, env map[string]string) string {
	var b strings.Builder
	b.WriteString(d.text)
	if d.text != "" && !strings.HasSuffix(d.text, "\n") {
		b.WriteByte('\n')
	}
	if d.text != "" {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "[mcp_servers.%s]\ncommand = %s\nargs = %s\n", tomlKey(name), tomlString(command), tomlArray(args))
	if len(env) > 0 {
		fmt.Fprintf(&b, "\n[mcp_servers.%s.env]\n", tomlKey(name))
		for _, k := range sortedKeys(env) {
			fmt.Fprintf(&b, "%s = %s\n", tomlKey(k), tomlString(env[k]))
		}
	}
	return b.String()
}

// editTable replaces, in the [mcp_servers.NAME] table, the values that differ,
// adding the keys that are missing; the rest of the text stays.
func (d *codexDocument) editTable(name string, old Entry, command string, args []string, env map[string]string) (string, error) {
	text := d.text
	table, ok := d.table([]string{"mcp_servers", name})
	if !ok {
		return "", fmt.Errorf("[mcp_servers.%s] is written as dotted keys or an inline table, which Nexus does not edit, so nothing was changed: write it as a [mcp_servers.%s] table, or edit it by hand", tomlKey(name), tomlKey(name))
	}
	type edit struct {
		start, end int
		with       string
	}
	var edits []edit
	var missing []string
	set := func(key, value string) {
		if s, e, ok := d.keyValue(table, key); ok {
			edits = append(edits, edit{s, e, value})
			return
		}
		missing = append(missing, fmt.Sprintf("%s = %s\n", key, value))
	}
	if old.Command != command {
		set("command", tomlString(command))
	}
	if !slices.Equal(old.Args, args) {
		set("args", tomlArray(args))
	}
	if !maps.Equal(old.Env, env) {
		sub, hasSub := d.table([]string{"mcp_servers", name, "env"})
		if _, _, inline := d.keyValue(table, "env"); inline || !hasSub {
			parts := make([]string, 0, len(env))
			for _, k := range sortedKeys(env) {
				parts = append(parts, tomlKey(k)+" = "+tomlString(env[k]))
			}
			set("env", "{ "+strings.Join(parts, ", ")+" }")
		} else {
			var add strings.Builder
			for _, k := range sortedKeys(env) {
				if have, ok := old.Env[k]; ok && have == env[k] {
					continue
				}
				if s, e, ok := d.keyValue(sub, k); ok {
					edits = append(edits, edit{s, e, tomlString(env[k])})
					continue
				}
				fmt.Fprintf(&add, "%s = %s\n", tomlKey(k), tomlString(env[k]))
			}
			if add.Len() > 0 {
				at, prefix := endOfContent(text, sub[0], sub[1])
				edits = append(edits, edit{at, at, prefix + add.String()})
			}
		}
	}
	if len(missing) > 0 {
		edits = append(edits, edit{table[0], table[0], strings.Join(missing, "")})
	}
	// Last span first, so that earlier offsets stay right.
	slices.SortFunc(edits, func(a, b edit) int { return b.start - a.start })
	for _, e := range edits {
		text = text[:e.start] + e.with + text[e.end:]
	}
	return text, nil
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

// tomlLine is a line of a TOML text that starts outside any string, array or
// inline table: where a table header or a key can be.
type tomlLine struct {
	start, end int // end: the offset of its newline, or the text's end
}

// topLevelLines lists the lines of text that start at the top level. Lines
// inside a multi-line string or a multi-line array are left out, so that text in
// them is never taken for a header or a key.
func topLevelLines(text string) []tomlLine {
	var lines []tomlLine
	depth, lineStart := 0, true
	for i := 0; i < len(text); {
		if lineStart {
			if depth == 0 {
				end := strings.IndexByte(text[i:], '\n')
				if end < 0 {
					end = len(text) - i
				}
				lines = append(lines, tomlLine{i, i + end})
			}
			lineStart = false
		}
		switch c := text[i]; {
		case c == '\n':
			lineStart = true
			i++
		case c == '#':
			for i < len(text) && text[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'':
			i += stringLen(text[i:])
		case c == '[' || c == '{':
			depth++
			i++
		case c == ']' || c == '}':
			depth = max(depth-1, 0)
			i++
		default:
			i++
		}
	}
	return lines
}

// stringLen is the length of the TOML string s starts with (basic, literal,
// or either multi-line), or of s up to its line's end when it is unterminated.
func stringLen(s string) int {
	q := s[0]
	if len(s) >= 3 && s[1] == q && s[2] == q {
		i := 3
		for i < len(s) {
			if q == '"' && s[i] == '\\' {
				i += 2
				continue
			}
			if strings.HasPrefix(s[i:], string([]byte{q, q, q})) {
				i += 3
				for n := 0; n < 2 && i < len(s) && s[i] == q; n++ { // """a"""" ends a"
					i++
				}
				return i
			}
			i++
		}
		return len(s)
	}
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] == '\n':
			return i
		case q == '"' && s[i] == '\\':
			i++
		case s[i] == q:
			return i + 1
		}
	}
	return len(s)
}

// header returns the key of the table header on line, and whether it is one
// ([[array]] tables are reported with array set).
func header(text string, l tomlLine) (key []string, array, ok bool) {
	line := strings.TrimSpace(text[l.start:l.end])
	if !strings.HasPrefix(line, "[") {
		return nil, false, false
	}
	if i := commentStart(line); i >= 0 {
		line = strings.TrimSpace(line[:i])
	}
	array = strings.HasPrefix(line, "[[")
	inner := strings.TrimSuffix(strings.TrimPrefix(line, "["), "]")
	if array {
		inner = strings.TrimSuffix(strings.TrimPrefix(inner, "["), "]")
	}
	key = splitKey(inner)
	return key, array, key != nil
}

// commentStart is where the comment of a line begins, outside strings; -1 when
// it has none.
func commentStart(line string) int {
	for i := 0; i < len(line); {
		switch line[i] {
		case '#':
			return i
		case '"', '\'':
			i += stringLen(line[i:])
		default:
			i++
		}
	}
	return -1
}

// table finds the body of the table whose header is key: from after its header
// line to the next header.
func (d *codexDocument) table(key []string) ([2]int, bool) {
	lines := topLevelLines(d.text)
	for i, l := range lines {
		k, array, ok := header(d.text, l)
		if !ok || array || !slices.Equal(k, key) {
			continue
		}
		start, end := min(l.end+1, len(d.text)), len(d.text)
		for _, next := range lines[i+1:] {
			if _, _, ok := header(d.text, next); ok {
				end = next.start
				break
			}
		}
		return [2]int{start, end}, true
	}
	return [2]int{}, false
}

// tablesUnder lists the spans of the tables (header and body) whose key starts
// with prefix, in text order.
func (d *codexDocument) tablesUnder(prefix []string) [][2]int {
	lines := topLevelLines(d.text)
	var spans [][2]int
	for i, l := range lines {
		k, _, ok := header(d.text, l)
		if !ok || len(k) < len(prefix) || !slices.Equal(k[:len(prefix)], prefix) {
			continue
		}
		end := len(d.text)
		for _, next := range lines[i+1:] {
			if _, _, ok := header(d.text, next); ok {
				end = next.start
				break
			}
		}
		spans = append(spans, [2]int{l.start, end})
	}
	return spans
}

// keyValue finds `key = value` in the table body span and returns the span of
// the value (without a trailing comment).
func (d *codexDocument) keyValue(body [2]int, key string) (start, end int, ok bool) {
	for _, l := range topLevelLines(d.text) {
		if l.start < body[0] || l.start >= body[1] {
			continue
		}
		line := d.text[l.start:l.end]
		eq := keyEnd(line)
		if eq < 0 || !slices.Equal(splitKey(line[:eq]), []string{key}) {
			continue
		}
		start = l.start + eq + 1
		for start < len(d.text) && (d.text[start] == ' ' || d.text[start] == '\t') {
			start++
		}
		return start, start + valueLen(d.text[start:]), true
	}
	return 0, 0, false
}

// keyEnd is the offset of the '=' after a line's key (quoted parts allowed), or
// -1 when the line holds no key.
func keyEnd(line string) int {
	for i := 0; i < len(line); {
		switch line[i] {
		case '=':
			return i
		case '#', '[', '\n':
			return -1
		case '"', '\'':
			i += stringLen(line[i:])
		default:
			i++
		}
	}
	return -1
}

// valueLen is the length of the value s starts with: up to the end of its line
// (or of its multi-line string or array), without a comment or trailing space.
func valueLen(s string) int {
	depth := 0
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case (c == '\n' || c == '#') && depth == 0:
			return len(strings.TrimRight(s[:i], " \t\r"))
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'':
			i += stringLen(s[i:])
		case c == '[' || c == '{':
			depth++
			i++
		case c == ']' || c == '}':
			depth--
			i++
		default:
			i++
		}
	}
	return len(strings.TrimRight(s, " \t\r"))
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
