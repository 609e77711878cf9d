package clients

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// yamlDocument is a YAML client file being edited: Goose's config.yaml, whose
// "extensions" map servers by name, or Continue's, whose "mcpServers" is a list
// of servers with a "name".
//
// It is read with yaml.v3's node API, which knows each entry's line, and
// edited as text: only the lines of the entry Nexus writes (or moves out)
// change, re-encoded from its node with the comments inside it; every other
// line stays byte for byte. Each edit is checked by reading the result again.
type yamlDocument struct {
	file   string
	format Format
	text   string
	root   *yaml.Node // the document's top mapping
}

// yamlErrLine finds the line in a yaml.v3 error ("yaml: line 3: ...").
var yamlErrLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func parseYAML(file string, format Format, data []byte) (*yamlDocument, error) {
	d := &yamlDocument{file: file, format: format, text: string(data)}
	if format == FormatContinue && strings.TrimSpace(d.text) == "" {
		// Continue requires these three in a config.yaml.
		d.text = "name: Local Config\nversion: 1.0.0\nschema: v1\n"
	}
	if err := d.decode(); err != nil {
		return nil, err
	}
	return d, nil
}

// decode parses text into root; an error names the file and line.
func (d *yamlDocument) decode() error {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(d.text), &doc); err != nil {
		msg := err.Error()
		if m := yamlErrLine.FindStringSubmatch(msg); m != nil {
			return fmt.Errorf("%s:%s: not valid YAML (%s); fix it by hand or restore a backup, nothing was changed", d.file, m[1], m[2])
		}
		return fmt.Errorf("%s: not valid YAML (%s); fix it by hand or restore a backup, nothing was changed", d.file, strings.TrimPrefix(msg, "yaml: "))
	}
	switch {
	case doc.Kind == 0: // an empty file
		d.root = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	case len(doc.Content) == 1 && doc.Content[0].Kind == yaml.MappingNode:
		d.root = doc.Content[0]
	default:
		return fmt.Errorf("%s: the file must be a YAML mapping of settings; fix it by hand, nothing was changed", d.file)
	}
	if list := d.list(); list != nil {
		want := yaml.MappingNode
		if d.format == FormatContinue {
			want = yaml.SequenceNode
		}
		if list.Kind != want && !isNull(list) {
			shape := "a mapping of servers by name"
			if want == yaml.SequenceNode {
				shape = "a list of servers"
			}
			return fmt.Errorf("%s:%d: %s must be %s; fix it by hand, nothing was changed", d.file, list.Line, d.key(), shape)
		}
	}
	return nil
}

