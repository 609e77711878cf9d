package samples

import (
	"encoding/json"
	"fmt"
	"slices"
)

// prop is one property of a closed input schema. It is kept as a Go value,
// not only as JSON, because the same description drives both the schema the
// server advertises and the strict checks it applies before any work, so the
// two cannot drift apart.
type prop struct {
	Type        string   // "string", "integer", "boolean" or "array" (of strings)
	Description string   //
	Enum        []string // allowed values of a string
	Min, Max    int      // integer bounds (both set for every integer here)
	Default     any      // advertised default, applied by the tool itself
	MaxLength   int      // string length bound, 0 for none
	MaxItems    int      // array length bound, 0 for none
}

// inputSpec is a closed object schema: every property is listed, nothing else
// is accepted.
type inputSpec struct {
	Props    map[string]prop
	Required []string
}

// schema renders the spec as the JSON schema advertised in tools/list.
func (in inputSpec) schema() json.RawMessage {
	props := make(map[string]any, len(in.Props))
	for name, p := range in.Props {
		m := map[string]any{"type": p.Type, "description": p.Description}
		if len(p.Enum) > 0 {
			m["enum"] = p.Enum
		}
		if p.Type == "integer" {
			m["minimum"], m["maximum"] = p.Min, p.Max
		}
		if p.Default != nil {
			m["default"] = p.Default
		}
		if p.MaxLength > 0 {
			m["maxLength"] = p.MaxLength
		}
		if p.Type == "array" {
			m["items"] = map[string]any{"type": "string"}
			if p.MaxItems > 0 {
				m["maxItems"] = p.MaxItems
			}
		}
		props[name] = m
	}
	s := map[string]any{
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if len(in.Required) > 0 {
		s["required"] = in.Required
	}
	return mustJSON(s)
}

// with returns a copy of the spec with more properties, so tools can share a
// base (the graph selector, the doc scope) without aliasing its map.
func (in inputSpec) with(more map[string]prop, required ...string) inputSpec {
	out := inputSpec{Props: make(map[string]prop, len(in.Props)+len(more))}
	for k, v := range in.Props {
		out.Props[k] = v
	}
	for k, v := range more {
		out.Props[k] = v
	}
	out.Required = append(slices.Clone(in.Required), required...)
	return out
}

// outputSchema describes a tool answer. Every answer of these samples is an
// object with a "status"; the listed properties are the ones of the success
// shape, and the object stays open so refusal and error shapes (which add
// "reason", "missing", "error"...) remain valid.
func outputSchema(statuses []string, props map[string]string) json.RawMessage {
	p := map[string]any{"status": map[string]any{"type": "string", "enum": statuses}}
	for name, typ := range props {
		p[name] = map[string]any{"type": typ}
	}
	return mustJSON(map[string]any{
		"type":       "object",
		"properties": p,
		"required":   []string{"status"},
	})
}

// mustJSON marshals values built from literals in this package; a failure
// is a programming error.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("samples: marshal schema: %v", err))
	}
	return b
}

// Property constructors, to keep tool declarations short.

func pString(desc string, maxLen int) prop {
	return prop{Type: "string", Description: desc, MaxLength: maxLen}
}

func pEnum(desc string, values ...string) prop {
	return prop{Type: "string", Description: desc, Enum: values}
}

func pInt(desc string, min, max, def int) prop {
	return prop{Type: "integer", Description: desc, Min: min, Max: max, Default: def}
}

func pBool(desc string, def bool) prop { return prop{Type: "boolean", Description: desc, Default: def} }

func pStrings(desc string, maxItems int) prop {
	return prop{Type: "array", Description: desc, MaxItems: maxItems}
}
