package clients

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/nexus-mcp/nexus/internal/jsonedit"
)

// document is a client file parsed for an edit, in its own format (JSON with
// comments, TOML or YAML). Each format keeps what an edit does not name byte
// for byte: comments, order, layout.
type document interface {
	// names lists the server entries in file order.
	names() []string
	// entry returns the entry called name in the shape most clients write
	// ({"command", "args", "env"} or {"url", "headers", "type"}), for import.
	entry(name string) (json.RawMessage, bool)
	// put adds the Nexus entry, or merges it into the entry of that name: the
	// keys Nexus sets are replaced, the user's own (flags, env, "disabled") kept.
	put(e Entry) error
	// remove takes the entry called name out.
	remove(name string) error
	// bytes is the document with its edits.
	bytes() []byte
}

// parseDocument parses the client file called file, whose content is data (nil
// for a file that does not exist yet). An empty format is guessed from the
// file's name and keys.
func parseDocument(file string, format Format, data []byte) (document, Format, error) {
	if format == "" {
		format = formatOfName(file, data)
	}
	switch format {
	case FormatCodex:
		d, err := parseCodex(file, data)
		return d, format, err
	case FormatGoose, FormatContinue:
		d, err := parseYAML(file, format, data)
		return d, format, err
	}
	doc, err := jsonedit.Parse(data)
	if err != nil {
		return nil, "", jsonError(file, err)
	}
	if format == "" {
		format = detectFormat(doc)
	}
	srv, err := servers(file, doc, format)
	if err != nil {
		return nil, "", err
	}
	return &jsonDocument{format: format, srv: srv}, format, nil
}

// formatOfName guesses a format from a file's extension: TOML is Codex's, YAML
// Goose's when it has "extensions" and else Continue's; "" for JSON, whose keys
// tell.
func formatOfName(file string, data []byte) Format {
	switch strings.ToLower(filepath.Ext(file)) {
	case ".toml":
		return FormatCodex
	case ".yaml", ".yml":
		var top map[string]any
		if yaml.Unmarshal(data, &top) == nil && top["extensions"] != nil {
			return FormatGoose
		}
		return FormatContinue
	}
	return ""
}

// jsonError says where a client file's JSON is broken, as file:line (which an
// editor jumps to), keeping the parser's line, column and reason.
func jsonError(file string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "hujson: ")
	var line int
	if _, scanErr := fmt.Sscanf(msg, "line %d", &line); scanErr == nil {
		return fmt.Errorf("%s:%d: not valid JSON (%s); fix it by hand or restore a backup, nothing was changed", file, line, msg)
	}
	return fmt.Errorf("%s is not valid JSON (%s); fix it by hand or restore a backup, nothing was changed", file, msg)
}

// jsonDocument is a JSON client file: its servers object and the shape of its
// entries.
type jsonDocument struct {
	format Format
	srv    *serverList
}

func (d *jsonDocument) names() []string { return d.srv.names }

func (d *jsonDocument) entry(name string) (json.RawMessage, bool) {
	raw, ok := d.srv.get(name)
	if !ok {
		return nil, false
	}
	switch d.format {
	case FormatOpencode:
		return fromOpencode(raw), true
	case FormatCopilot:
		return fromCopilot(raw), true
	case FormatZed:
		return fromZed(raw), true
	}
	return commonURL(raw), true
}

func (d *jsonDocument) put(e Entry) error {
	if d.format == FormatOpencode {
		return putOpencode(d.srv, e)
	}
	return putEntry(d.srv, e, d.format)
}

func (d *jsonDocument) remove(name string) error {
	d.srv.delete(name)
	return nil
}

func (d *jsonDocument) bytes() []byte { return d.srv.doc.Bytes() }

// commonURL gives the url of an entry under the key most clients use: Windsurf
// writes "serverUrl", Gemini CLI "httpUrl" for streamable HTTP (its "url" being
// SSE).
func commonURL(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return raw
	}
	switch {
	case m["serverUrl"] != nil && m["url"] == nil:
		m["url"] = m["serverUrl"]
		delete(m, "serverUrl")
	case m["httpUrl"] != nil:
		m["url"] = m["httpUrl"]
		m["type"] = json.RawMessage(`"http"`)
		delete(m, "httpUrl")
	case string(m["type"]) == `"local"`: // GitHub Copilot CLI's name for stdio
		m["type"] = json.RawMessage(`"stdio"`)
	case m["url"] != nil && m["type"] == nil && m["command"] == nil && isGeminiSSE(m):
		m["type"] = json.RawMessage(`"sse"`)
	default:
		return raw
	}
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}