// key is the top-level key that holds the servers.
func (d *yamlDocument) key() string {
	if d.format == FormatGoose {
		return "extensions"
	}
	return "mcpServers"
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// mapValue returns the value of key in the mapping m, and its key node.
func mapValue(m *yaml.Node, key string) (keyNode, value *yaml.Node) {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

// list is the node that holds the servers, nil when the file has none.
func (d *yamlDocument) list() *yaml.Node {
	_, v := mapValue(d.root, d.key())
	return v
}

// items are the servers: for Goose the key and value of each extension, for
// Continue each list item (key nil).
type yamlItem struct {
	name       string
	key, value *yaml.Node
}

func (d *yamlDocument) items() []yamlItem {
	list := d.list()
	if list == nil {
		return nil
	}
	var out []yamlItem
	if list.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(list.Content); i += 2 {
			out = append(out, yamlItem{name: list.Content[i].Value, key: list.Content[i], value: list.Content[i+1]})
		}
		return out
	}
	for _, item := range list.Content {
		_, name := mapValue(item, "name")
		if name == nil {
			continue
		}
		out = append(out, yamlItem{name: name.Value, value: item})
	}
	return out
}

func (d *yamlDocument) item(name string) (yamlItem, int, bool) {
	for i, it := range d.items() {
		if it.name == name {
			return it, i, true
		}
	}
	return yamlItem{}, -1, false
}

// names lists the servers. Goose's builtin, platform and frontend extensions
// are parts of Goose, not servers that could run behind Nexus, and are left out.
func (d *yamlDocument) names() []string {
	var out []string
	for _, it := range d.items() {
		if d.format == FormatGoose {
			_, typ := mapValue(it.value, "type")
			if typ != nil && typ.Value != "stdio" && typ.Value != "sse" && typ.Value != "streamable_http" {
				continue
			}
		}
		out = append(out, it.name)
	}
	return out
}

func (d *yamlDocument) bytes() []byte { return []byte(d.text) }

// gooseExtension is a Goose extension as its config.yaml writes it.
type gooseExtension struct {
	Type    string            `yaml:"type"`
	Cmd     string            `yaml:"cmd"`
	Args    []string          `yaml:"args"`
	Envs    map[string]string `yaml:"envs"`
	URI     string            `yaml:"uri"`
	Headers map[string]string `yaml:"headers"`
}

func (d *yamlDocument) entry(name string) (json.RawMessage, bool) {
	it, _, ok := d.item(name)
	if !ok {
		return nil, false
	}
	var out any
	if d.format == FormatGoose {
		var g gooseExtension
		if err := it.value.Decode(&g); err != nil {
			return json.RawMessage(`"` + name + `"`), true // not an object: convert says why
		}
		switch g.Type {
		case "stdio":
			out = map[string]any{"command": g.Cmd, "args": g.Args, "env": g.Envs}
		case "sse":
			out = map[string]any{"type": "sse", "url": g.URI, "headers": g.Headers}
		case "streamable_http":
			out = map[string]any{"type": "http", "url": g.URI, "headers": g.Headers}
		default: // builtin, platform, frontend: part of Goose itself (names leaves them out)
			out = map[string]any{"type": g.Type}
		}
	} else {
		var m map[string]any
		if err := it.value.Decode(&m); err != nil {
			return nil, false
		}
		delete(m, "name")
		out = m
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, false
	}
	return raw, true
}

// put writes the Nexus entry: a new one after the last server, or the one there
// with the keys Nexus sets replaced and the user's others kept.
func (d *yamlDocument) put(e Entry) error {
	it, _, exists := d.item(e.Name)
	var node *yaml.Node
	if exists {
		node = cloneNode(it.value)
	} else {
		node = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	}
	if node.Kind != yaml.MappingNode {
		return fmt.Errorf("%s:%d: the %q entry is not a mapping; fix it by hand, nothing was changed", d.file, it.value.Line, e.Name)
	}
	cmdKey, argsKey, envKey := "command", "args", "env"
	if d.format == FormatGoose {
		cmdKey, envKey = "cmd", "envs"
	}
	var old struct {
		Args []string          `yaml:"args"`
		Env  map[string]string `yaml:"env"`
		Envs map[string]string `yaml:"envs"`
	}
	if err := node.Decode(&old); err != nil {
		return fmt.Errorf("%s:%d: the %q entry has args or env of the wrong type; fix it by hand, nothing was changed", d.file, node.Line, e.Name)
	}
	if d.format == FormatGoose {
		old.Env = old.Envs
		if !exists {
			setScalar(node, "enabled", "true", "!!bool")
			setScalar(node, "name", e.Name, "!!str")
			setScalar(node, "timeout", "300", "!!int")
		}
		setScalar(node, "type", "stdio", "!!str")
	} else if !exists {
		setScalar(node, "name", e.Name, "!!str")
	}
	setScalar(node, cmdKey, e.Command, "!!str")
	setValue(node, argsKey, stringsNode(MergeArgs(old.Args, e.Args)))
	if env := mergeEnv(old.Env, e.Env); len(env) > 0 {
		_, have := mapValue(node, envKey)
		if have == nil || have.Kind != yaml.MappingNode {
			have = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			setValue(node, envKey, have)
		}
		for _, k := range sortedKeys(env) {
			setScalar(have, k, env[k], "!!str")
		}
	}
	return d.write(e.Name, node, exists)
}

// remove takes the server called name out, with its lines.
func (d *yamlDocument) remove(name string) error {
	it, i, ok := d.item(name)
	if !ok {
		return nil
	}
	start, end := d.span(it, i)
	text := d.text[:start] + d.text[end:]
	return d.replace(text, name, nil)
}

// write puts node as the entry called name: in place of the old one's lines, or
// after the last server.
func (d *yamlDocument) write(name string, node *yaml.Node, exists bool) error {
	var text string
	if exists {
		it, i, _ := d.item(name)
		var was, now any
		if it.value.Decode(&was) == nil && node.Decode(&now) == nil && reflect.DeepEqual(was, now) {
			return nil // the entry says it already, in the user's layout
		}
		start, end := d.span(it, i)
		indent := it.value.Column - 1
		if it.key != nil {
			indent = it.key.Column - 1
		} else {
			indent -= 2 // the "- " before the item's first key
		}
		rendered, err := d.render(name, node, indent)
		if err != nil {
			return err
		}
		if bytes.Equal([]byte(d.text[start:end]), []byte(rendered)) {
			return nil
		}
		text = d.text[:start] + rendered + d.text[end:]
	} else {
		var err error
		if text, err = d.appendItem(name, node); err != nil {
			return err
		}
	}
	return d.replace(text, name, node)
}

// appendItem is the text with a new entry after the last server (or a new
// servers key at the end of the file).
func (d *yamlDocument) appendItem(name string, node *yaml.Node) (string, error) {
	list := d.list()
	items := d.items()
	switch {
	case list == nil:
		rendered, err := d.render(name, node, 2)
		if err != nil {
			return "", err
		}
		text := d.text
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		return text + d.key() + ":\n" + rendered, nil
	case len(items) == 0 && isNull(list):
		keyNode, _ := mapValue(d.root, d.key())
		rendered, err := d.render(name, node, keyNode.Column-1+2)
		if err != nil {
			return "", err
		}
		at := d.lineEnd(keyNode.Line)
		return d.text[:at] + rendered + d.text[at:], nil
	case list.Style&yaml.FlowStyle != 0 || len(items) == 0:
		return "", fmt.Errorf("%s:%d: %s is written in flow style ({...} or [...]), which Nexus does not edit; write it in block style, or add the entry by hand", d.file, list.Line, d.key())
	}
	last := items[len(items)-1]
	_, end := d.span(last, len(items)-1)
	indent := last.value.Column - 1 - 2
	if last.key != nil {
		indent = last.key.Column - 1
	}
	rendered, err := d.render(name, node, indent)
	if err != nil {
		return "", err
	}
	prefix := ""
	if end > 0 && d.text[end-1] != '\n' {
		prefix = "\n"
	}
	return d.text[:end] + prefix + rendered + d.text[end:], nil
}

// render encodes the entry node at the given indentation, as an extension
// ("NAME:" then its keys) or as a list item ("- name: ...").
func (d *yamlDocument) render(name string, node *yaml.Node, indent int) (string, error) {
	node = cloneNode(node)
	node.HeadComment, node.FootComment = "", ""
	var wrap *yaml.Node
	if d.format == FormatGoose {
		wrap = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Tag: "!!str", Value: name}, node}}
	} else {
		wrap = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: []*yaml.Node{node}}
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(wrap); err != nil {
		return "", fmt.Errorf("writing the %q entry: %w", name, err)
	}
	enc.Close()
	pad := strings.Repeat(" ", max(indent, 0))
	var out strings.Builder
	for _, line := range strings.SplitAfter(b.String(), "\n") {
		if strings.TrimSpace(line) != "" {
			out.WriteString(pad)
		}
		out.WriteString(line)
	}
	return out.String(), nil
}

