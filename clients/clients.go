// Package clients knows the config files of MCP clients (Claude Desktop, Cursor, VS
// Code) and edits them, so that connecting a client to Nexus, and moving the servers
// a client already runs behind Nexus, takes one command instead of hand-editing JSON.
//
// Edits keep every key of the client file that they do not touch, in its order, make a
// timestamped backup first and write atomically; a file that cannot be parsed, or that
// holds comments an edit would lose, is refused and left alone.
package clients

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
)

// Format is the shape of a client's config file.
type Format string

const (
	// FormatMCPServers is Claude Desktop's and Cursor's: {"mcpServers": {NAME: {"command",
	// "args", "env"} or {"url", "headers", "type"}}}.
	FormatMCPServers Format = "mcpServers"
	// FormatVSCode is VS Code's mcp.json: {"servers": {NAME: {"type": "stdio"|"http"|"sse",
	// ...}}, "inputs": [...]}. VS Code's user settings.json once held the same object under
	// "mcp"; ReadServers still reads that, Setup writes mcp.json only.
	FormatVSCode Format = "vscode"
)

// Client is one known MCP client and where its config file is on this machine.
type Client struct {
	Name    string // "claude-desktop", "cursor" or "vscode"
	Display string // "Claude Desktop"
	Path    string
	Format  Format
}

// Known lists the clients whose config files Nexus can edit, with their paths on goos
// for a user whose home directory is home. getenv reads the environment (APPDATA on
// Windows, XDG_CONFIG_HOME on Linux); they are parameters so that the paths of every
// OS can be checked anywhere.
func Known(goos, home string, getenv func(string) string) []Client {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	join := func(elem ...string) string { return joinFor(goos, elem...) }
	// appConfig is where desktop apps (Electron) keep their settings on goos.
	var appConfig string
	switch goos {
	case "darwin":
		appConfig = join(home, "Library", "Application Support")
	case "windows":
		appConfig = getenv("APPDATA")
		if appConfig == "" {
			appConfig = join(home, "AppData", "Roaming")
		}
	default:
		appConfig = getenv("XDG_CONFIG_HOME")
		if appConfig == "" || !strings.HasPrefix(appConfig, "/") {
			appConfig = join(home, ".config")
		}
	}
	return []Client{
		{Name: "claude-desktop", Display: "Claude Desktop", Path: join(appConfig, "Claude", "claude_desktop_config.json"), Format: FormatMCPServers},
		{Name: "cursor", Display: "Cursor", Path: join(home, ".cursor", "mcp.json"), Format: FormatMCPServers},
		{Name: "vscode", Display: "VS Code", Path: join(appConfig, "Code", "User", "mcp.json"), Format: FormatVSCode},
	}
}

// Find returns the known client called name.
func Find(name, goos, home string, getenv func(string) string) (Client, error) {
	var names []string
	for _, c := range Known(goos, home, getenv) {
		if c.Name == name {
			return c, nil
		}
		names = append(names, c.Name)
	}
	return Client{}, fmt.Errorf("unknown client %q: use one of %s, or give the path of its config file", name, strings.Join(names, ", "))
}

