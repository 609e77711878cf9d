package tests

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nexus-mcp/nexus/clients"
	"github.com/nexus-mcp/nexus/secrets"
)

// clPlace copies testdata/clients/NAME to where client's config file is for a user
// whose home is h.dir, with NEXUS_BIN replaced by the nexus binary under test, and
// returns the path.
func clPlace(t *testing.T, h *home, client, name string) string {
	t.Helper()
	c, err := clients.Find(client, runtime.GOOS, h.dir, func(k string) string {
		if k == "APPDATA" {
			return filepath.Join(h.dir, "AppData", "Roaming")
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	if name == "" {
		return c.Path
	}
	data, err := os.ReadFile(filepath.Join("testdata", "clients", name))
	if err != nil {
		t.Fatal(err)
	}
	data = []byte(strings.ReplaceAll(string(data), "NEXUS_BIN", built.nexus))
	if err := os.MkdirAll(filepath.Dir(c.Path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.Path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return c.Path
}

// clEnv is h.env() with APPDATA inside the home too (Windows).
func clEnv(h *home, extra ...string) []string {
	return append(h.env("APPDATA="+filepath.Join(h.dir, "AppData", "Roaming")), extra...)
}

func clRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func clBackups(t *testing.T, path string) []string {
	t.Helper()
	b, err := filepath.Glob(path + ".nexus-backup-*")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// clServers decodes the "servers" of the Nexus config of h.
func clServers(t *testing.T, h *home) map[string]struct {
	Transport, Command, URL string
	Args                    []string
	Env, Headers            map[string]string
} {
	t.Helper()
	var cfg struct {
		Servers map[string]struct {
			Transport, Command, URL string
			Args                    []string
			Env, Headers            map[string]string
		}
	}
	data, err := os.ReadFile(filepath.Join(h.dir, "config.json"))
	if err != nil {
		t.Fatalf("reading the Nexus config: %v", err)
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg.Servers
}

func clNoConfig(t *testing.T, h *home, what string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(h.dir, "config.json")); err == nil {
		t.Errorf("%s wrote the Nexus config:\n%s", what, clRead(t, filepath.Join(h.dir, "config.json")))
	}
}

func TestSetupClaudeDesktop(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	path := clPlace(t, h, "claude-desktop", "claude_desktop_config.json")
	original := clRead(t, path)

	// --dry-run shows the diff and writes nothing.
	out, stderr, code := h.nexusEnv(clEnv(h), "setup", "claude-desktop", "--dry-run", "--move-all")
	if code != 0 {
		t.Fatalf("setup --dry-run: %s", stderr)
	}
	for _, want := range []string{"--- " + path, `+    "nexus": {`, `-    "Sample Docs": {`, "dry run: nothing was written", "would move behind Nexus: Sample Docs as sample-docs"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, out)
		}
	}
	if clRead(t, path) != original || len(clBackups(t, path)) != 0 {
		t.Error("--dry-run changed the client file or made a backup")
	}
	clNoConfig(t, h, "--dry-run")

	// Without a terminal and without --move flags, nothing moves.
	out, stderr, code = h.nexusEnv(clEnv(h), "setup", "claude-desktop", "--agent", "coder")
	if code != 0 {
		t.Fatalf("setup: %s", stderr)
	}
	backups := clBackups(t, path)
	if len(backups) != 1 || clRead(t, backups[0]) != original || !strings.Contains(out, backups[0]) {
		t.Errorf("want one backup holding the original, named in the output: %v\n%s", backups, out)
	}
	if !strings.Contains(out, "still run by the client itself: Sample Docs, Code Graph") {
		t.Errorf("setup should say which servers stay in the client:\n%s", out)
	}
	var doc struct {
		GlobalShortcut string                     `json:"globalShortcut"`
		Preferences    map[string]any             `json:"preferences"`
		MCPServers     map[string]json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(clRead(t, path)), &doc); err != nil {
		t.Fatal(err)
	}
	var nexus struct {
		Command string
		Args    []string
	}
	json.Unmarshal(doc.MCPServers["nexus"], &nexus)
	if doc.GlobalShortcut != "Ctrl+Space" || doc.Preferences["theme"] != "dark" || len(doc.MCPServers) != 3 {
		t.Errorf("unrelated keys should be kept:\n%s", clRead(t, path))
	}
	if nexus.Command != built.nexus || strings.Join(nexus.Args, " ") != "serve --agent coder" {
		t.Errorf("the nexus entry: %+v", nexus)
	}
	clNoConfig(t, h, "setup without moves")

	// Again with --move-all: the servers move into the Nexus config.
	_, stderr, code = h.nexusEnv(clEnv(h), "setup", "claude-desktop", "--agent", "coder", "--move-all")
	if code != 0 {
		t.Fatalf("setup --move-all: %s", stderr)
	}
	after := clRead(t, path)
	if strings.Contains(after, "Sample Docs") || strings.Contains(after, "Code Graph") || !strings.Contains(after, `"nexus"`) || !strings.Contains(after, "quickEntry") {
		t.Errorf("the client file after --move-all:\n%s", after)
	}
	srv := clServers(t, h)
	if s := srv["sample-docs"]; s.Command != built.nexus || strings.Join(s.Args, " ") != "sample-server doc-kg" {
		t.Errorf("sample-docs in the Nexus config: %+v", srv)
	}
	if s := srv["code-graph"]; s.Env["UNITS"] != "metric" {
		t.Errorf("code-graph in the Nexus config keeps its env: %+v", s)
	}
	out, _, _ = h.nexusEnv(clEnv(h), "list-tools", "--json")
	if !strings.Contains(out, `"sample-docs.doc_kg_search"`) || !strings.Contains(out, `"code-graph.kg_latest_graph"`) {
		t.Errorf("the moved servers' tools: %s", out)
	}

	// Once more: nothing to change.
	out, _, code = h.nexusEnv(clEnv(h), "setup", "claude-desktop", "--agent", "coder")
	if code != 0 || !strings.Contains(out, "already runs Nexus") || len(clBackups(t, path)) != 2 {
		t.Errorf("a second setup: %d\n%s (backups %v)", code, out, clBackups(t, path))
	}
}

func TestSetupMoveWithSecretsInsecureFileStore(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	path := clPlace(t, h, "claude-desktop", "claude_desktop_secrets.json")
	noBus := append(catNoBus(h), "APPDATA="+filepath.Join(h.dir, "AppData", "Roaming"))
	original := clRead(t, path)

	// No keychain: the secrets cannot be stored, so both servers (each has a token)
	// stay in the client, with the reason; Nexus itself is added.
	out, stderr, code := h.nexusEnv(noBus, "setup", "claude-desktop", "--move-all")
	if code != 1 || firstLine(stderr) != "nexus: 2 server(s) were not moved (they stay in the client); see why above" || strings.Count(out, "not moved (it stays in the client)") != 2 || !strings.Contains(out, "its secrets cannot be stored") || !strings.Contains(out, "--insecure-file-store") {
		t.Errorf("want both servers kept in the client, with why and the fix: %d\n%s%s", code, out, stderr)
	}
	if after := clRead(t, path); after == original || !strings.Contains(after, "ghp_nexustestnexustestnexustest") || !strings.Contains(after, "remote-docs") {
		t.Errorf("the client file should keep both servers and gain Nexus:\n%s", after)
	}
	clNoConfig(t, h, "a setup that moved nothing")

	h.writeConfig(map[string]any{"secrets": map[string]any{"insecureFileStore": true}})
	out, stderr, code = h.nexusEnv(noBus, "setup", "claude-desktop", "--move-all")
	if code != 0 {
		t.Fatalf("setup --move-all --insecure-file-store: %s", stderr)
	}
	for _, leak := range []string{"ghp_nexustestnexustestnexustest", "nexus-test-bearer-token"} {
		if strings.Contains(out+stderr, leak) || strings.Contains(clRead(t, filepath.Join(h.dir, "config.json")), leak) {
			t.Errorf("secret %s leaked into the output or the config:\n%s%s", leak, out, stderr)
		}
	}
	srv := clServers(t, h)
	if srv["github"].Env["GITHUB_PERSONAL_ACCESS_TOKEN"] != "${keyring:github/env/GITHUB_PERSONAL_ACCESS_TOKEN}" || srv["github"].Env["GITHUB_API_URL"] != "https://api.github.com" {
		t.Errorf("github env: %+v", srv["github"])
	}
	if srv["remote-docs"].Headers["Authorization"] != "Bearer ${keyring:remote-docs/header/Authorization}" || srv["remote-docs"].Headers["X-Team"] != "platform" {
		t.Errorf("remote-docs headers: %+v", srv["remote-docs"])
	}
	f := &secrets.File{Path: filepath.Join(h.dir, "secrets", "secrets.json")}
	for name, want := range map[string]string{"github/env/GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_nexustestnexustestnexustest", "remote-docs/header/Authorization": "nexus-test-bearer-token"} {
		if v, err := f.Get(context.Background(), name); err != nil || v != want {
			t.Errorf("secret %s: %q %v", name, v, err)
		}
	}
	if after := clRead(t, path); strings.Contains(after, "ghp_") || !strings.Contains(after, `"theme": "light"`) {
		t.Errorf("the client file after the move:\n%s", after)
	}
}

func TestSetupMoveWithSecretsKeychain(t *testing.T) {
	realKeychain(t)
	h := newHome(t, nil)
	path := clPlace(t, h, "claude-desktop", "claude_desktop_secrets.json")
	if _, stderr, code := h.nexusEnv(clEnv(h), "setup", "claude-desktop", "--move", "github"); code != 0 {
		t.Fatalf("setup --move github: %s", stderr)
	}
	t.Cleanup(func() { h.nexus("remove", "github") })
	if srv := clServers(t, h); srv["github"].Env["GITHUB_PERSONAL_ACCESS_TOKEN"] != "${keyring:github/env/GITHUB_PERSONAL_ACCESS_TOKEN}" || len(srv) != 1 {
		t.Errorf("servers after the move: %+v", srv)
	}
	kr := &secrets.Keyring{}
	if v, err := kr.Get(context.Background(), "github/env/GITHUB_PERSONAL_ACCESS_TOKEN"); err != nil || v != "ghp_nexustestnexustestnexustest" {
		t.Errorf("the token in the keychain: %q %v", v, err)
	}
	if after := clRead(t, path); strings.Contains(after, "ghp_") || !strings.Contains(after, "remote-docs") {
		t.Errorf("only github should leave the client:\n%s", after)
	}
}

func TestSetupRefusesMalformedFile(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	path := clPlace(t, h, "claude-desktop", "malformed.json")
	original := clRead(t, path)
	for _, args := range [][]string{{"setup", "claude-desktop"}, {"setup", "claude-desktop", "--move-all"}, {"import", "claude-desktop"}, {"setup", path, "--dry-run"}} {
		_, stderr, code := h.nexusEnv(clEnv(h), args...)
		if code == 0 || !strings.Contains(stderr, "not valid JSON") || !strings.Contains(stderr, "line 4") {
			t.Errorf("nexus %v on a malformed file: %d %s", args, code, stderr)
		}
	}
	if clRead(t, path) != original || len(clBackups(t, path)) != 0 {
		t.Error("a malformed file was changed")
	}
	clNoConfig(t, h, "a refused setup")
}

func TestSetupCreatesVSCodeFile(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	path := clPlace(t, h, "vscode", "")
	out, stderr, code := h.nexusEnv(clEnv(h), "setup", "vscode")
	if code != 0 || !strings.Contains(out, "created "+path) {
		t.Fatalf("setup vscode without a file: %d %s%s", code, out, stderr)
	}
	var doc struct {
		Servers map[string]struct{ Type, Command string }
	}
	if err := json.Unmarshal([]byte(clRead(t, path)), &doc); err != nil || doc.Servers["nexus"].Type != "stdio" || doc.Servers["nexus"].Command != built.nexus {
		t.Errorf("the new VS Code file: %s", clRead(t, path))
	}
	if _, stderr, code := h.nexusEnv(clEnv(h), "setup", "notepad"); code != 2 || !strings.Contains(stderr, "claude-desktop, cursor, vscode") {
		t.Errorf("an unknown client: %d %s", code, stderr)
	}
}

func TestImportClaudeDesktop(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	path := clPlace(t, h, "claude-desktop", "claude_desktop_config.json")
	original := clRead(t, path)

	out, stderr, code := h.nexusEnv(clEnv(h), "import", "claude-desktop", "--dry-run")
	if code != 0 || !strings.Contains(out, "would import Sample Docs as sample-docs") || !strings.Contains(out, "dry run") {
		t.Errorf("import --dry-run: %d\n%s%s", code, out, stderr)
	}
	clNoConfig(t, h, "import --dry-run")

	// Without a terminal, the import shows what each server runs and needs --yes.
	out, stderr, code = h.nexusEnv(clEnv(h), "import", "claude-desktop")
	if code != 2 || !strings.Contains(stderr, "sample-docs: command: ") || !strings.Contains(stderr, "sample-server doc-kg") || !strings.Contains(stderr, "--yes") {
		t.Fatalf("import without --yes: exit %d, want 2 showing the command lines\n%s%s", code, out, stderr)
	}
	clNoConfig(t, h, "import without --yes")
	out, stderr, code = h.nexusEnv(clEnv(h), "import", "claude-desktop", "--yes")
	if code != 0 {
		t.Fatalf("import: %s", stderr)
	}
	for _, want := range []string{"imported Sample Docs as sample-docs", "imported Code Graph as code-graph", `key "alwaysAllow" is not used by Nexus`} {
		if !strings.Contains(out, want) {
			t.Errorf("import output lacks %q:\n%s", want, out)
		}
	}
	if clRead(t, path) != original {
		t.Error("import changed the client file")
	}
	srv := clServers(t, h)
	if len(srv) != 2 || srv["sample-docs"].Command != built.nexus {
		t.Errorf("servers after import: %+v", srv)
	}
	out, stderr, code = h.nexusEnv(clEnv(h), "list-tools", "--json")
	if code != 0 || !strings.Contains(out, `"sample-docs.doc_kg_search"`) {
		t.Errorf("list-tools after import: %s%s", out, stderr)
	}
	// Importing again adds nothing.
	out, _, code = h.nexusEnv(clEnv(h), "import", "claude-desktop")
	if code != 0 || !strings.Contains(out, "Sample Docs is already configured in Nexus as sample-docs") || len(clServers(t, h)) != 2 {
		t.Errorf("a second import: %s", out)
	}
}

func TestImportCursor(t *testing.T) {
	t.Parallel()
	// A server named linear exists already, with another launch: the import is renamed.
	h := newHome(t, map[string]any{"servers": map[string]any{"linear": map[string]any{"command": "linear-local"}}})
	clPlace(t, h, "cursor", "cursor_mcp.json")
	out, stderr, code := h.nexusEnv(clEnv(h), "import", "cursor", "--json", "--yes")
	if code != 1 || !strings.Contains(stderr, "\nnexus: 1 server(s) were not imported; see why above") { // broken is left behind
		t.Fatalf("import cursor: exit %d: %s", code, stderr)
	}
	var rep struct {
		Servers []struct {
			Original, Name, Status, Error string
			Notes                         []string
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("import --json: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, s := range rep.Servers {
		got[s.Original] = s.Status + " " + s.Name
		if s.Original == "broken" && !strings.Contains(s.Error, "carrier-pigeon") {
			t.Errorf("the broken entry's error: %q", s.Error)
		}
	}
	want := map[string]string{"linear": "imported linear-2", "weather": "imported weather", "broken": "skipped "}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	if _, ok := got["nexus"]; ok {
		t.Error("the nexus entry itself should not be imported")
	}
	srv := clServers(t, h)
	if srv["linear"].Command != "linear-local" || srv["linear-2"].Transport != "sse" || srv["linear-2"].URL != "https://mcp.linear.app/sse" {
		t.Errorf("linear after import: %+v", srv)
	}
	if srv["weather"].Env["WEATHER_API_KEY"] != "${env:WEATHER_API_KEY}" || srv["weather"].Env["UNITS"] != "metric" {
		t.Errorf("weather env after import: %+v", srv["weather"])
	}

	// A client file given by path (VS Code's format).
	vs := filepath.Join(t.TempDir(), "mcp.json")
	data, _ := os.ReadFile(filepath.Join("testdata", "clients", "vscode_mcp.json"))
	os.WriteFile(vs, data, 0o600)
	out, stderr, code = h.nexusEnv(clEnv(h), "import", vs, "--yes")
	if code != 0 || !strings.Contains(out, "imported time") || clServers(t, h)["time"].Command != "uvx" {
		t.Errorf("import FILE: %d %s%s", code, out, stderr)
	}
}

func TestSetupAsksWhichToMoveOnTerminal(t *testing.T) {
	h := newHome(t, nil)
	path := clPlace(t, h, "claude-desktop", "claude_desktop_config.json")
	term := catStartTerminal(t, clEnv(h), "setup", "claude-desktop")
	term.answer("Move which?", "2")
	out := term.wait()
	if !strings.Contains(out, "1) Sample Docs") || !strings.Contains(out, "moved behind Nexus: Code Graph as code-graph") {
		t.Errorf("the setup dialogue:\n%s", out)
	}
	after := clRead(t, path)
	if strings.Contains(after, "Code Graph") || !strings.Contains(after, "Sample Docs") || !strings.Contains(after, `"nexus"`) {
		t.Errorf("the client file after moving Code Graph:\n%s", after)
	}
	if srv := clServers(t, h); len(srv) != 1 || srv["code-graph"].Command != built.nexus {
		t.Errorf("the Nexus config after moving Code Graph: %+v", srv)
	}
}
