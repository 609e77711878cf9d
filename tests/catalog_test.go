package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/secrets"
)

// catNoBus is an environment in which no OS keychain answers.
func catNoBus(h *home) []string {
	return []string{"NEXUS_HOME=" + h.dir, "PATH=" + os.Getenv("PATH"), "HOME=" + h.dir, "DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent"}
}

// catConfig reads the personal config of h ("" when there is none).
func catConfig(t *testing.T, h *home) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(h.dir, "config.json"))
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestCatalogListAndShow(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	out, stderr, code := h.nexus("catalog", "list", "--json")
	var rows []struct {
		Name     string   `json:"name"`
		Required []string `json:"required"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil {
		t.Fatalf("catalog list --json: %d %s%s", code, out, stderr)
	}
	found := map[string][]string{}
	for _, r := range rows {
		found[r.Name] = r.Required
	}
	for _, want := range []string{"code-kg", "doc-kg", "code-kg-sample", "doc-kg-sample", "memory", "filesystem", "github", "fetch", "postgres", "everything"} {
		if _, ok := found[want]; !ok {
			t.Errorf("catalog list lacks %s: %s", want, out)
		}
	}
	if strings.Join(found["doc-kg"], ",") != "url,token" {
		t.Errorf("doc-kg should need url and token, got %v", found["doc-kg"])
	}
	out, _, code = h.nexus("catalog", "show", "doc-kg")
	for _, want := range []string{"streamable-http", "url: the doc-kg MCP endpoint", "token:", "secret", "Authorization=Bearer {{token}}", "(builtin)"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("catalog show doc-kg lacks %q:\n%s", want, out)
		}
	}
	out, _, code = h.nexus("catalog", "show", "github", "--json")
	var entry struct {
		Name, Source, Docs, Transport string
		Values                        []struct{ Name, Description string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &entry) != nil || entry.Name != "github" || entry.Docs == "" || len(entry.Values) == 0 {
		t.Errorf("catalog show github --json: %s", out)
	}
	if _, stderr, code := h.nexus("catalog", "show", "no-such-entry"); code != 2 || !strings.Contains(stderr, "code-kg-sample") {
		t.Errorf("an unknown entry should list the known ones (exit 2): %d %s", code, stderr)
	}
	// A catalog file in NEXUS_HOME extends the builtin one.
	extra := `{"servers": {"my-tool": {"description": "a local tool", "transport": "stdio", "command": "my-tool", "args": ["--root", "{{root}}"],
		"values": [{"name": "root", "description": "the directory it works in", "required": true}]}}}`
	if err := os.WriteFile(filepath.Join(h.dir, "catalog.json"), []byte(extra), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, _ = h.nexus("catalog", "list")
	if !strings.Contains(out, "my-tool") || !strings.Contains(out, "catalog.json") {
		t.Errorf("the home catalog file should add my-tool: %s", out)
	}
	if _, stderr, code := h.nexus("add", "my-tool", "--yes", "--value", "root=/srv/x"); code != 0 {
		t.Fatalf("installing from the home catalog: %s", stderr)
	}
	if cfg := catConfig(t, h); !strings.Contains(cfg, `"/srv/x"`) || !strings.Contains(cfg, `"my-tool"`) {
		t.Errorf("config after add my-tool: %s", cfg)
	}
}

func TestCatalogInstallWithoutTerminal(t *testing.T) {
	h := newHome(t, nil)
	// Without a terminal to ask on, an install says what it would run and
	// needs --yes; nothing is written before.
	out, stderr, code := h.nexus("add", "code-kg-sample")
	if code != 2 || !strings.Contains(stderr, "code-kg-sample: command: ") || !strings.Contains(stderr, "sample-server code-kg") || !strings.Contains(stderr, "run the command again with --yes") {
		t.Fatalf("add code-kg-sample without --yes: %d, want 2 showing the command line and asking for --yes\n%s%s", code, out, stderr)
	}
	if cfg := catConfig(t, h); strings.Contains(cfg, "code-kg-sample") {
		t.Fatalf("the install wrote the config before it was confirmed:\n%s", cfg)
	}
	out, stderr, code = h.nexus("add", "code-kg-sample", "--yes")
	if code != 0 || !strings.Contains(out, "added code-kg-sample") {
		t.Fatalf("add code-kg-sample: %d\n%s%s", code, out, stderr)
	}
	cfg := catConfig(t, h)
	for _, want := range []string{built.nexus, `"sample-server"`, `"readOnlyHint": false`, `"code-kg-sample.kg_regenerate": "never"`} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %s:\n%s", want, cfg)
		}
	}
	// The catalog says how long its answers stay true, and add says so in one line;
	// list-tools shows where each ttl came from.
	if !strings.Contains(out, "memory: read-only answers kept as the catalog suggests (code-kg-sample.* 10m") || !strings.Contains(cfg, `"catalog": "code-kg-sample"`) {
		t.Errorf("add's memory line or the catalog key is missing:\n%s\n%s", out, cfg)
	}
	out, stderr, code = h.nexus("list-tools", "--json")
	if code != 0 || !strings.Contains(out, `"code-kg-sample.kg_latest_graph"`) {
		t.Errorf("list-tools after the catalog install: %d\n%s%s", code, out, stderr)
	}
	var tools []struct{ Canonical, TTL, TTLFrom string }
	if err := json.Unmarshal([]byte(out), &tools); err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools {
		want := [2]string{"10m", "catalog"}
		switch tl.Canonical {
		case "code-kg-sample.kg_regenerate_dry_run":
			want = [2]string{"1m", "catalog"}
		case "code-kg-sample.kg_regenerate", "code-kg-sample.kg_regenerate_submit", "code-kg-sample.kg_compare_with_local_git":
			want = [2]string{"none", ""} // not read-only, or cache: never
		}
		if got := [2]string{tl.TTL, tl.TTLFrom}; got != want {
			t.Errorf("%s: ttl %v, want %v", tl.Canonical, got, want)
		}
	}
	// A server of one's own keeps nothing until told how long.
	if out, _, _ := h.nexus("add", "mine", "--command", built.fixture); !strings.Contains(out, "memory: answers of mine are not kept until you say how long they stay true, e.g. nexus cache ttl mine 5m") {
		t.Errorf("add of a server without a catalog entry: %s", out)
	}
	h.nexus("remove", "mine")
	if _, stderr, code := h.nexus("add", "code-kg-sample", "--yes"); code != 2 || !strings.Contains(stderr, "--force") || !strings.Contains(stderr, "--name") {
		t.Errorf("installing twice should say how to replace it or pick another name: %d %s", code, stderr)
	}
	if _, stderr, code := h.nexus("add", "code-kg-sample", "--yes", "--name", "kg2"); code != 0 {
		t.Errorf("--name: %s", stderr)
	} else if !strings.Contains(catConfig(t, h), `"kg2"`) {
		t.Errorf("--name kg2 not in the config")
	}

	// doc-kg needs a url and a token: without a terminal it fails and lists both.
	before := catConfig(t, h)
	_, stderr, code = h.nexus("add", "doc-kg")
	if code != 2 {
		t.Errorf("add doc-kg without values: exit %d, want 2\n%s", code, stderr)
	}
	for _, want := range []string{"url: the doc-kg MCP endpoint", "token: the bearer token", "--value", "nothing was written"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, stderr)
		}
	}
	if catConfig(t, h) != before {
		t.Error("a refused install changed the config")
	}
	if _, stderr, code := h.nexus("add", "doc-kg", "--value", "nope=1"); code != 2 || !strings.Contains(stderr, "url, token") {
		t.Errorf("an unknown value should be refused naming the known ones: %d %s", code, stderr)
	}
}

func TestCatalogSecretWithoutKeychain(t *testing.T) {
	h := newHome(t, nil)
	_, stderr, code := h.nexusEnv(catNoBus(h), "add", "doc-kg", "--yes", "--value", "url=https://kg.example.com/mcp", "--value", "token=tok-nokeychain-123")
	if code == 0 || !strings.Contains(stderr, "nothing was written") || !strings.Contains(stderr, "--insecure-file-store") {
		t.Errorf("want a clear refusal, got %d:\n%s", code, stderr)
	}
	if strings.Contains(stderr, "tok-nokeychain-123") {
		t.Errorf("the refusal shows the token:\n%s", stderr)
	}
	if cfg := catConfig(t, h); cfg != "" {
		t.Errorf("a refused install wrote the config:\n%s", cfg)
	}
	if _, stderr, code := h.nexusEnv(catNoBus(h), "add", "doc-kg", "--yes", "--value", "url=https://kg.example.com/mcp", "--value", "token=${env:DOC_KG_TOKEN}"); code != 0 {
		t.Errorf("a secret given as an ${env:...} reference needs no keychain: %s", stderr)
	} else if cfg := catConfig(t, h); !strings.Contains(cfg, "Bearer ${env:DOC_KG_TOKEN}") {
		t.Errorf("the reference should be written as is:\n%s", cfg)
	}
	os.Remove(filepath.Join(h.dir, "config.json"))

	// The insecure file store takes the secret instead; the config holds a reference.
	h.writeConfig(map[string]any{"secrets": map[string]any{"insecureFileStore": true}})
	out, stderr, code := h.nexusEnv(catNoBus(h), "add", "doc-kg", "--yes", "--value", "url=https://kg.example.com/mcp", "--value", "token=tok-file-123")
	if code != 0 {
		t.Fatalf("add with --insecure-file-store: %s", stderr)
	}
	cfg := catConfig(t, h)
	if strings.Contains(cfg, "tok-file-123") || !strings.Contains(cfg, "Bearer ${keyring:doc-kg/header/Authorization}") || !strings.Contains(cfg, "https://kg.example.com/mcp") {
		t.Errorf("config after add doc-kg:\n%s", cfg)
	}
	if !strings.Contains(out, "nexus policy allow --agent AGENT doc-kg.*") {
		t.Errorf("the suggested allow list should be printed as a command:\n%s", out)
	}
	f := &secrets.File{Path: filepath.Join(h.dir, "secrets", "secrets.json")}
	if v, err := f.Get(context.Background(), "doc-kg/header/Authorization"); err != nil || v != "tok-file-123" {
		t.Errorf("the token in the file store: %q %v", v, err)
	}
}

func TestCatalogSecretInKeychain(t *testing.T) {
	realKeychain(t)
	h := newHome(t, nil)
	if _, stderr, code := h.nexus("add", "doc-kg", "--yes", "--value", "url=https://kg.example.com/mcp", "--value", "token=tok-keychain-123"); code != 0 {
		t.Fatalf("add doc-kg: %s", stderr)
	}
	t.Cleanup(func() { h.nexus("remove", "doc-kg") })
	cfg := catConfig(t, h)
	if strings.Contains(cfg, "tok-keychain-123") || !strings.Contains(cfg, "${keyring:doc-kg/header/Authorization}") {
		t.Errorf("config after add doc-kg:\n%s", cfg)
	}
	kr := &secrets.Keyring{}
	if v, err := kr.Get(context.Background(), "doc-kg/header/Authorization"); err != nil || v != "tok-keychain-123" {
		t.Errorf("the token in the keychain: %q %v", v, err)
	}
}

// catTerminal runs nexus under a pseudo-terminal (util-linux script) and answers
// prompts as they appear.
type catTerminal struct {
	t    *testing.T
	cmd  *exec.Cmd
	in   interface{ Write([]byte) (int, error) }
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

func (c *catTerminal) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Write(p)
}

func (c *catTerminal) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

func catStartTerminal(t *testing.T, env []string, args ...string) *catTerminal {
	t.Helper()
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("needs script (util-linux) to run nexus on a pseudo-terminal")
	}
	quoted := []string{catShellQuote(built.nexus)}
	for _, a := range args {
		quoted = append(quoted, catShellQuote(a))
	}
	c := &catTerminal{t: t, done: make(chan struct{})}
	c.cmd = exec.Command("script", "-qec", strings.Join(quoted, " "), "/dev/null")
	c.cmd.Env = withRace(env)
	c.cmd.Stdout, c.cmd.Stderr = c, c
	in, err := c.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.in = in
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		in.Close()
		select {
		case <-c.done:
		case <-time.After(5 * time.Second):
			c.cmd.Process.Kill()
		}
	})
	return c
}

func catShellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// answer waits for prompt to appear (after what was seen before) and types line.
func (c *catTerminal) answer(prompt, line string) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(c.output(), prompt) {
		select {
		case <-c.done:
			c.t.Fatalf("nexus ended before asking %q:\n%s", prompt, c.output())
		default:
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no prompt %q:\n%s", prompt, c.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // let the prompt set the terminal up (echo off for secrets)
	if _, err := c.in.Write([]byte(line + "\n")); err != nil {
		c.t.Fatal(err)
	}
}

func (c *catTerminal) wait() string {
	c.t.Helper()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.t.Fatalf("nexus did not finish:\n%s", c.output())
	}
	return c.output()
}

func TestCatalogPromptsOnTerminal(t *testing.T) {
	h := newHome(t, map[string]any{"secrets": map[string]any{"insecureFileStore": true}})
	term := catStartTerminal(t, catNoBus(h), "add", "doc-kg")
	term.answer("url: ", "https://kg.example.com/mcp")
	term.answer("token (hidden): ", "tok-typed-secret-42")
	// Before writing, it shows what it will connect to and asks.
	term.answer("install doc-kg? [y/N] ", "y")
	out := term.wait()
	if !strings.Contains(out, "doc-kg: url: https://kg.example.com/mcp; headers: Authorization") {
		t.Errorf("the install did not show what it connects to before asking:\n%s", out)
	}
	if !strings.Contains(out, "the doc-kg MCP endpoint") || !strings.Contains(out, "the bearer token doc-kg accepts") {
		t.Errorf("the prompts should describe each value:\n%s", out)
	}
	if !strings.Contains(out, "https://kg.example.com/mcp") {
		t.Errorf("a non-secret answer is echoed:\n%s", out)
	}
	if strings.Contains(out, "tok-typed-secret-42") {
		t.Errorf("the secret was echoed on the terminal:\n%s", out)
	}
	if !strings.Contains(out, "added doc-kg") {
		t.Fatalf("the install did not finish:\n%s", out)
	}
	cfg := catConfig(t, h)
	if strings.Contains(cfg, "tok-typed-secret-42") || !strings.Contains(cfg, "${keyring:doc-kg/header/Authorization}") {
		t.Errorf("config after the prompted install:\n%s", cfg)
	}
	f := &secrets.File{Path: filepath.Join(h.dir, "secrets", "secrets.json")}
	if v, err := f.Get(context.Background(), "doc-kg/header/Authorization"); err != nil || v != "tok-typed-secret-42" {
		t.Errorf("the typed token in the store: %q %v", v, err)
	}

	// Without a usable keychain, nexus says so before asking for a secret.
	h2 := newHome(t, nil)
	term = catStartTerminal(t, catNoBus(h2), "add", "doc-kg", "--value", "url=https://kg.example.com/mcp")
	out = term.wait()
	if strings.Contains(out, "(hidden)") || !strings.Contains(out, "nothing was written") {
		t.Errorf("want a refusal before the secret prompt:\n%s", out)
	}
}

// --- doctor ---

func TestDoctorHealthy(t *testing.T) {
	t.Parallel()
	h := newHome(t, map[string]any{"servers": map[string]any{
		"kg": map[string]any{"command": built.nexus, "args": []string{"sample-server", "code-kg"}},
	}})
	out, stderr, code := h.nexus("doctor")
	if code != 0 {
		t.Fatalf("doctor on a healthy config: %d\n%s%s", code, out, stderr)
	}
	for _, want := range []string{"config layers", filepath.Join(h.dir, "config.json"), "keychain", "servers", "kg: ready, 14 tool(s) in", "memory", "no problems found"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	out, _, code = h.nexus("doctor", "--json")
	var rep struct {
		OK     bool
		Checks []struct {
			Area, Name, Status string
			Tools              *int
			TookMS             *int64 `json:"tookMs"`
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || !rep.OK {
		t.Fatalf("doctor --json: %s", out)
	}
	seen := false
	for _, c := range rep.Checks {
		if c.Area == "servers" && c.Name == "kg" {
			seen = c.Status == "ok" && c.Tools != nil && *c.Tools == 14 && c.TookMS != nil
		}
	}
	if !seen {
		t.Errorf("doctor --json lacks the kg server check: %s", out)
	}
}

func TestDoctorBrokenServer(t *testing.T) {
	t.Parallel()
	h := newHome(t, map[string]any{"servers": map[string]any{
		"kg":      map[string]any{"command": built.sample, "args": []string{"code-kg"}},
		"missing": map[string]any{"command": "/nonexistent/bin/mcp-server"},
		"crashes": map[string]any{"command": "sh", "args": []string{"-c", "echo boom-from-the-child >&2; exit 3"}},
	}})
	out, stderr, code := h.nexus("doctor")
	if code != 1 {
		t.Errorf("doctor with broken servers: exit %d, want 1\n%s%s", code, out, stderr)
	}
	if !strings.Contains(stderr, "2 problem(s)") {
		t.Errorf("the summary should count the problems: %s", stderr)
	}
	for _, want := range []string{"FAIL  missing", "/nonexistent/bin/mcp-server", "was not found", "FAIL  crashes", "boom-from-the-child", "run it by hand", "kg: ready"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
}

func TestDoctorBrokenLayer(t *testing.T) {
	t.Parallel()
	h := newHome(t, map[string]any{"servers": map[string]any{}})
	personal := filepath.Join(h.dir, "config.json")
	if err := os.WriteFile(personal, []byte(`{"servers": {"x": {"command": "y", "timeout": "soon"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := h.nexus("doctor")
	if code != 1 || !strings.Contains(out, "FAIL  "+personal) || !strings.Contains(out, `"soon"`) || !strings.Contains(out, "not checked") {
		t.Errorf("a broken personal file should be named with its key: %d\n%s%s", code, out, stderr)
	}
	h.writeConfig(map[string]any{"servers": map[string]any{}})

	// A shared layer given with --config.
	team := filepath.Join(t.TempDir(), "team.json")
	if err := os.WriteFile(team, []byte("{\n  \"servers\": {\n    \"x\": {\"command\": \"y\",}\n  }\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = h.nexus("--config", team, "doctor")
	if code != 1 || !strings.Contains(out, "FAIL  "+team+":3:25: trailing comma") {
		t.Errorf("a layer that is not JSON should be named with the line: %d\n%s%s", code, out, stderr)
	}
	// Valid JSON, invalid config: the merged load names the file.
	if err := os.WriteFile(team, []byte(`{"servers": {"x": {"comand": "y"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = h.nexus("--config", team, "doctor")
	if code != 1 || !strings.Contains(out, "FAIL  "+team) || !strings.Contains(out, "comand") {
		t.Errorf("an invalid layer should be named with its key: %d\n%s%s", code, out, stderr)
	}
}

func TestCatalogClientsDoctorHelp(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	for _, c := range [][]string{{"catalog"}, {"catalog", "list"}, {"catalog", "show"}, {"setup"}, {"import"}, {"doctor"}} {
		out, stderr, code := h.nexus(append(c, "--help")...)
		if code != 0 || !strings.Contains(out, "USAGE") {
			t.Errorf("nexus %s --help: code %d\n%s%s", strings.Join(c, " "), code, out, stderr)
		}
	}
	out, _, _ := h.nexus("add", "--help")
	if !strings.Contains(out, "--value") || !strings.Contains(out, "catalog") {
		t.Errorf("add --help should tell about catalog installs:\n%s", out)
	}
}
