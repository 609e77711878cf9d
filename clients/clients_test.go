package clients

import (
	"encoding/json"
	"fmt"
	nexsecrets "github.com/nexus-mcp/nexus/secrets"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestKnownPaths(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tt := range []struct {
		goos, home string
		env        map[string]string
		want       map[string]string
	}{
		{"darwin", "/Users/me", nil, map[string]string{
			"claude-desktop": "/Users/me/Library/Application Support/Claude/claude_desktop_config.json",
			"cursor":         "/Users/me/.cursor/mcp.json",
			"vscode":         "/Users/me/Library/Application Support/Code/User/mcp.json",
		}},
		{"windows", `C:\Users\me`, map[string]string{"APPDATA": `C:\Users\me\AppData\Roaming`}, map[string]string{
			"claude-desktop": `C:\Users\me\AppData\Roaming\Claude\claude_desktop_config.json`,
			"cursor":         `C:\Users\me\.cursor\mcp.json`,
			"vscode":         `C:\Users\me\AppData\Roaming\Code\User\mcp.json`,
		}},
		{"windows", `D:\home\me\`, nil, map[string]string{
			"claude-desktop": `D:\home\me\AppData\Roaming\Claude\claude_desktop_config.json`,
		}},
		{"linux", "/home/me", nil, map[string]string{
			"claude-desktop": "/home/me/.config/Claude/claude_desktop_config.json",
			"cursor":         "/home/me/.cursor/mcp.json",
			"vscode":         "/home/me/.config/Code/User/mcp.json",
		}},
		{"linux", "/home/me", map[string]string{"XDG_CONFIG_HOME": "/xdg"}, map[string]string{
			"claude-desktop": "/xdg/Claude/claude_desktop_config.json",
			"vscode":         "/xdg/Code/User/mcp.json",
		}},
	} {
		for name, want := range tt.want {
			c, err := Find(name, tt.goos, tt.home, env(tt.env))
			if err != nil || c.Path != want {
				t.Errorf("%s %s: %q, %v; want %q", tt.goos, name, c.Path, err, want)
			}
		}
	}
	if c, _ := Find("vscode", "linux", "/h", nil); c.Format != FormatVSCode {
		t.Errorf("vscode format %q", c.Format)
	}
	if _, err := Find("notepad", "linux", "/h", nil); err == nil || !strings.Contains(err.Error(), "claude-desktop, cursor, vscode") {
		t.Errorf("unknown client: %v", err)
	}
}

func byOriginal(t *testing.T, list []Imported) map[string]Imported {
	t.Helper()
	m := map[string]Imported{}
	for _, im := range list {
		m[im.Original] = im
	}
	return m
}

func TestReadServersClaudeDesktop(t *testing.T) {
	list, err := ReadServers("testdata/claude_desktop_config.json")
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, im := range list {
		order = append(order, im.Original)
		if im.Err != nil {
			t.Errorf("%s: %v", im.Original, im.Err)
		}
	}
	if !slices.Equal(order, []string{"github", "My Files_2", "pg", "remote-docs"}) {
		t.Errorf("order %v", order)
	}
	m := byOriginal(t, list)

	gh := m["github"]
	if gh.Server.Env["GITHUB_PERSONAL_ACCESS_TOKEN"] != "${keyring:github/env/GITHUB_PERSONAL_ACCESS_TOKEN}" ||
		gh.Secrets["github/env/GITHUB_PERSONAL_ACCESS_TOKEN"] != "ghp_exampleexampleexample" ||
		gh.Server.Env["GITHUB_API_URL"] != "https://api.github.com" || len(gh.Secrets) != 1 {
		t.Errorf("github: %+v %v", gh.Server, gh.Secrets)
	}
	files := m["My Files_2"]
	if files.Name != "my-files-2" || !files.Renamed() || len(files.Notes) != 1 || !strings.Contains(files.Notes[0], "alwaysAllow") {
		t.Errorf("files: %+v", files)
	}
	pg := m["pg"]
	if pg.Server.Args[2] != "postgresql://app@db.local:5432/app" || pg.Server.Env["PGPASSWORD"] != "${keyring:pg/env/PGPASSWORD}" || pg.Secrets["pg/env/PGPASSWORD"] != "hunter2" {
		t.Errorf("pg: %+v %v", pg.Server, pg.Secrets)
	}
	rd := m["remote-docs"]
	if rd.Server.Transport != "streamable-http" || rd.Server.Headers["Authorization"] != "Bearer ${keyring:remote-docs/header/Authorization}" ||
		rd.Secrets["remote-docs/header/Authorization"] != "abc.def.ghi" || rd.Server.Headers["X-Team"] != "platform" {
		t.Errorf("remote-docs: %+v %v", rd.Server, rd.Secrets)
	}
	// No secret value anywhere in the converted servers.
	for _, im := range list {
		raw, _ := json.Marshal(im.Server)
		for _, secret := range []string{"ghp_example", "hunter2", "abc.def.ghi"} {
			if strings.Contains(string(raw), secret) {
				t.Errorf("%s: secret %q in %s", im.Name, secret, raw)
			}
		}
	}

	if err := gh.Rename("gh-work"); err != nil {
		t.Fatal(err)
	}
	if gh.Server.Env["GITHUB_PERSONAL_ACCESS_TOKEN"] != "${keyring:gh-work/env/GITHUB_PERSONAL_ACCESS_TOKEN}" || gh.Secrets["gh-work/env/GITHUB_PERSONAL_ACCESS_TOKEN"] == "" {
		t.Errorf("after rename: %+v %v", gh.Server, gh.Secrets)
	}
}

func TestReadServersOtherFormats(t *testing.T) {
	list, err := ReadServers("testdata/cursor_mcp.json")
	if err != nil {
		t.Fatal(err)
	}
	m := byOriginal(t, list)
	if _, ok := m["nexus"]; ok || len(list) != 2 {
		t.Errorf("the nexus entry was imported: %+v", list)
	}
	if m["linear"].Server.Transport != "sse" {
		t.Errorf("linear: %+v", m["linear"].Server)
	}
	if w := m["weather"]; w.Server.Env["WEATHER_API_KEY"] != "${env:WEATHER_API_KEY}" || len(w.Secrets) != 0 {
		t.Errorf("an env reference was taken for a secret: %+v %v", w.Server, w.Secrets)
	}

	list, err = ReadServers("testdata/vscode_mcp.json") // comments and a trailing comma
	if err != nil {
		t.Fatal(err)
	}
	m = byOriginal(t, list)
	gh := m["github"]
	if gh.Server.Transport != "streamable-http" || gh.Server.Headers["Authorization"] != "Bearer ${keyring:github/header/Authorization}" ||
		len(gh.Secrets) != 0 || len(gh.Notes) != 1 || !strings.Contains(gh.Notes[0], "nexus secrets set github/header/Authorization") {
		t.Errorf("vscode github: %+v %v %v", gh.Server, gh.Secrets, gh.Notes)
	}
	// Its envFile is under ${workspaceFolder}, which a user-level file has none of:
	// flagged, not imported with the literal text.
	if f := m["fetch"]; f.Server != nil || f.Err == nil || !strings.Contains(f.Err.Error(), "${workspaceFolder}, which Nexus cannot resolve (this is a user-level file, with no workspace folder)") {
		t.Errorf("vscode fetch: %+v %v", f.Server, f.Err)
	}

	list, err = ReadServers("testdata/vscode_settings.json")
	if err != nil || len(list) != 1 || list[0].Server.Command != "uvx" {
		t.Errorf("settings.json: %+v %v", list, err)
	}

	if _, err := ReadServers("testdata/malformed.json"); err == nil || !strings.Contains(err.Error(), "line 4") {
		t.Errorf("malformed: %v", err)
	}
	if _, err := ReadServers("testdata/absent.json"); err == nil {
		t.Error("absent file read")
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"mcpServers": {"x": {"args": ["a"]}, "y": {"command": "ok"}}}`), 0o600)
	list, err = ReadServers(bad)
	if err != nil || len(list) != 2 || list[0].Err == nil || !strings.Contains(list[0].Err.Error(), `server "x"`) || list[1].Err != nil {
		t.Errorf("one bad entry: %+v %v", list, err)
	}
}

func TestSecretDetection(t *testing.T) {
	for k, want := range map[string]bool{
		"GITHUB_TOKEN": true, "OPENAI_API_KEY": true, "DB_PASSWORD": true, "CLIENT_SECRET": true, "GITHUB_PAT": true,
		"AWS_CREDENTIALS_FILE": true, "PATH": false, "HOME": false, "UNITS": false, "LOG_LEVEL": false,
	} {
		if nexsecrets.LooksSecretKey(k) != want {
			t.Errorf("SecretKey(%s) = %v", k, !want)
		}
	}
	for v, want := range map[string]bool{
		"Bearer x": true, "sk-abc": true, "xoxb-1": true, "postgres://u:p@h/db": true, "https://h/x": false, "metric": false,
	} {
		if nexsecrets.LooksSecretValue(v) != want {
			t.Errorf("SecretValue(%s) = %v", v, !want)
		}
	}
	if !nexsecrets.LooksSecretHeader("Authorization") || nexsecrets.LooksSecretHeader("X-Team") {
		t.Error("SecretHeader")
	}
}

func TestSanitizeName(t *testing.T) {
	for in, want := range map[string]string{
		"GitHub":                    "github",
		"My Files_2":                "my-files-2",
		"--x--":                     "x",
		"日本":                        "server",
		"a.b.c":                     "a-b-c",
		strings.Repeat("long-", 10): "long-long-long-long-long-long-lo",
	} {
		if got := SanitizeName(in); got != want {
			t.Errorf("SanitizeName(%q) = %q, want %q", in, got, want)
		}
	}
	used := map[string]bool{"a": true, "a-2": true}
	if got := uniqueName("a", used); got != "a-3" {
		t.Errorf("uniqueName = %q", got)
	}
}

func copyFile(t *testing.T, src string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

func decode(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, data)
	}
	return m
}