// span is the text of server i, from the start of its first line to the start
// of the next server's (or the end of the servers' block), without the comment
// lines that lead into the next one.
func (d *yamlDocument) span(it yamlItem, i int) (start, end int) {
	first := it.value.Line
	indent := it.value.Column - 1
	if it.key != nil {
		first, indent = it.key.Line, it.key.Column-1
	} else {
		indent -= 2
	}
	start = d.lineStart(first)
	items := d.items()
	var endLine int
	if i+1 < len(items) {
		next := items[i+1]
		endLine = next.value.Line
		if next.key != nil {
			endLine = next.key.Line
		}
	} else {
		endLine = d.blockEnd(first, indent, it.key == nil)
	}
	// Back over the comments and blank lines that lead into what follows.
	lines := strings.SplitAfter(d.text, "\n")
	for endLine-1 > first && endLine-1 <= len(lines) {
		l := strings.TrimSpace(lines[endLine-2])
		if l != "" && !strings.HasPrefix(l, "#") {
			break
		}
		endLine--
	}
	return start, d.lineStart(endLine)
}

// blockEnd is the line (1-based) after the block an entry that starts on line
// first, at indent, belongs to: the first line below it that is less indented
// (or, for a list item, as indented and not another item).
func (d *yamlDocument) blockEnd(first, indent int, item bool) int {
	lines := strings.SplitAfter(d.text, "\n")
	for n := first + 1; n <= len(lines); n++ {
		l := strings.TrimRight(lines[n-1], "\r\n")
		trimmed := strings.TrimLeft(l, " ")
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		in := len(l) - len(trimmed)
		if in < indent || (item && in == indent && !strings.HasPrefix(trimmed, "-")) || (!item && in == indent) {
			return n
		}
	}
	return len(lines) + 1
}

