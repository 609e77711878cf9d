// Package jsonedit changes one member of a JSON document and leaves every other
// byte as the user wrote it: key order, indentation, comments and trailing commas
// (JSONC, as VS Code writes it). Nexus edits files people also edit by hand (its
// own config, a client's config), and a tool that reorders or strips them teaches
// people not to let it touch their files.
//
// Parsing is github.com/tailscale/hujson's, which keeps the whitespace and the
// comments around every value; this package adds path-based get, set and delete,
// and indents what it inserts like the lines around it.
package jsonedit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tailscale/hujson"
)

// Doc is a JSON object document being edited.
type Doc struct {
	root   hujson.Value
	indent string // one level of indentation, as the file uses it
}

// Parse reads data, which must be a JSON object (comments and trailing commas
// allowed). Empty or blank data is an empty object.
func Parse(data []byte) (*Doc, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte("{}\n")
	}
	v, err := hujson.Parse(data)
	if err != nil {
		return nil, err
	}
	if _, ok := v.Value.(*hujson.Object); !ok {
		return nil, fmt.Errorf("the top level must be a JSON object")
	}
	return &Doc{root: v, indent: detectIndent(data)}, nil
}

// Bytes is the document with its edits.
func (d *Doc) Bytes() []byte {
	b := d.root.Pack()
	if !bytes.HasSuffix(b, []byte("\n")) {
		b = append(b, '\n')
	}
	return b
}

// HasComments reports whether the document holds comments or trailing commas,
// which a plain JSON reader of the file would refuse.
func (d *Doc) HasComments() bool { return !d.root.IsStandard() }

// Get returns the value at path as standard JSON (comments removed).
func (d *Doc) Get(path ...string) (json.RawMessage, bool) {
	v := d.find(path)
	if v == nil {
		return nil, false
	}
	c := v.Clone()
	c.BeforeExtra, c.AfterExtra = nil, nil
	c.Minimize()
	return json.RawMessage(c.Pack()), true
}

// Has reports whether path names a member.
func (d *Doc) Has(path ...string) bool { return d.find(path) != nil }

// Keys returns the keys of the object at path in file order; nil when path is
// missing or not an object.
func (d *Doc) Keys(path ...string) []string {
	v := d.find(path)
	if v == nil {
		return nil
	}
	obj, ok := v.Value.(*hujson.Object)
	if !ok {
		return nil
	}
	keys := make([]string, 0, len(obj.Members))
	for _, m := range obj.Members {
		keys = append(keys, memberName(m))
	}
	return keys
}

// Set puts value (any value encoding/json encodes, or a json.RawMessage) at path,
// creating the objects along it. An existing member keeps its place and the
// comments around it; a new one is added last in its object.
func (d *Doc) Set(value any, path ...string) error {
	if len(path) == 0 {
		return fmt.Errorf("jsonedit: empty path")
	}
	raw, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", strings.Join(path, "."), err)
	}
	obj, depth := &d.root, 0
	for ; depth < len(path)-1; depth++ {
		next := member(obj, path[depth])
		if next == nil {
			break
		}
		if _, ok := next.Value.(*hujson.Object); !ok {
			return fmt.Errorf("%q must be an object", strings.Join(path[:depth+1], "."))
		}
		obj = next
	}
	if depth == len(path)-1 {
		if m := member(obj, path[depth]); m != nil {
			nv, err := d.value(raw, depth+1)
			if err != nil {
				return err
			}
			m.Value = nv.Value
			return nil
		}
	}
	// Wrap what is missing below obj: {"b": {"c": value}} for a.b.c under a.
	for i := len(path) - 1; i > depth; i-- {
		wrapped, _ := json.Marshal(map[string]json.RawMessage{path[i]: raw})
		raw = wrapped
	}
	return d.insert(obj, path[depth], raw, depth+1)
}