func TestSetupClaudeDesktop(t *testing.T) {
	file := copyFile(t, "testdata/claude_desktop_config.json")
	orig, _ := os.ReadFile(file)
	entry := NexusEntry("/opt/nexus/bin/nexus", "claude")
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

	// Dry run: a diff, nothing written.
	res, err := Setup(file, entry, SetupOptions{DryRun: true, Move: []string{"github"}, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(file); string(after) != string(orig) {
		t.Error("dry run changed the file")
	}
	if matches, _ := filepath.Glob(file + ".nexus-backup-*"); len(matches) != 0 {
		t.Errorf("dry run made a backup: %v", matches)
	}
	for _, want := range []string{"--- " + file, "+++ ", `-    "github": {`, `+    "nexus": {`, `+        "--agent",`, "@@ -"} {
		if !strings.Contains(res.Diff, want) {
			t.Errorf("diff lacks %q:\n%s", want, res.Diff)
		}
	}
	if strings.Contains(res.Diff, "ghp_example") || strings.Contains(res.Diff, "abc.def.ghi") || !strings.Contains(res.Diff, `"GITHUB_PERSONAL_ACCESS_TOKEN": "[redacted]",`) {
		t.Errorf("diff shows secrets:\n%s", res.Diff)
	}
	if strings.Contains(res.Diff, "-  \"preferences\"") {
		t.Errorf("diff touches unrelated keys:\n%s", res.Diff)
	}

	res, err = Setup(file, entry, SetupOptions{Move: []string{"github"}, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if want := file + ".nexus-backup-20260304-050607"; res.Backup != want {
		t.Errorf("backup %q, want %q", res.Backup, want)
	}
	if b, _ := os.ReadFile(res.Backup); string(b) != string(orig) {
		t.Error("backup differs from the original")
	}
	if st, _ := os.Stat(res.Backup); runtime.GOOS != "windows" && st.Mode().Perm() != 0o600 {
		t.Errorf("the backup holds the tokens moved out, so it must be 0600, not %v", st.Mode().Perm())
	}
	if len(res.Moved) != 1 || res.Moved[0].Name != "github" || res.Moved[0].Secrets["github/env/GITHUB_PERSONAL_ACCESS_TOKEN"] == "" {
		t.Errorf("moved: %+v", res.Moved)
	}
	m := decode(t, file)
	if m["globalShortcut"] != "Ctrl+Space" || m["preferences"].(map[string]any)["theme"] != "dark" {
		t.Errorf("unrelated keys lost: %v", m)
	}
	servers := m["mcpServers"].(map[string]any)
	if _, ok := servers["github"]; ok {
		t.Error("github not moved")
	}
	if servers["My Files_2"].(map[string]any)["alwaysAllow"] == nil {
		t.Error("unknown key of a kept server lost")
	}
	nx := servers["nexus"].(map[string]any)
	if nx["command"] != "/opt/nexus/bin/nexus" || len(nx["args"].([]any)) != 3 || nx["type"] != nil {
		t.Errorf("nexus entry: %v", nx)
	}
	data, _ := os.ReadFile(file)
	if strings.Index(string(data), "globalShortcut") > strings.Index(string(data), "preferences") {
		t.Error("key order not kept")
	}
	if st, _ := os.Stat(file); runtime.GOOS != "windows" && st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", st.Mode().Perm())
	}

	// Again: nothing to do, nothing written, no second backup.
	res, err = Setup(file, entry, SetupOptions{Now: now})
	if err != nil || res.Changed || res.Backup != "" || res.Diff != "" {
		t.Errorf("second setup: %+v %v", res, err)
	}
	// No agent keeps the one the entry has: nothing changes.
	if res, err = Setup(file, NexusEntry("/opt/nexus/bin/nexus", ""), SetupOptions{Now: now}); err != nil || res.Changed || res.Backup != "" {
		t.Errorf("setup without an agent: %+v %v", res, err)
	}
	// A different agent replaces the one there; the backup name does not clash.
	res, err = Setup(file, NexusEntry("/opt/nexus/bin/nexus", "reviewer"), SetupOptions{Now: now})
	if err != nil || !res.Replaced || res.Backup != file+".nexus-backup-20260304-050607-2" {
		t.Errorf("replace: %+v %v", res, err)
	}
	if args := decode(t, file)["mcpServers"].(map[string]any)["nexus"].(map[string]any)["args"]; fmt.Sprint(args) != "[serve --agent reviewer]" {
		t.Errorf("args after a new agent: %v", args)
	}
	// An entry with an environment (NEXUS_HOME) carries it.
	withHome := NexusEntry("/opt/nexus/bin/nexus", "")
	withHome.Env = map[string]string{"NEXUS_HOME": "/srv/nexus home"}
	if res, err = Setup(file, withHome, SetupOptions{Now: now}); err != nil || !res.Replaced {
		t.Errorf("adding env: %+v %v", res, err)
	}
	nx = decode(t, file)["mcpServers"].(map[string]any)["nexus"].(map[string]any)
	if env, _ := nx["env"].(map[string]any); env["NEXUS_HOME"] != "/srv/nexus home" {
		t.Errorf("nexus entry env: %v", nx)
	}

	if _, err := Setup(file, entry, SetupOptions{Move: []string{"nope"}}); err == nil || !strings.Contains(err.Error(), "My Files_2") {
		t.Errorf("moving an unknown server: %v", err)
	}
}

func TestSetupNewFileAndVSCode(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "Claude", "claude_desktop_config.json")
	res, err := Setup(file, NexusEntry("/bin/nexus", ""), SetupOptions{})
	if err != nil || !res.Created || res.Backup != "" {
		t.Fatalf("new file: %+v %v", res, err)
	}
	if m := decode(t, file); m["mcpServers"].(map[string]any)["nexus"] == nil {
		t.Errorf("new file: %v", m)
	}
	if st, _ := os.Stat(file); runtime.GOOS != "windows" && st.Mode().Perm() != 0o600 {
		t.Errorf("new file mode %v", st.Mode().Perm())
	}

	vs := filepath.Join(dir, "mcp.json")
	os.WriteFile(vs, []byte(`{"inputs": [], "servers": {"time": {"type": "stdio", "command": "uvx", "args": ["mcp-server-time"]}}}`), 0o600)
	if _, err := Setup(vs, NexusEntry("/bin/nexus", "vs"), SetupOptions{Format: FormatVSCode, Move: []string{"time"}}); err != nil {
		t.Fatal(err)
	}
	m := decode(t, vs)
	srv := m["servers"].(map[string]any)
	if nx := srv["nexus"].(map[string]any); nx["type"] != "stdio" || srv["time"] != nil || m["inputs"] == nil || m["mcpServers"] != nil {
		t.Errorf("vscode: %v", m)
	}

	settings := copyFile(t, "testdata/vscode_settings.json")
	if _, err := Setup(settings, NexusEntry("/bin/nexus", ""), SetupOptions{Format: FormatVSCode}); err != nil {
		t.Fatal(err)
	}
	m = decode(t, settings)
	if m["editor.fontSize"] != 13.0 || m["mcp"].(map[string]any)["servers"].(map[string]any)["nexus"] == nil || m["servers"] != nil {
		t.Errorf("settings.json: %v", m)
	}
}

// TestSetupKeepsComments: VS Code's files hold comments and trailing commas; an
// edit adds the entry and leaves every comment and the rest of the text in place.
func TestSetupKeepsComments(t *testing.T) {
	file := copyFile(t, "testdata/vscode_mcp.json")
	orig, _ := os.ReadFile(file)
	res, err := Setup(file, NexusEntry("/bin/nexus", ""), SetupOptions{Format: FormatVSCode})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(file)
	for _, line := range strings.Split(string(orig), "\n") {
		if strings.Contains(line, "//") && !strings.Contains(string(after), strings.TrimSpace(line)) {
			t.Errorf("comment line lost: %q\n%s", line, after)
		}
	}
	if names := serverNames(t, file); !slices.Contains(names, "nexus") {
		t.Errorf("after setup: names %v", names)
	}
	if !res.Changed || res.Backup == "" {
		t.Errorf("result: %+v", res)
	}
	// A second run finds the entry there and leaves the file alone.
	res, err = Setup(file, NexusEntry("/bin/nexus", ""), SetupOptions{Format: FormatVSCode})
	if err != nil || res.Changed {
		t.Errorf("second run: changed %v, %v", res != nil && res.Changed, err)
	}
	if again, _ := os.ReadFile(file); string(again) != string(after) {
		t.Error("second run rewrote the file")
	}
}

func TestSetupRefuses(t *testing.T) {
	for _, src := range []string{"testdata/malformed.json"} {
		file := copyFile(t, src)
		orig, _ := os.ReadFile(file)
		_, err := Setup(file, NexusEntry("/bin/nexus", ""), SetupOptions{})
		if err == nil {
			t.Errorf("%s: accepted", src)
			continue
		}
		if after, _ := os.ReadFile(file); string(after) != string(orig) {
			t.Errorf("%s: changed", src)
		}
		if m, _ := filepath.Glob(file + ".nexus-backup-*"); len(m) != 0 {
			t.Errorf("%s: backup made", src)
		}
		if !strings.Contains(err.Error(), "nothing was changed") && !strings.Contains(err.Error(), "comments") {
			t.Errorf("%s: unclear error %v", src, err)
		}
	}
	dir := t.TempDir()
	arr := filepath.Join(dir, "a.json")
	os.WriteFile(arr, []byte(`[1]`), 0o600)
	if _, err := Setup(arr, NexusEntry("/bin/nexus", ""), SetupOptions{}); err == nil {
		t.Error("a JSON array accepted")
	}
	bad := filepath.Join(dir, "b.json")
	os.WriteFile(bad, []byte(`{"mcpServers": []}`), 0o600)
	if _, err := Setup(bad, NexusEntry("/bin/nexus", ""), SetupOptions{}); err == nil || !strings.Contains(err.Error(), `"mcpServers" must be an object`) {
		t.Errorf("mcpServers array: %v", err)
	}
}

func TestUnifiedDiff(t *testing.T) {
	a := "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n"
	b := "1\n2\nthree\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n"
	got := UnifiedDiff("a", "b", a, b)
	want := "--- a\n+++ b\n@@ -1,6 +1,6 @@\n 1\n 2\n-3\n+three\n 4\n 5\n 6\n@@ -10,3 +10,4 @@\n 10\n 11\n 12\n+13\n"
	if got != want {
		t.Errorf("diff:\n%s\nwant:\n%s", got, want)
	}
	if UnifiedDiff("a", "b", a, a) != "" {
		t.Error("equal texts gave a diff")
	}
	if got := UnifiedDiff("a", "b", "", "x\n"); got != "--- a\n+++ b\n@@ -0,0 +1 @@\n+x\n" {
		t.Errorf("from empty: %q", got)
	}
}

// serverNames lists every server entry of a client file, the Nexus entry included,
// in file order.
func serverNames(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, _, err := parseDocument(path, "", data)
	if err != nil {
		t.Fatal(err)
	}
	return doc.names()
}

// TestMaxNameLength: setup caps wire names for clients that cap lower or add a
// prefix of their own, and leaves the others at Nexus's default.
func TestMaxNameLength(t *testing.T) {
	for _, tc := range []struct {
		client, entry string
		want          int
	}{
		{"claude-desktop", "nexus", 0},
		{"vscode", "nexus", 0},
		{"cursor", "nexus", 60},
		{"claude-code", "nexus", 52},
		{"claude-code", "a-very-long-entry-name-for-nexus-and-more", 20},
	} {
		c, err := Find(tc.client, "linux", "/h", nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.MaxNameLength(tc.entry); got != tc.want {
			t.Errorf("%s through %q: %d, want %d", tc.client, tc.entry, got, tc.want)
		}
	}
	e := NexusEntry("/bin/nexus", "coder").WithMaxNameLength(52)
	if strings.Join(e.Args, " ") != "serve --agent coder --max-name-length 52" {
		t.Errorf("args %q", e.Args)
	}
	if e := NexusEntry("/bin/nexus", "").WithMaxNameLength(0); strings.Join(e.Args, " ") != "serve" {
		t.Errorf("args %q", e.Args)
	}
	if c, _ := Find("claude-code", "linux", "/home/me", nil); c.Path != "/home/me/.claude.json" || c.Format != FormatMCPServers {
		t.Errorf("claude-code: %+v", c)
	}
}

func TestMergeArgs(t *testing.T) {
	tests := []struct{ old, next, want string }{
		{"serve --agent claude", "serve", "serve --agent claude"},
		{"serve --agent claude --log-level debug", "serve --agent coder", "serve --agent coder --log-level debug"},
		{"serve --agent=claude", "serve --agent coder", "serve --agent=coder"},
		{"serve", "serve --agent coder", "serve --agent coder"},
		{"", "serve", "serve"},
		{"run x", "serve", "serve"},
	}
	for _, tc := range tests {
		if got := strings.Join(MergeArgs(strings.Fields(tc.old), strings.Fields(tc.next)), " "); got != tc.want {
			t.Errorf("MergeArgs(%q, %q) = %q, want %q", tc.old, tc.next, got, tc.want)
		}
	}
}

func TestClientVariablesAndEnvFile(t *testing.T) {
	ws := t.TempDir()
	home, _ := os.UserHomeDir()
	os.MkdirAll(filepath.Join(ws, ".vscode"), 0o700)
	os.WriteFile(filepath.Join(ws, ".env"), []byte("# keys\nexport API_TOKEN=\"ghp_abcdefghijklmnopqrstuv\"\nMODE='fast'\nUNITS=imperial\n"), 0o600)
	file := filepath.Join(ws, ".vscode", "mcp.json")
	os.WriteFile(file, []byte(`{"servers": {
		"files": {"command": "npx", "args": ["-y", "fs", "${workspaceFolder}", "${userHome}/notes"], "envFile": "${workspaceFolder}/.env", "env": {"UNITS": "metric"}},
		"odd": {"command": "x", "args": ["${cwd}"]},
		"nofile": {"command": "x", "envFile": ".missing"}
	}}`), 0o600)
	list, err := ReadServers(file)
	if err != nil {
		t.Fatal(err)
	}
	m := byOriginal(t, list)
	f := m["files"]
	if f.Err != nil || strings.Join(f.Server.Args, " ") != "-y fs "+ws+" "+home+"/notes" {
		t.Fatalf("files: %+v %v", f.Server, f.Err)
	}
	if f.Server.Env["UNITS"] != "metric" || f.Server.Env["MODE"] != "fast" || f.Server.Env["API_TOKEN"] != "${keyring:files/env/API_TOKEN}" || f.Secrets["files/env/API_TOKEN"] != "ghp_abcdefghijklmnopqrstuv" {
		t.Errorf("files env: %+v %v", f.Server.Env, f.Secrets)
	}
	if !slices.ContainsFunc(f.Notes, func(n string) bool { return strings.Contains(n, "2 variable(s) copied into env") }) {
		t.Errorf("files notes: %v", f.Notes)
	}
	if o := m["odd"]; o.Err == nil || !strings.Contains(o.Err.Error(), "${cwd}") {
		t.Errorf("odd: %v", o.Err)
	}
	if n := m["nofile"]; n.Err == nil || !strings.Contains(n.Err.Error(), "envFile "+filepath.Join(ws, ".missing")+" cannot be read") {
		t.Errorf("nofile: %v", n.Err)
	}
}

func TestSetupRefusesAnEntryItCannotMerge(t *testing.T) {
	file := filepath.Join(t.TempDir(), "claude_desktop_config.json")
	body := `{"mcpServers": {"nexus": {"command": "/opt/nexus", "args": "serve --agent claude"}}}`
	os.WriteFile(file, []byte(body), 0o600)
	if _, err := Setup(file, NexusEntry("/opt/nexus", ""), SetupOptions{}); err == nil || !strings.Contains(err.Error(), "fix it by hand, nothing was changed") {
		t.Errorf("setup over args that are not a list: %v", err)
	}
	if got, _ := os.ReadFile(file); string(got) != body {
		t.Errorf("the file changed: %s", got)
	}
}