// lineStart is the offset of line n (1-based), or the text's end.
func (d *yamlDocument) lineStart(n int) int {
	off := 0
	for i := 1; i < n; i++ {
		j := strings.IndexByte(d.text[off:], '\n')
		if j < 0 {
			return len(d.text)
		}
		off += j + 1
	}
	return off
}

// lineEnd is the offset after line n's newline.
func (d *yamlDocument) lineEnd(n int) int {
	off := d.lineStart(n)
	j := strings.IndexByte(d.text[off:], '\n')
	if j < 0 {
		return len(d.text)
	}
	return off + j + 1
}

// replace makes text the document's after checking that it decodes to what
// the edit meant: the entry called name as node (or gone, node nil) and every
// other value as it was.
func (d *yamlDocument) replace(text, name string, node *yaml.Node) error {
	next := &yamlDocument{file: d.file, format: d.format, text: text}
	if err := next.decode(); err != nil {
		return fmt.Errorf("editing %s here would break the file (%v), so nothing was changed: edit it by hand", d.key(), err)
	}
	want, err := d.expect(name, node)
	if err != nil {
		return err
	}
	var got any
	if err := next.root.Decode(&got); err != nil {
		return fmt.Errorf("reading back %s: %w", d.file, err)
	}
	if !reflect.DeepEqual(normalTOML(want), normalTOML(got)) {
		return fmt.Errorf("%s: %s is laid out in a way Nexus does not edit, so nothing was changed: add the entry by hand", d.file, d.key())
	}
	d.text, d.root = next.text, next.root
	return nil
}

// expect is the document's value with the entry called name replaced by node
// (or removed).
func (d *yamlDocument) expect(name string, node *yaml.Node) (any, error) {
	var root map[string]any
	if err := d.root.Decode(&root); err != nil {
		return nil, fmt.Errorf("reading %s: %w", d.file, err)
	}
	if root == nil {
		root = map[string]any{}
	}
	var entry any
	if node != nil {
		if err := node.Decode(&entry); err != nil {
			return nil, err
		}
	}
	if d.format == FormatGoose {
		exts, _ := root["extensions"].(map[string]any)
		if exts == nil {
			exts = map[string]any{}
		}
		if node == nil {
			delete(exts, name)
		} else {
			exts[name] = entry
		}
		root["extensions"] = exts
		return root, nil
	}
	list, _ := root["mcpServers"].([]any)
	i := slices.IndexFunc(list, func(v any) bool {
		m, _ := v.(map[string]any)
		return m != nil && m["name"] == name
	})
	switch {
	case node == nil && i >= 0:
		list = slices.Delete(slices.Clone(list), i, i+1)
	case i >= 0:
		list = slices.Clone(list)
		list[i] = entry
	case node != nil:
		list = append(slices.Clone(list), entry)
	}
	root["mcpServers"] = list
	if len(list) == 0 {
		root["mcpServers"] = nil
	}
	return root, nil
}

// cloneNode copies a node tree, so that an edit can be tried on the copy.
func cloneNode(n *yaml.Node) *yaml.Node {
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, child := range n.Content {
		c.Content[i] = cloneNode(child)
	}
	return &c
}

// setValue sets key in the mapping m to value, in place when it is there.
func setValue(m *yaml.Node, key string, value *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			old := m.Content[i+1]
			value.LineComment, value.FootComment = old.LineComment, old.FootComment
			if old.Kind == value.Kind {
				value.Style = old.Style
			}
			m.Content[i+1] = value
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, value)
}

// setScalar sets key in the mapping m to a scalar, keeping the old one's style
// (its quotes) when the value is the same kind.
func setScalar(m *yaml.Node, key, value, tag string) {
	if _, old := mapValue(m, key); old != nil && old.Kind == yaml.ScalarNode && old.Value == value {
		return
	}
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value}
	if tag == "!!str" && needsQuotes(value) {
		n.Style = yaml.DoubleQuotedStyle
	}
	setValue(m, key, n)
}

// needsQuotes reports whether a string would read back as something else
// (a number, a bool, null) when written plain.
func needsQuotes(s string) bool {
	var v any
	if yaml.Unmarshal([]byte(s), &v) != nil {
		return true
	}
	str, ok := v.(string)
	return !ok || str != s
}

func stringsNode(items []string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for _, s := range items {
		item := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
		if needsQuotes(s) {
			item.Style = yaml.DoubleQuotedStyle
		}
		n.Content = append(n.Content, item)
	}
	return n
}
