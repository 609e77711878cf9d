package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestSetupMoveAllFileStoreNexusHome moves a client's servers behind Nexus with no
// keychain, the insecure file store and a NEXUS_HOME of its own, then starts the
// client entry that setup wrote, as the client would (its command, its env, nothing
// of the shell's), and checks that every moved server connects and that the token
// reaches its child.
func TestSetupMoveAllFileStoreNexusHome(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes")
	}
	const token = "ghp_setupmovecanary0123456789"
	dir := t.TempDir()
	userHome := filepath.Join(dir, "user")
	nexusHome := filepath.Join(dir, "elsewhere", "nexus")
	callLog := filepath.Join(dir, "calls.log")
	if err := os.MkdirAll(userHome, 0o700); err != nil {
		t.Fatal(err)
	}
	clientFile := filepath.Join(userHome, "claude_desktop_config.json")
	client := map[string]any{
		"mcpServers": map[string]any{
			"with-token": map[string]any{"command": built.fixture, "env": map[string]string{"API_TOKEN": token, "FIXTURE_CALL_LOG": callLog}},
			"plain":      map[string]any{"command": built.fixture, "env": map[string]string{"FIXTURE_CALL_LOG": callLog}},
		},
		"preferences": map[string]any{"theme": "dark"},
	}
	data, _ := json.MarshalIndent(client, "", "  ")
	if err := os.WriteFile(clientFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	original := string(data)
	env := []string{"HOME=" + userHome, "NEXUS_HOME=" + nexusHome, "PATH=" + os.Getenv("PATH"), "DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent"}
	h := &home{t: t, dir: nexusHome}

	// Dry run without a store: it checks, and says the server with a token would stay.
	out, stderr, code := h.nexusEnv(env, "setup", clientFile, "--move-all", "--dry-run")
	if code != 0 || !strings.Contains(out, "not moved (it stays in the client) with-token: its secrets cannot be stored") || !strings.Contains(out, "would move behind Nexus: plain") {
		t.Errorf("dry run without a keychain: %d\n%s%s", code, out, stderr)
	}
	// Dry run with the file store: it names the file, and the setting it would keep.
	out, stderr, code = h.nexusEnv(env, "--insecure-file-store", "setup", clientFile, "--move-all", "--dry-run")
	secretsFile := filepath.Join(nexusHome, "secrets", "secrets.json")
	if code != 0 || !strings.Contains(out, "its secret with-token/env/API_TOKEN would go to the insecure file store "+secretsFile) || !strings.Contains(out, "would be in") {
		t.Errorf("dry run with the file store: %d\n%s%s", code, out, stderr)
	}
	if got, _ := os.ReadFile(clientFile); string(got) != original {
		t.Error("a dry run changed the client file")
	}
	if _, err := os.Stat(filepath.Join(nexusHome, "config.json")); err == nil {
		t.Error("a dry run wrote the Nexus config")
	}

	out, stderr, code = h.nexusEnv(env, "--insecure-file-store", "setup", clientFile, "--move-all")
	if code != 0 {
		t.Fatalf("setup: %d\n%s%s", code, out, stderr)
	}
	for _, want := range []string{
		"moved behind Nexus: with-token", "moved behind Nexus: plain",
		"stored secret with-token/env/API_TOKEN in the insecure file store " + secretsFile,
		"warning: no OS keychain is usable", `"insecureFileStore": true} is now in ` + filepath.Join(nexusHome, "config.json"),
		"it holds the original values, tokens included",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "keychain\n") || strings.Contains(out+stderr, token) {
		t.Errorf("the output names the wrong store or shows the token:\n%s%s", out, stderr)
	}

	// The backup holds the token: it is the user's alone.
	backups, _ := filepath.Glob(clientFile + ".nexus-backup-*")
	if len(backups) != 1 {
		t.Fatalf("backups: %v", backups)
	}
	if st, _ := os.Stat(backups[0]); st.Mode().Perm() != 0o600 {
		t.Errorf("the backup is %v, want 0600", st.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(userHome, ".nexus")); err == nil {
		t.Error("setup wrote to ~/.nexus although NEXUS_HOME is set")
	}
	var cfg struct {
		Secrets struct{ InsecureFileStore bool }
		Servers map[string]json.RawMessage
	}
	cfgData, _ := os.ReadFile(filepath.Join(nexusHome, "config.json"))
	if err := json.Unmarshal(cfgData, &cfg); err != nil || !cfg.Secrets.InsecureFileStore || len(cfg.Servers) != 2 || strings.Contains(string(cfgData), token) {
		t.Errorf("the Nexus config: %s (%v)", cfgData, err)
	}

	// The client entry: the binary, serve, and NEXUS_HOME.
	var after struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	afterData, _ := os.ReadFile(clientFile)
	if err := json.Unmarshal(afterData, &after); err != nil {
		t.Fatal(err)
	}
	entry, ok := after.MCPServers["nexus"]
	if !ok || len(after.MCPServers) != 1 || entry.Command != built.nexus || !slices.Equal(entry.Args, []string{"serve"}) || entry.Env["NEXUS_HOME"] != nexusHome {
		t.Fatalf("the client file after setup:\n%s", afterData)
	}

	// Start the entry as the client does: its command and args, its env over a
	// minimal environment without NEXUS_HOME or the flag.
	runEnv := []string{"HOME=" + userHome, "PATH=" + os.Getenv("PATH"), "DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent"}
	for k, v := range entry.Env {
		runEnv = append(runEnv, k+"="+v)
	}
	s := startSession(t, runEnv, entry.Command, entry.Args...)
	tools := s.tools()
	for _, name := range []string{"with-token__getenv", "plain__echo"} {
		if _, ok := tools[name]; !ok {
			t.Errorf("tool %s missing: a moved server did not connect\nstderr:\n%s", name, s.stderr)
		}
	}
	if got := s.call("with-token__getenv", map[string]any{"name": "API_TOKEN"}).text(); got != "[redacted:with-token/env/API_TOKEN]" {
		t.Errorf("the child should have its token (and the client see it redacted), got %q\nstderr:\n%s", got, s.stderr)
	}
	if got := s.call("plain__echo", map[string]any{"message": "hi"}).text(); got != "hi" {
		t.Errorf("plain__echo: %q", got)
	}
	s.close()
	if strings.Contains(s.stderr.String(), token) {
		t.Errorf("the token reached the log:\n%s", s.stderr)
	}
}

// TestImportWithoutKeychain imports what needs no store when no keychain is usable,
// says why the rest stayed out, and with the file store imports it and keeps that
// choice.
func TestImportWithoutKeychain(t *testing.T) {
	h := newHome(t, nil)
	clientFile := filepath.Join(h.dir, "client.json")
	data, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"plain": map[string]any{"command": built.fixture},
		"tok":   map[string]any{"command": built.fixture, "env": map[string]string{"SERVICE_TOKEN": "import-canary-123456"}},
	}})
	if err := os.WriteFile(clientFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	noBus := catNoBus(h)
	out, stderr, code := h.nexusEnv(noBus, "import", clientFile, "--json", "--yes")
	var res struct {
		Servers []struct{ Original, Status, Store, Error, Fix string }
	}
	if err := json.Unmarshal([]byte(out), &res); code != 1 || err != nil || len(res.Servers) != 2 { // tok is left behind
		t.Fatalf("import --json without a keychain: %d %v\n%s%s", code, err, out, stderr)
	}
	for _, s := range res.Servers {
		switch s.Original {
		case "plain":
			if s.Status != "imported" {
				t.Errorf("a server without secrets should be imported: %+v", s)
			}
		case "tok":
			if s.Status != "stayed" || !strings.Contains(s.Error, "cannot be stored") || !strings.Contains(s.Fix, "--insecure-file-store") {
				t.Errorf("a server with a secret should stay out, with why and the fix: %+v", s)
			}
		}
	}
	if srv := clServers(t, h); len(srv) != 1 || srv["plain"].Command != built.fixture {
		t.Errorf("servers after the import: %+v", srv)
	}

	out, stderr, code = h.nexusEnv(noBus, "--insecure-file-store", "import", clientFile, "--yes")
	secretsFile := filepath.Join(h.dir, "secrets", "secrets.json")
	if code != 0 || !strings.Contains(out, "stored secret tok/env/SERVICE_TOKEN in the insecure file store "+secretsFile) || !strings.Contains(out, "warning: no OS keychain is usable") {
		t.Errorf("import with the file store: %d\n%s%s", code, out, stderr)
	}
	if cfg := catConfig(t, h); !strings.Contains(cfg, `"insecureFileStore": true`) || strings.Contains(cfg, "import-canary") {
		t.Errorf("the config should keep the file store choice and no token:\n%s", cfg)
	}
	// Later commands find the secret without the flag.
	if out, stderr, code := h.nexusEnv(noBus, "doctor"); code != 0 || !strings.Contains(out, "all 1 secret(s) the config uses are there") {
		t.Errorf("doctor after the import: %d\n%s%s", code, out, stderr)
	}
}
