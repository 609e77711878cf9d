package aggregation

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/internal/jsonwalk"
)

// A resource URI, or a resource template, that two or more servers list would name
// two things at once: the client is given one namespaced form per owner instead,
//
//	<scheme>://nexus/<server>/<uri as the server wrote it>
//
// where <scheme> is the original URI's own scheme (so a ui:// resource of an MCP App
// stays a ui:// resource), or "nexus" when the original has none a client could
// parse (a template whose scheme is a variable). The original follows verbatim: a
// namespaced template is the original template behind a literal prefix, so a client
// that expands it gets the namespaced form of the original's expansion, and the
// gateway forwards that expansion to its owner unchanged.

// nsAuthority is the authority of every namespaced URI.
const nsAuthority = "://nexus/"

// namespaced is the URI a client is given for the server's uri.
func namespaced(server, uri string) string {
	scheme := "nexus"
	if s, _, ok := strings.Cut(uri, ":"); ok && validScheme(s) {
		scheme = s
	}
	return scheme + nsAuthority + server + "/" + uri
}

// splitNamespaced undoes namespaced: the server and the URI it knows, when uri is a
// namespaced form.
func splitNamespaced(uri string) (server, orig string, ok bool) {
	scheme, rest, found := strings.Cut(uri, nsAuthority)
	if !found || !validScheme(scheme) {
		return "", "", false
	}
	server, orig, found = strings.Cut(rest, "/")
	if !found || orig == "" || !config.ValidServerName(server) {
		return "", "", false
	}
	if scheme != "nexus" && !strings.HasPrefix(orig, scheme+":") {
		return "", "", false
	}
	return server, orig, true
}

// validScheme reports whether s is an RFC 3986 scheme: a letter, then letters,
// digits, '+', '-' or '.'.
func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !letter && (i == 0 || !(r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return false
		}
	}
	return true
}

// setField is raw, a JSON object, with one string field replaced. It returns raw
// unchanged when raw is not an object.
func setField(raw json.RawMessage, field, value string) json.RawMessage {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || fields == nil {
		return raw
	}
	fields[field] = marshal(value)
	return marshal(fields)
}

// marshal encodes v as the child's bytes would be: without escaping <, > and &, so
// text a child sent keeps its bytes when an object around it is re-encoded.
func marshal(v any) json.RawMessage { return jsonwalk.Marshal(v) }

// rewriteURIs rewrites, in a JSON object a server sent, the resource URIs a client
// must spell differently to reach that server: fix returns the URI to use, or its
// argument. It touches, and only ever touches:
//   - "_meta".ui.resourceUri and "_meta"."ui/resourceUri" (an MCP App's UI resource:
//     on a tool as listed and on a tool result);
//   - in "content" (a tool result): a resource_link's "uri" and an embedded
//     resource's "resource".uri;
//   - in "contents" (a resources/read result): each item's "uri".
//
// An object or item in which nothing changed keeps its bytes; raw is returned as it
// is when nothing changed at all.
func rewriteURIs(raw json.RawMessage, fix func(string) string) json.RawMessage {
	if !bytes.Contains(raw, []byte(`"uri"`)) && !bytes.Contains(raw, []byte(`esourceUri"`)) {
		return raw
	}
	out, _ := editObject(raw, func(obj map[string]json.RawMessage) bool {
		meta := editField(obj, "_meta", func(meta map[string]json.RawMessage) bool {
			legacy := editString(meta, "ui/resourceUri", fix)
			ui := editField(meta, "ui", func(ui map[string]json.RawMessage) bool { return editString(ui, "resourceUri", fix) })
			return legacy || ui
		})
		content := editItems(obj, "content", func(it map[string]json.RawMessage) bool {
			var typ string
			_ = json.Unmarshal(it["type"], &typ)
			switch typ {
			case "resource_link":
				return editString(it, "uri", fix)
			case "resource":
				return editField(it, "resource", func(r map[string]json.RawMessage) bool { return editString(r, "uri", fix) })
			}
			return false
		})
		contents := editItems(obj, "contents", func(it map[string]json.RawMessage) bool { return editString(it, "uri", fix) })
		return meta || content || contents
	})
	return out
}

// editObject decodes raw as an object, lets edit change it, and re-encodes it only
// if edit reports a change.
func editObject(raw json.RawMessage, edit func(map[string]json.RawMessage) bool) (json.RawMessage, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil || !edit(obj) {
		return raw, false
	}
	if out := marshal(obj); out != nil {
		return out, true
	}
	return raw, false
}

// editField applies edit to the object under key.
func editField(fields map[string]json.RawMessage, key string, edit func(map[string]json.RawMessage) bool) bool {
	raw, ok := fields[key]
	if !ok {
		return false
	}
	out, changed := editObject(raw, edit)
	fields[key] = out
	return changed
}

// editItems applies edit to each object of the array under key.
func editItems(fields map[string]json.RawMessage, key string, edit func(map[string]json.RawMessage) bool) bool {
	var items []json.RawMessage
	if json.Unmarshal(fields[key], &items) != nil {
		return false
	}
	changed := false
	for i, it := range items {
		var c bool
		if items[i], c = editObject(it, edit); c {
			changed = true
		}
	}
	if changed {
		fields[key] = marshal(items)
	}
	return changed
}

// editString replaces the string under key with fix's answer.
func editString(fields map[string]json.RawMessage, key string, fix func(string) string) bool {
	var s string
	if json.Unmarshal(fields[key], &s) != nil || s == "" {
		return false
	}
	to := fix(s)
	if to == s {
		return false
	}
	fields[key] = marshal(to)
	return true
}
