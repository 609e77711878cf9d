package aggregation

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

// This file is what passes through the gateway as the child gave it or as the client
// sent it: the children's instructions, the _meta of requests and results, and the
// tasks capability. Nexus owns only what it must rewrite to route: the progress token
// of a request (replaced with its own per-call token) and every _meta key under
// "nexus/" (its own reports, such as memory's nexus/cache). A client cannot send
// those keys to a child, and a child cannot send them to a client.

// ownMetaPrefix marks the _meta keys Nexus writes itself.
const ownMetaPrefix = "nexus/"

// ownedMetaKey reports whether a _meta key is Nexus's own, never passed through.
func ownedMetaKey(k string) bool {
	return k == "progressToken" || strings.HasPrefix(k, ownMetaPrefix) || hopMetaKey(k)
}

// passMeta is the part of a _meta object that passes through: every key but Nexus's
// own, encoded again as a compact object (its values' bytes kept), or nil when
// nothing is left or raw is not an object.
func passMeta(raw json.RawMessage) json.RawMessage {
	var meta map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &meta) != nil {
		return nil
	}
	for k := range meta {
		if ownedMetaKey(k) {
			delete(meta, k)
		}
	}
	if len(meta) == 0 {
		return nil
	}
	out, err := json.Marshal(meta)
	if err != nil {
		return nil
	}
	return out
}

// passFieldsMeta keeps, in the _meta of a request's decoded params, what passes
// through to a child (passMeta), and drops a _meta left empty.
func passFieldsMeta(fields map[string]json.RawMessage) {
	meta, ok := fields["_meta"]
	if !ok {
		return
	}
	if kept := passMeta(meta); kept != nil {
		fields["_meta"] = kept
	} else {
		delete(fields, "_meta")
	}
}

// forwardParams is a client's request params as a child gets them: the client's own
// bytes, unless its _meta holds keys Nexus owns, which are taken out. Params that are
// not an object pass as they are; the child judges them.
func forwardParams(params json.RawMessage) json.RawMessage {
	if !bytes.Contains(params, []byte(`"_meta"`)) {
		return params
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(params, &fields) != nil {
		return params
	}
	if _, ok := fields["_meta"]; !ok {
		return params
	}
	passFieldsMeta(fields)
	out, err := json.Marshal(fields)
	if err != nil {
		return params
	}
	return out
}

// dropOwnMeta takes Nexus's own keys out of the _meta of a child's result, so that a
// child cannot pass off a report as the gateway's, and the keys that describe the
// child's hop (its serverInfo). A result without them keeps its bytes.
func dropOwnMeta(raw json.RawMessage) json.RawMessage {
	if !bytes.Contains(raw, []byte(`"`+ownMetaPrefix)) && !bytes.Contains(raw, []byte(metaServerInfo)) {
		return raw
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return raw
	}
	meta, ok := fields["_meta"]
	if !ok {
		return raw
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil {
		return raw
	}
	n := len(m)
	for k := range m {
		if strings.HasPrefix(k, ownMetaPrefix) || hopMetaKey(k) {
			delete(m, k)
		}
	}
	if len(m) == n {
		return raw
	}
	if len(m) == 0 {
		delete(fields, "_meta")
	} else {
		fields["_meta"], _ = json.Marshal(m)
	}
	out, err := json.Marshal(fields)
	if err != nil {
		return raw
	}
	return out
}

// nexusInstructions open the gateway's instructions; the children's follow.
const nexusInstructions = "Nexus gateway: the tools of several MCP servers, each named after the server it comes from."

// instructions are the gateway's instructions for a client: its own line, then each
// connected child's own instructions under a "## <server>" heading, in server-name
// order. They leave through the session's redaction point like every answer.
func (g *Gateway) instructions() string {
	var b strings.Builder
	b.WriteString(nexusInstructions)
	kids := g.kids()
	names := make([]string, 0, len(kids))
	for name := range kids {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		said := strings.TrimSpace(kids[name].instructions())
		if said == "" {
			continue
		}
		b.WriteString("\n\n## " + name + "\n")
		b.WriteString(said)
	}
	return b.String()
}
