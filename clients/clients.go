// Package clients knows the config files of MCP clients (Claude Desktop, Claude Code,
// Cursor, VS Code, Codex, Windsurf, Gemini CLI, Zed, Goose, Cline, Roo Code,
// Continue, opencode, LM Studio, GitHub Copilot CLI, Kiro) and edits them, so that
// connecting a client to Nexus, and moving the servers a client already runs
// behind Nexus, takes one command instead of hand-editing JSON, TOML or YAML.
//
// Edits change only the entries they name: every other key, the file's order,
// indentation and comments stay as written. They make a timestamped backup first,
// write atomically (through a symbolic link, which stays), and can be undone; a
// file that cannot be parsed, is read-only or changes meanwhile is refused and
// left alone.
package clients

import (
	"encoding/json"
	"fmt"
	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/internal/jsonedit"
	"github.com/nexus-mcp/nexus/internal/suggest"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Format is the shape of a client's config file.
type Format string

const (
	// FormatMCPServers is Claude Desktop's and Cursor's, and the many clients that
	// copied it: {"mcpServers": {NAME: {"command", "args", "env"} or {"url",
	// "headers", "type"}}}. Comments are kept where the client allows them.
	FormatMCPServers Format = "mcpServers"
	// FormatVSCode is VS Code's mcp.json: {"servers": {NAME: {"type": "stdio"|"http"|"sse",
	// ...}}, "inputs": [...]}. VS Code's user settings.json once held the same object under
	// "mcp"; ReadServers still reads that, Setup writes mcp.json only.
	FormatVSCode Format = "vscode"
	// FormatCopilot is GitHub Copilot CLI's mcp-config.json: "mcpServers" whose
	// entries also name their "type" ("local") and the "tools" the agent may use.
	FormatCopilot Format = "copilot"
	// FormatZed is Zed's settings.json (JSON with comments): servers under
	// "context_servers", each {"command", "args", "env"}.
	FormatZed Format = "zed"
	// FormatOpencode is opencode's opencode.json: servers under "mcp", a local one
	// {"type": "local", "command": [PROGRAM, ARGS...], "environment", "enabled"}.
	FormatOpencode Format = "opencode"
	// FormatGoose is Goose's config.yaml: servers under "extensions", each
	// {type: stdio, cmd, args, envs, enabled, name, timeout}.
	FormatGoose Format = "goose"
	// FormatContinue is Continue's config.yaml: "mcpServers" is a list of
	// {name, command, args, env} (or {name, type, url}).
	FormatContinue Format = "continue"
)

// Client is one known MCP client and where its config file is on this machine.
type Client struct {
	Name    string // "claude-desktop", "cursor", "vscode", "zed"...
	Display string // "Claude Desktop"
	Path    string
	Format  Format
	// NameCap is the longest tool name the client accepts, its own prefix
	// included (0: 64, what the others accept).
	NameCap int
	// NamePrefix is what the client puts before every tool name of a server, %s
	// standing for the server's entry name ("" when it adds nothing).
	NamePrefix string
	// Older are other places the client reads the same file from (an older
	// version's, or another file name it accepts), used when Path is missing.
	Older []string
}

// MaxNameLength is the longest wire name Nexus may send this client through an
// entry called entry, or 0 when Nexus's default (64) fits: Cursor caps names at
// 60, Claude Code prefixes them with mcp__<entry>__ and caps the whole at 64.
func (c Client) MaxNameLength(entry string) int {
	limit := config.DefaultMaxNameLength
	if c.NameCap > 0 {
		limit = c.NameCap
	}
	if c.NamePrefix != "" {
		limit -= len(fmt.Sprintf(c.NamePrefix, entry))
	}
	if limit >= config.DefaultMaxNameLength {
		return 0
	}
	return max(limit, config.MinNameLength)
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
	codexHome := getenv("CODEX_HOME")
	if codexHome == "" {
		codexHome = join(home, ".codex")
	}
	copilotHome := getenv("COPILOT_HOME")
	if copilotHome == "" {
		copilotHome = join(home, ".copilot")
	}
	// dotConfig is ~/.config where command-line tools keep their settings on every
	// OS ($XDG_CONFIG_HOME on Linux), and zedConfig is Zed's.
	dotConfig, zedConfig, gooseConfig := join(home, ".config"), join(home, ".config", "zed"), join(home, ".config", "goose")
	switch goos {
	case "windows":
		zedConfig, gooseConfig = join(appConfig, "Zed"), join(appConfig, "Block", "goose", "config")
	case "darwin":
	default:
		dotConfig = appConfig
		zedConfig, gooseConfig = join(appConfig, "zed"), join(appConfig, "goose")
	}
	vscodeStorage := join(appConfig, "Code", "User", "globalStorage")
	return []Client{
		{Name: "claude-desktop", Display: "Claude Desktop", Path: join(appConfig, "Claude", "claude_desktop_config.json"), Format: FormatMCPServers},
		{Name: "cursor", Display: "Cursor", Path: join(home, ".cursor", "mcp.json"), Format: FormatMCPServers, NameCap: 60},
		{Name: "vscode", Display: "VS Code", Path: join(appConfig, "Code", "User", "mcp.json"), Format: FormatVSCode},
		// Claude Code's user-scope servers live in ~/.claude.json, beside its
		// other settings (which an edit keeps).
		{Name: "claude-code", Display: "Claude Code", Path: join(home, ".claude.json"), Format: FormatMCPServers, NamePrefix: "mcp__%s__"},
		{Name: "codex", Display: "Codex", Path: join(codexHome, "config.toml"), Format: FormatCodex},
		{Name: "windsurf", Display: "Windsurf", Path: join(home, ".codeium", "windsurf", "mcp_config.json"), Format: FormatMCPServers},
		{Name: "gemini", Display: "Gemini CLI", Path: join(home, ".gemini", "settings.json"), Format: FormatMCPServers},
		{Name: "zed", Display: "Zed", Path: join(zedConfig, "settings.json"), Format: FormatZed},
		{Name: "goose", Display: "Goose", Path: join(gooseConfig, "config.yaml"), Format: FormatGoose},
		// Cline keeps its settings in ~/.cline since it shares them between its
		// CLI and editor extensions; older extensions kept them in VS Code's
		// storage, which is used when only that one exists.
		{Name: "cline", Display: "Cline", Path: join(home, ".cline", "data", "settings", "cline_mcp_settings.json"), Format: FormatMCPServers,
			Older: []string{join(vscodeStorage, "saoudrizwan.claude-dev", "settings", "cline_mcp_settings.json")}},
		{Name: "roo-code", Display: "Roo Code", Path: join(vscodeStorage, "rooveterinaryinc.roo-cline", "settings", "mcp_settings.json"), Format: FormatMCPServers},
		{Name: "continue", Display: "Continue", Path: join(home, ".continue", "config.yaml"), Format: FormatContinue},
		{Name: "opencode", Display: "opencode", Path: join(dotConfig, "opencode", "opencode.json"), Format: FormatOpencode,
			Older: []string{join(dotConfig, "opencode", "opencode.jsonc")}},
		{Name: "lm-studio", Display: "LM Studio", Path: join(home, ".lmstudio", "mcp.json"), Format: FormatMCPServers},
		{Name: "copilot-cli", Display: "GitHub Copilot CLI", Path: join(copilotHome, "mcp-config.json"), Format: FormatCopilot},
		{Name: "kiro", Display: "Kiro", Path: join(home, ".kiro", "settings", "mcp.json"), Format: FormatMCPServers},
	}
}

// Located is c with Path set to the file the client uses on this machine: Path
// when it exists or no other place does, else the first of Older that exists.
func (c Client) Located(exists func(string) bool) Client {
	if exists(c.Path) {
		return c
	}
	for _, p := range c.Older {
		if exists(p) {
			c.Path = p
			return c
		}
	}
	return c
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
	if near := suggest.Closest(name, names); near != "" {
		return Client{}, fmt.Errorf("unknown client %q; did you mean %s? (or give the path of its config file)", name, near)
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

// serversPath says where a document keeps its servers: "mcpServers", "servers" or, in
// a VS Code settings.json, "servers" inside "mcp".
func serversPath(doc *jsonedit.Doc, format Format) []string {
	switch format {
	case FormatMCPServers, FormatCopilot:
		return []string{"mcpServers"}
	case FormatZed:
		return []string{"context_servers"}
	case FormatOpencode:
		// opencode 2 moved the servers into "mcp.servers"; a file that has that
		// object is written there, any other as opencode 1 reads it.
		if raw, ok := doc.Get("mcp", "servers"); ok && len(raw) > 0 && raw[0] == '{' {
			var probe map[string]json.RawMessage
			if json.Unmarshal(raw, &probe) == nil && probe["type"] == nil && probe["command"] == nil && probe["url"] == nil {
				return []string{"mcp", "servers"}
			}
		}
		return []string{"mcp"}
	case FormatVSCode:
		if !doc.Has("servers") && doc.Has("mcp") {
			return []string{"mcp", "servers"}
		}
		return []string{"servers"}
	}
	// Unknown format: guess from the keys present.
	switch {
	case doc.Has("mcpServers"):
		return []string{"mcpServers"}
	case doc.Has("context_servers"):
		return []string{"context_servers"}
	case doc.Has("servers"):
		return []string{"servers"}
	case doc.Has("mcp"):
		return []string{"mcp", "servers"}
	}
	return []string{"mcpServers"}
}

// DetectFormat guesses the format of a client file from its name and keys: TOML
// is Codex's, YAML Goose's or Continue's, "context_servers" Zed's, an opencode
// "$schema" opencode's, "servers" or "mcp" VS Code's, anything else the common
// mcpServers shape.
func DetectFormat(file string) (Format, error) {
	f, err := readClientFile(file)
	if err != nil {
		return "", err
	}
	_, format, err := parseDocument(file, "", f.data)
	return format, err
}

func detectFormat(doc *jsonedit.Doc) Format {
	if raw, ok := doc.Get("$schema"); ok && strings.Contains(string(raw), "opencode") {
		return FormatOpencode
	}
	switch p := serversPath(doc, ""); p[len(p)-1] {
	case "servers":
		return FormatVSCode
	case "context_servers":
		return FormatZed
	}
	return FormatMCPServers
}

// serverList is the servers object of a client document: where it is, and its
// entries' names in file order.
type serverList struct {
	doc   *jsonedit.Doc
	path  []string
	names []string
}

// servers finds the servers object of doc; a value there that is not an object
// (or null) is an error.
func servers(file string, doc *jsonedit.Doc, format Format) (*serverList, error) {
	path := serversPath(doc, format)
	for i := range path {
		raw, ok := doc.Get(path[:i+1]...)
		if !ok || string(raw) == "null" {
			break
		}
		if len(raw) == 0 || raw[0] != '{' {
			return nil, fmt.Errorf("%s: %q must be an object of servers by name; fix it by hand, nothing was changed", file, strings.Join(path[:i+1], "."))
		}
	}
	return &serverList{doc: doc, path: path, names: doc.Keys(path...)}, nil
}

func (l *serverList) at(name string) []string { return append(slices.Clone(l.path), name) }

func (l *serverList) get(name string) (json.RawMessage, bool) { return l.doc.Get(l.at(name)...) }

func (l *serverList) delete(name string) {
	l.doc.Delete(false, l.at(name)...)
	l.names = slices.DeleteFunc(l.names, func(n string) bool { return n == name })
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// FindNexus returns the entry that runs Nexus in a client file of the given
// format ("" guesses; the one setup wrote, or one written by hand that runs
// `nexus serve`), for doctor to check what the client starts Nexus with. found
// is false when the file or the entry is missing.
func FindNexus(file string, format Format) (entry Entry, found bool, err error) {
	f, err := readClientFile(file)
	if err != nil || !f.exists {
		return Entry{}, false, err
	}
	doc, _, err := parseDocument(file, format, f.data)
	if err != nil {
		return Entry{}, false, err
	}
	for _, name := range doc.names() {
		raw, _ := doc.entry(name)
		if !isNexusEntry(raw) {
			continue
		}
		var e nexusEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			return Entry{}, false, fmt.Errorf("%s: servers.%s: %w", file, name, err)
		}
		return Entry{Name: name, Command: e.Command, Args: e.Args, Env: e.Env}, true, nil
	}
	return Entry{}, false, nil
}

// IsCodexFile reports whether file is a Codex config (TOML).
func IsCodexFile(file string) bool { return strings.HasSuffix(strings.ToLower(file), ".toml") }

// IsClientFile reports whether arg names a client file by its extension (JSON,
// TOML or YAML) rather than a known client by name.
func IsClientFile(arg string) bool {
	switch strings.ToLower(filepath.Ext(arg)) {
	case ".json", ".jsonc", ".toml", ".yaml", ".yml":
		return true
	}
	return false
}
