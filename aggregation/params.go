package aggregation

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// A tool's input schema may name arguments that a 2026-07-28 client mirrors into
// Mcp-Param-{Name} headers ("x-mcp-header"), for intermediaries to route on. Nexus
// reads the body, so it checks that the headers say what the arguments say: a
// balancer or a firewall in front of it that trusted a header must not see a call
// other than the one Nexus makes.

// headerParam is one argument a tool mirrors into a header.
type headerParam struct {
	header string   // the {Name} of Mcp-Param-{Name}
	path   []string // the chain of properties from the schema's root
}

// headerParams are the arguments a schema mirrors into headers: annotations
// reached through properties alone, as the revision allows.
func headerParams(schema json.RawMessage) []headerParam {
	var out []headerParam
	var walk func(raw json.RawMessage, path []string)
	walk = func(raw json.RawMessage, path []string) {
		var s struct {
			Header     string                     `json:"x-mcp-header"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if json.Unmarshal(raw, &s) != nil {
			return
		}
		if s.Header != "" && len(path) > 0 {
			out = append(out, headerParam{header: s.Header, path: path})
		}
		for name, sub := range s.Properties {
			walk(sub, append(append([]string(nil), path...), name))
		}
	}
	if strings.Contains(string(schema), "x-mcp-header") {
		walk(schema, nil)
	}
	return out
}

// checkParamHeaders checks a call's Mcp-Param headers against its arguments: each
// argument the schema mirrors must come with its header, equal to its value, and no
// header may stand for an argument the call does not have.
func checkParamHeaders(params []headerParam, args json.RawMessage, hd http.Header) *RPCError {
	for _, p := range params {
		name := "Mcp-Param-" + p.header
		sent, present := hd[http.CanonicalHeaderKey(name)]
		want, has := argumentAt(args, p.path)
		switch {
		case !has && !present:
		case !has:
			return &RPCError{Code: codeHeaderMismatch, Message: fmt.Sprintf("header %s is sent, but the call has no argument %s", name, strings.Join(p.path, "."))}
		case !present:
			return &RPCError{Code: codeHeaderMismatch, Message: fmt.Sprintf("the call's argument %s must be mirrored in header %s (the tool's schema says x-mcp-header)", strings.Join(p.path, "."), name)}
		default:
			got, ok := headerValue(sent[0])
			if !ok || len(sent) > 1 || got != want {
				return &RPCError{Code: codeHeaderMismatch, Message: fmt.Sprintf("header %s does not match the call's argument %s", name, strings.Join(p.path, "."))}
			}
		}
	}
	return nil
}

// argumentAt is the value of the argument at path as a header carries it: a
// string as it is, an integer in decimal, a boolean as true or false; false when
// the call has none there (or null).
func argumentAt(args json.RawMessage, path []string) (string, bool) {
	raw := args
	for _, key := range path {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return "", false
		}
		var ok bool
		if raw, ok = obj[key]; !ok {
			return "", false
		}
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return "", false
	}
	switch v := v.(type) {
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case json.Number:
		return v.String(), true
	}
	return "", false
}
