// Package pins keeps the tool definitions a person approved, so that a server
// cannot change what its tools say or do without someone seeing it.
//
// A tool's definition is what a model reads and what policy and memory decide by:
// its name, title, description, input and output schemas and annotations (the
// hints included). Each is kept as the SHA-256 of its canonical JSON, beside the
// definition itself, so a later change can be shown as a diff. A listing from a
// server is reviewed against what was approved: a tool whose definition changed,
// a new tool and a renamed one are held until `nexus tools approve`.
package pins

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// definitionFields are the fields of a tool that make its definition. _meta,
// icons and execution hints are left out: they do not change what a model is
// told or what policy and memory decide, and servers vary them freely.
var definitionFields = []string{"name", "title", "description", "inputSchema", "outputSchema", "annotations"}

// Definition is a tool's definition in canonical JSON: the definition fields
// only, keys sorted, no insignificant space, numbers as the server spelt them.
type Definition struct {
	Name string
	JSON json.RawMessage
}

// Canonical extracts the definition of a tool as a server listed it.
func Canonical(tool json.RawMessage) (Definition, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(tool, &obj); err != nil {
		return Definition{}, fmt.Errorf("a tool that is not a JSON object: %w", err)
	}
	var name string
	if err := json.Unmarshal(obj["name"], &name); err != nil || name == "" {
		return Definition{}, errors.New("a tool without a name")
	}
	def := map[string]any{}
	for _, f := range definitionFields {
		raw, ok := obj[f]
		if !ok || string(raw) == "null" {
			continue
		}
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			return Definition{}, fmt.Errorf("tool %q: its %s: %w", name, f, err)
		}
		def[f] = v
	}
	canon, err := marshal(def)
	if err != nil {
		return Definition{}, fmt.Errorf("tool %q: %w", name, err)
	}
	return Definition{Name: name, JSON: canon}, nil
}

// Hash is the hex SHA-256 of the definition's canonical JSON.
func (d Definition) Hash() string {
	sum := sha256.Sum256(d.JSON)
	return hex.EncodeToString(sum[:])
}

// withoutName is the definition minus its name: what a renamed tool keeps.
func (d Definition) withoutName() string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(d.JSON, &obj) != nil {
		return ""
	}
	delete(obj, "name")
	b, _ := json.Marshal(obj)
	return string(b)
}

// marshal is json.Marshal without HTML escaping: the canonical text is shown to
// people in diffs, and "<" must read as "<". Map keys come out sorted.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// canonicalize re-encodes a definition read from a pin file the way Canonical
// does, so its hash can be checked whatever spacing the file has.
func canonicalize(raw json.RawMessage) (json.RawMessage, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return marshal(v)
}