// Delete removes the member at path and reports whether it was there. With
// dropEmpty, an object left empty by the removal is removed too, up the path.
func (d *Doc) Delete(dropEmpty bool, path ...string) bool {
	if len(path) == 0 {
		return false
	}
	parent := d.find(path[:len(path)-1])
	if parent == nil {
		return false
	}
	obj, ok := parent.Value.(*hujson.Object)
	if !ok {
		return false
	}
	for i, m := range obj.Members {
		if memberName(m) != path[len(path)-1] {
			continue
		}
		last := i == len(obj.Members)-1
		trailing := m.Value.AfterExtra != nil
		obj.Members = append(obj.Members[:i], obj.Members[i+1:]...)
		if last && len(obj.Members) > 0 && !trailing {
			obj.Members[len(obj.Members)-1].Value.AfterExtra = nil // no trailing comma was there
		}
		if len(obj.Members) == 0 {
			obj.AfterExtra = nil
		}
		if dropEmpty && len(obj.Members) == 0 && len(path) > 1 {
			d.Delete(true, path[:len(path)-1]...)
		}
		return true
	}
	return false
}

func (d *Doc) find(path []string) *hujson.Value {
	v := &d.root
	for _, k := range path {
		if v = member(v, k); v == nil {
			return nil
		}
	}
	return v
}

// member returns the value of key in the object v (the last of duplicates, as
// encoding/json reads it), or nil.
func member(v *hujson.Value, key string) *hujson.Value {
	obj, ok := v.Value.(*hujson.Object)
	if !ok {
		return nil
	}
	for i := len(obj.Members) - 1; i >= 0; i-- {
		if memberName(obj.Members[i]) == key {
			return &obj.Members[i].Value
		}
	}
	return nil
}

func memberName(m hujson.ObjectMember) string {
	var s string
	if lit, ok := m.Name.Value.(hujson.Literal); ok {
		s = lit.String()
	}
	return s
}

// insert adds key: raw as the last member of obj, which sits at the given depth.
func (d *Doc) insert(objValue *hujson.Value, key string, raw json.RawMessage, depth int) error {
	obj := objValue.Value.(*hujson.Object)
	nv, err := d.value(raw, depth)
	if err != nil {
		return err
	}
	name, _ := json.Marshal(key)
	inner := "\n" + strings.Repeat(d.indent, depth)
	m := hujson.ObjectMember{
		Name:  hujson.Value{BeforeExtra: hujson.Extra(inner), Value: hujson.Literal(name)},
		Value: hujson.Value{BeforeExtra: hujson.Extra(" "), Value: nv.Value},
	}
	if n := len(obj.Members); n > 0 {
		prev := &obj.Members[n-1]
		if prev.Value.AfterExtra != nil {
			// A trailing comma: the new member takes it over, so the file keeps its style.
			m.Value.AfterExtra = hujson.Extra{}
			prev.Value.AfterExtra = nil
		}
		// Line the new member up with the previous one.
		if ws := leadingSpace(prev.Name.BeforeExtra); ws != "" {
			m.Name.BeforeExtra = hujson.Extra(ws)
		}
	} else {
		obj.AfterExtra = hujson.Extra("\n" + strings.Repeat(d.indent, depth-1))
	}
	obj.Members = append(obj.Members, m)
	return nil
}

// value parses raw re-indented for a member at depth.
func (d *Doc) value(raw json.RawMessage, depth int) (hujson.Value, error) {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, strings.Repeat(d.indent, depth), d.indent); err != nil {
		return hujson.Value{}, fmt.Errorf("jsonedit: %w", err)
	}
	return hujson.Parse(b.Bytes())
}

// leadingSpace is the newline and indentation ending extra, when extra ends with
// one (as it does before a key on its own line).
func leadingSpace(extra hujson.Extra) string {
	s := string(extra)
	i := strings.LastIndexByte(s, '\n')
	if i < 0 || strings.TrimLeft(s[i:], "\n\r\t ") != "" {
		return ""
	}
	return s[i:]
}

// detectIndent returns the indentation of the first indented line, or two
// spaces.
func detectIndent(data []byte) string {
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		trimmed := bytes.TrimLeft(line, " \t")
		if len(trimmed) > 0 && len(trimmed) < len(line) {
			return string(line[:len(line)-len(trimmed)])
		}
	}
	return "  "
}