// joinFor joins path elements with the separator of goos, so that Windows paths can
// be built (and tested) on any OS.
func joinFor(goos string, elem ...string) string {
	if goos != "windows" {
		return path.Join(elem...)
	}
	var parts []string
	for i, e := range elem {
		e = strings.ReplaceAll(e, "/", `\`)
		if i > 0 {
			e = strings.Trim(e, `\`)
		} else {
			e = strings.TrimRight(e, `\`)
		}
		if e != "" {
			parts = append(parts, e)
		}
	}
	return strings.Join(parts, `\`)
}

// document is a JSON object that remembers the order of its keys, so that an edit
// leaves the rest of a user's file as it was.
type document struct {
	keys []string
	vals map[string]json.RawMessage
}

func parseDocument(data []byte) (*document, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("the top level must be a JSON object")
	}
	doc := &document{vals: map[string]json.RawMessage{}}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key := tok.(string) // object keys are strings, or Token errs
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		if _, dup := doc.vals[key]; !dup {
			doc.keys = append(doc.keys, key)
		}
		doc.vals[key] = raw
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("trailing data after the JSON object")
	}
	return doc, nil
}

func (d *document) get(key string) (json.RawMessage, bool) {
	v, ok := d.vals[key]
	return v, ok
}

func (d *document) set(key string, v json.RawMessage) {
	if _, ok := d.vals[key]; !ok {
		d.keys = append(d.keys, key)
	}
	d.vals[key] = v
}

func (d *document) delete(key string) {
	if _, ok := d.vals[key]; !ok {
		return
	}
	delete(d.vals, key)
	for i, k := range d.keys {
		if k == key {
			d.keys = append(d.keys[:i], d.keys[i+1:]...)
			break
		}
	}
}

// pretty encodes the document indented by two spaces, keys in their order.
func (d *document) pretty() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range d.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(d.vals[k])
	}
	b.WriteByte('}')
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// stripJSONC removes // and /* */ comments and trailing commas, which VS Code allows
// in its files, leaving strings alone.
func stripJSONC(data []byte) []byte {
	out := make([]byte, 0, len(data))
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			out = append(out, c)
			if c == '\\' && i+1 < len(data) {
				i++
				out = append(out, data[i])
			} else if c == '"' {
				inString = false
			}
			continue
		}
		switch {
		case c == '"':
			inString = true
			out = append(out, c)
		case c == '/' && i+1 < len(data) && data[i+1] == '/':
			for i < len(data) && data[i] != '\n' {
				i++
			}
			if i < len(data) {
				out = append(out, '\n')
			}
		case c == '/' && i+1 < len(data) && data[i+1] == '*':
			end := bytes.Index(data[i+2:], []byte("*/"))
			if end < 0 {
				return append(out, data[i:]...) // unterminated: let the parser complain
			}
			// Keep line breaks so that error positions still match the file.
			out = append(out, bytes.Repeat([]byte{'\n'}, bytes.Count(data[i:i+2+end], []byte{'\n'}))...)
			i += end + 3
		case c == ',':
			j := i + 1
			for j < len(data) && strings.IndexByte(" \t\r\n", data[j]) >= 0 {
				j++
			}
			if j < len(data) && (data[j] == '}' || data[j] == ']') {
				continue
			}
			out = append(out, c)
		default:
			out = append(out, c)
		}
	}
	return out
}

// readDocument reads a client file. A missing file is an empty document (exists
// false). hasComments reports comments or trailing commas, which an edit would lose.
func readDocument(file string) (doc *document, data []byte, exists, hasComments bool, err error) {
	data, err = os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return &document{vals: map[string]json.RawMessage{}}, nil, false, false, nil
	}
	if err != nil {
		return nil, nil, false, false, fmt.Errorf("reading %s: %w", file, err)
	}
	clean := stripJSONC(data)
	if len(bytes.TrimSpace(clean)) == 0 {
		return &document{vals: map[string]json.RawMessage{}}, data, true, !bytes.Equal(clean, data), nil
	}
	doc, err = parseDocument(clean)
	if err != nil {
		return nil, nil, false, false, fmt.Errorf("%s is not valid JSON (%s); fix it by hand or restore a backup, nothing was changed", file, describeJSONError(clean, err))
	}
	return doc, data, true, !bytes.Equal(clean, data), nil
}

func describeJSONError(data []byte, err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line := 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte{'\n'})
		return fmt.Sprintf("line %d: %v", line, se)
	}
	return err.Error()
}

// serversKey says where a document keeps its servers: "mcpServers", "servers" or, in a
// VS Code settings.json, "servers" inside "mcp".
func serversKey(doc *document, format Format) (nested bool, key string) {
	switch {
	case format == FormatMCPServers:
		return false, "mcpServers"
	case format == FormatVSCode:
		if _, ok := doc.get("servers"); !ok {
			if _, ok := doc.get("mcp"); ok {
				return true, "servers"
			}
		}
		return false, "servers"
	}
	// Unknown format: guess from the keys present.
	if _, ok := doc.get("mcpServers"); ok {
		return false, "mcpServers"
	}
	if _, ok := doc.get("servers"); ok {
		return false, "servers"
	}
	if _, ok := doc.get("mcp"); ok {
		return true, "servers"
	}
	return false, "mcpServers"
}

// DetectFormat guesses the format of a client file from its keys: "servers" or "mcp"
// mean VS Code, anything else the common mcpServers shape.
func DetectFormat(file string) (Format, error) {
	doc, _, _, _, err := readDocument(file)
	if err != nil {
		return "", err
	}
	if _, key := serversKey(doc, ""); key == "servers" {
		return FormatVSCode, nil
	}
	return FormatMCPServers, nil
}

// servers returns the servers object of doc, in order.
func servers(file string, doc *document, format Format) (*document, error) {
	nested, key := serversKey(doc, format)
	where := key
	src := doc
	if nested {
		where = "mcp.servers"
		raw, _ := doc.get("mcp")
		mcp, err := parseDocument(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: \"mcp\" must be an object; fix it by hand, nothing was changed", file)
		}
		src = mcp
	}
	raw, ok := src.get(key)
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return &document{vals: map[string]json.RawMessage{}}, nil
	}
	s, err := parseDocument(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %q must be an object of servers by name; fix it by hand, nothing was changed", file, where)
	}
	return s, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