// isGeminiSSE reports whether a url entry carries a key only Gemini CLI writes
// (its "url" means SSE).
func isGeminiSSE(m map[string]json.RawMessage) bool {
	for _, k := range []string{"trust", "includeTools", "excludeTools"} {
		if m[k] != nil {
			return true
		}
	}
	return false
}

// fromZed converts the entry of a Zed before 0.194, whose "command" was an
// object {"path", "args", "env"}, to the flat shape Zed reads today.
func fromZed(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil || len(m["command"]) == 0 || m["command"][0] != '{' {
		return raw
	}
	var old struct {
		Path string            `json:"path"`
		Args []string          `json:"args"`
		Env  map[string]string `json:"env"`
	}
	if json.Unmarshal(m["command"], &old) != nil {
		return raw
	}
	out, err := json.Marshal(map[string]any{"command": old.Path, "args": old.Args, "env": old.Env})
	if err != nil {
		return raw
	}
	return out
}

// fromCopilot converts a GitHub Copilot CLI entry: its "local" type is stdio,
// and "tools" (which of the server's tools Copilot may call) is its own.
func fromCopilot(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return raw
	}
	if string(m["type"]) == `"local"` {
		m["type"] = json.RawMessage(`"stdio"`)
	}
	delete(m, "tools")
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}

// opencodeEntry is an entry of opencode's "mcp": a local server's command is
// one array (program first), its environment "environment"; a remote one has
// "url" and "headers".
type opencodeEntry struct {
	Type        string            `json:"type"`
	Command     []string          `json:"command,omitempty"`
	Environment map[string]string `json:"environment,omitempty"`
	URL         string            `json:"url,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
}

// fromOpencode converts an opencode entry to the common shape; an entry it
// cannot read is passed on as it is, for convert to refuse with its reason.
func fromOpencode(raw json.RawMessage) json.RawMessage {
	var o opencodeEntry
	if json.Unmarshal(raw, &o) != nil {
		return raw
	}
	var out any
	switch {
	case o.Type == "remote" || o.URL != "":
		out = map[string]any{"url": o.URL, "headers": o.Headers}
	case len(o.Command) > 0:
		out = map[string]any{"command": o.Command[0], "args": o.Command[1:], "env": o.Environment}
	default:
		return raw
	}
	b, err := json.Marshal(out)
	if err != nil {
		return raw
	}
	return b
}

// putOpencode writes the Nexus entry in opencode's shape, keeping the user's
// keys ("enabled", "timeout") and flags, as putEntry does for the others.
func putOpencode(srv *serverList, e Entry) error {
	at := srv.at(e.Name)
	old, exists := srv.get(e.Name)
	var have opencodeEntry
	if exists && json.Unmarshal(old, &have) != nil {
		return fmt.Errorf("the %q entry has a command or environment of the wrong type; fix it by hand, nothing was changed", e.Name)
	}
	var args []string
	if len(have.Command) > 0 {
		args = have.Command[1:]
	}
	command := append([]string{e.Command}, MergeArgs(args, e.Args)...)
	env := mergeEnv(have.Environment, e.Env)
	if !exists || len(old) == 0 || old[0] != '{' {
		// opencode 1 needs "enabled"; opencode 2 (servers under mcp.servers)
		// refuses it and enables a server unless it says "disabled".
		var enabled *bool
		if len(srv.path) == 1 {
			enabled = new(true)
		}
		entry := struct {
			Type        string            `json:"type"`
			Command     []string          `json:"command"`
			Enabled     *bool             `json:"enabled,omitempty"`
			Environment map[string]string `json:"environment,omitempty"`
		}{"local", command, enabled, env}
		return srv.doc.Set(entry, at...)
	}
	set := func(key string, v any) error {
		path := append(at, key)
		if got, ok := srv.doc.Get(path...); ok {
			if want, err := json.Marshal(v); err == nil && jsonEqual(got, want) {
				return nil
			}
		}
		return srv.doc.Set(v, path...)
	}
	if err := set("type", "local"); err != nil {
		return err
	}
	if err := set("command", command); err != nil {
		return err
	}
	if len(env) > 0 {
		return set("environment", env)
	}
	return nil
}

// mergeEnv is the env an entry keeps when setup runs again: the user's
// variables, then Nexus's own set one by one, PATH merged (MergePathList).
func mergeEnv(have, next map[string]string) map[string]string {
	if len(have) == 0 && len(next) == 0 {
		return nil
	}
	env := map[string]string{}
	for k, v := range have {
		env[k] = v
	}
	for k, v := range next {
		if old, ok := have[k]; ok && k == "PATH" {
			v = MergePathList(old, v)
		}
		env[k] = v
	}
	return env
}
