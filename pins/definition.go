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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// definitionFields are the fields of a tool that make its definition. _meta,
// icons and execution hints are left out: they do not change what a model is
// told or what policy and memory decide, and servers vary them freely.
var definitionFields = []string{"name", "title", "description", "inputSchema", "outputSchema", "annotations"}

// sortedDefinitionFields are definitionFields in the order canonical JSON
// writes them.
var sortedDefinitionFields = slices.Sorted(slices.Values(definitionFields))

// Definition is a tool's definition in canonical JSON: the definition fields
// only, keys sorted, no insignificant space, numbers as the server spelt them.
type Definition struct {
	Name string
	JSON json.RawMessage
}

// Canonical extracts the definition of a tool as a server listed it.
func Canonical(tool json.RawMessage) (Definition, error) {
	if !json.Valid(tool) {
		return Definition{}, errors.New("a tool that is not JSON")
	}
	c := canonicalizer{in: tool}
	if c.space(); c.in[c.pos] != '{' {
		return Definition{}, errors.New("a tool that is not a JSON object")
	}
	canon, err := c.object(nil)
	if err != nil {
		return Definition{}, fmt.Errorf("a tool that cannot be read: %w", err)
	}
	return definitionOf(canon)
}

// definitionOf is the definition in a tool's canonical JSON.
func definitionOf(canon []byte) (Definition, error) {
	fields, err := topMembers(canon)
	if err != nil {
		return Definition{}, fmt.Errorf("a tool that cannot be read: %w", err)
	}
	var name string
	if json.Unmarshal(fields["name"], &name) != nil || name == "" {
		return Definition{}, errors.New("a tool without a name")
	}
	def := make([]byte, 1, len(canon))
	def[0] = '{'
	for _, f := range sortedDefinitionFields {
		v, ok := fields[f]
		if !ok || string(v) == "null" {
			continue
		}
		if len(def) > 1 {
			def = append(def, ',')
		}
		def = append(def, '"')
		def = append(def, f...) // plain ASCII
		def = append(def, '"', ':')
		def = append(def, v...)
	}
	return Definition{Name: name, JSON: append(def, '}')}, nil
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
