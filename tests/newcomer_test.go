package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nexusWith runs one CLI command with stdin and extra environment, returning its
// stdout, stderr and exit code.
func (h *home) nexusWith(stdin string, env []string, args ...string) (stdout, stderr string, code int) {
	h.t.Helper()
	cmd := exec.Command(built.nexus, args...)
	cmd.Env = append(h.env(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		h.t.Fatalf("running nexus %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestCLIMessages pins what a newcomer sees for each stumble of issue 15: the
// command, its exit code and the first line of stderr (HOME stands for NEXUS_HOME).
// A usage mistake is one line with its fix, exit 2, and nothing on stdout.
func TestCLIMessages(t *testing.T) {
	t.Parallel()
	sample := map[string]any{"command": built.nexus, "args": []string{"sample-server", "code-kg"}}
	tests := []struct {
		name   string
		config string // config.json; "" for none
		stdin  string
		env    []string
		args   []string
		code   int
		stderr string // the first line of stderr, exactly
		stdout string // a line stdout must hold ("" for: stdout is empty)
	}{
		{name: "misspelt command", args: []string{"lsit-tools"}, code: 2,
			stderr: "nexus: unknown command \"nexus lsit-tools\"; did you mean `nexus list-tools`?"},
		{name: "misspelt subcommand", args: []string{"policy", "shwo"}, code: 2,
			stderr: "nexus: unknown command \"nexus policy shwo\"; did you mean `nexus policy show`?"},
		{name: "help as a command", args: []string{"help"}, code: 0, stdout: "NAME:"},
		{name: "unknown command", args: []string{"frobnicate"}, code: 2,
			stderr: "nexus: unknown command \"nexus frobnicate\"; `nexus --help` lists the commands"},
		{name: "child's flag without --", args: []string{"add", "files", "--command", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"}, code: 2,
			stderr: "nexus: flag provided but not defined: -y; put `--` before the server's own arguments: nexus add files --command npx -- -y @modelcontextprotocol/server-filesystem /tmp"},
		{name: "misspelt flag", args: []string{"list-servers", "--jsno"}, code: 2,
			stderr: "nexus: flag provided but not defined: -jsno; did you mean --json? (`nexus list-servers --help` lists the flags)"},
		{name: "required flag", args: []string{"policy", "allow", "code-kg.kg_regenerate"}, code: 2,
			stderr: "nexus: nexus policy allow needs --agent NAME or --default; write `nexus policy allow --agent NAME ENTRY...`"},
		{name: "misspelt catalog name", args: []string{"add", "githb"}, code: 2,
			stderr: "nexus: \"githb\" is not in the catalog, and no --command or --url says how to run it; did you mean `nexus add github`? (nexus catalog list shows the entries)"},
		{name: "global flag after the command", config: `{}`, args: []string{"list-servers", "--json", "--config", "TEAM"}, code: 0,
			stdout: `    "name": "team-srv",`},
		{name: "global flag after a subcommand's argument", config: `{}`, args: []string{"config", "validate", "--insecure-file-store", "--config", "TEAM"}, code: 0,
			stdout: "merged: ok"},
		{name: "trailing comma", config: "{\n  \"servers\": {\n    \"a\": {\"command\": \"x\"},\n  }\n}\n", args: []string{"list-servers"}, code: 1,
			stderr: "nexus: HOME/config.json:3:26: trailing comma before '}': JSON allows no comma after the last entry; remove it"},
		{name: "trailing comma, validate", config: "{\n  \"servers\": {\n    \"a\": {\"command\": \"x\"},\n  }\n}\n", args: []string{"config", "validate"}, code: 1,
			stderr: "nexus: 1 problem(s); fix them and run nexus config validate again",
			stdout: "HOME/config.json:3:26: trailing comma before '}': JSON allows no comma after the last entry; remove it"},
		{name: "duration names its key", config: "{\"servers\": {\"code\": {\"command\": \"x\",\n  \"timeout\": \"30 seconds\"}}}", args: []string{"list-servers"}, code: 1,
			stderr: `nexus: HOME/config.json:2:3: servers.code.timeout: "30 seconds" is not a duration (write e.g. 30s, 5m, 12h or 1d)`},
		{name: "every problem once", config: "{\"servers\": {\"a\": {\"comand\": \"x\"}},\n \"toolNames\": \"snake\"}", args: []string{"config", "validate"}, code: 1,
			stderr: "nexus: 3 problem(s); fix them and run nexus config validate again",
			stdout: `HOME/config.json:2:2: toolNames: write "wire" (default: <server>__<tool>) or "dotted" (<server>.<tool>)`},
		{name: "bad ttl, validate", config: `{"ttl": {"x.*": "bogus"}, "cache": {"x.y": "sometimes"}}`, args: []string{"config", "validate"}, code: 1,
			stderr: "nexus: 2 problem(s); fix them and run nexus config validate again",
			stdout: `HOME/config.json:1:37: cache.x.y: write "never" or "always", not "sometimes"`},
		{name: "bad ttl, doctor", config: `{"ttl": {"x.*": "bogus"}, "cache": {"x.y": "sometimes"}}`, args: []string{"doctor"}, code: 1,
			stderr: "nexus: 2 problem(s) found; see the fix lines above, then run nexus doctor again",
			stdout: `  FAIL  HOME/config.json:1:10: ttl.x.*: ttl "bogus": write a duration such as "30s", "5m", "12h" or "1d", a number of milliseconds such as 30000, or "never"`},
		{name: "bad ttl, serve", config: `{"ttl": {"x.*": "bogus"}, "cache": {"x.y": "sometimes"}}`, args: []string{"serve"}, code: 1,
			stderr: `nexus: HOME/config.json:1:10: ttl.x.*: ttl "bogus": write a duration such as "30s", "5m", "12h" or "1d", a number of milliseconds such as 30000, or "never"`},
		{name: "serve ends at the end of stdin", config: `{}`, args: []string{"serve", "--log-level", "error"}, code: 0},
		{name: "policy explain without --agent", config: mustJSON(t, map[string]any{"servers": map[string]any{"code-kg": sample}}),
			args: []string{"policy", "explain", "code-kg.kg_latest_graph"}, code: 0,
			stdout: `allowed: agent "anonymous" may call "code-kg.kg_latest_graph" (allow "@readonly", from built-in default)`},
		{name: "sample's invalid params", config: mustJSON(t, map[string]any{"servers": map[string]any{"code-kg": sample}}),
			args: []string{"call", "code-kg.kg_latest_graph", "--args", `{"repo": "x"}`}, code: 1,
			stderr: `nexus: invalid params for kg_latest_graph: unknown field "repo"`},
		{name: "cache stats in MiB", config: `{}`, args: []string{"cache", "stats"}, code: 0,
			stdout: "HOME/memory.db: 0 entries, 0 B (bounds 10000 entries, 256 MiB)"},
		{name: "cache stats --json keeps bytes", config: `{}`, args: []string{"cache", "stats", "--json"}, code: 0,
			stdout: `  "max_bytes": 268435456,`},
		{name: "first agent token", config: `{}`, args: []string{"agent", "add", "coder"}, code: 0,
			stderr: "agent coder created; its token is printed once, below. Nexus keeps only its SHA-256."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each row in a home of its own
			h := newHome(t, nil)
			if tc.config != "" {
				if err := os.WriteFile(filepath.Join(h.dir, "config.json"), []byte(tc.config), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			team := filepath.Join(h.dir, "team.json")
			os.WriteFile(team, []byte(`{"servers": {"team-srv": {"command": "x"}}}`), 0o600)
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				args[i] = strings.ReplaceAll(a, "TEAM", team)
			}
			stdout, stderr, code := h.nexusWith(tc.stdin, tc.env, args...)
			want := strings.ReplaceAll(tc.stderr, "HOME", h.dir)
			if code != tc.code || (tc.stderr != "" && firstLine(stderr) != want) {
				t.Errorf("nexus %s: exit %d, stderr:\n  %s\nwant exit %d, first line:\n  %s", strings.Join(tc.args, " "), code, strings.ReplaceAll(stderr, "\n", "\n  "), tc.code, want)
			}
			switch {
			case tc.stdout == "" && tc.code == 2 && stdout != "":
				t.Errorf("a usage error printed on stdout:\n%s", stdout)
			case tc.stdout != "" && !strings.Contains("\n"+stdout+"\n", "\n"+strings.ReplaceAll(tc.stdout, "HOME", h.dir)+"\n"):
				t.Errorf("stdout lacks the line\n  %s\ngot:\n%s", strings.ReplaceAll(tc.stdout, "HOME", h.dir), stdout)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCLIAgentAddEndsAnonymous checks the notice of the first agent token, and
// that the second token brings none.
func TestCLIAgentAddEndsAnonymous(t *testing.T) {
	t.Parallel()
	h := newHome(t, map[string]any{})
	_, stderr, code := h.nexus("agent", "add", "coder")
	if code != 0 || !strings.Contains(stderr, "\nnexus: this is the first agent token: `nexus serve --http` now refuses clients without a valid token (401)") {
		t.Errorf("first token: exit %d, stderr:\n%s", code, stderr)
	}
	_, stderr, code = h.nexus("agent", "add", "reviewer")
	if code != 0 || strings.Contains(stderr, "first agent token") {
		t.Errorf("second token: exit %d, stderr:\n%s", code, stderr)
	}
}

// TestCLISecretsListShowsSetSecrets: a secret stored with secrets set is listed,
// with where it is used, before any config refers to it.
func TestCLISecretsListShowsSetSecrets(t *testing.T) {
	h := newHome(t, map[string]any{"servers": map[string]any{"gh": map[string]any{"command": "x", "env": map[string]string{"T": "${keyring:gh/env/T}"}}}})
	if _, stderr, code := h.nexusWith("s3cret-value\n", nil, "secrets", "set", "team/token", "--insecure-file-store"); code != 0 {
		t.Fatalf("secrets set: exit %d: %s", code, stderr)
	}
	out, stderr, code := h.nexus("secrets", "list")
	want := []string{"SECRET      USED BY", "gh/env/T    servers.gh.env.T", "team/token  nothing yet (refer to it as ${keyring:team/token})"}
	if code != 0 || strings.TrimSpace(out) != strings.Join(want, "\n") {
		t.Errorf("secrets list: exit %d\n%s%s\nwant\n%s", code, out, stderr, strings.Join(want, "\n"))
	}
	if strings.Contains(out+stderr, "s3cret-value") {
		t.Error("secrets list printed a value")
	}
}

// TestCLIServeStopsCleanly: SIGINT and SIGTERM end serve with exit 0 and no
// "context canceled".
func TestCLIServeStopsCleanly(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			h := newHome(t, map[string]any{})
			cmd := exec.Command(built.nexus, "serve")
			cmd.Env = h.env()
			stdin, err := cmd.StdinPipe() // left open: serve waits for a client
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			var stderr lockedBuffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			eventually(t, 30*time.Second, "serve to start", func() bool { return strings.Contains(stderr.String(), "serving over stdio") })
			cmd.Process.Signal(sig)
			err = cmd.Wait()
			if err != nil || strings.Contains(stderr.String(), "context canceled") {
				t.Errorf("serve after %s: %v\n%s", sig, err, stderr.String())
			}
		})
	}
}

// TestCLIDoctorFileStore: add --insecure-file-store records the choice in the
// config (issue 38's point 12), so that secrets set and doctor without the flag
// find the secret. Without the setting and with the values in the insecure file
// store, doctor says so, advises --insecure-file-store, and keeps each check on its
// lines.
func TestCLIDoctorFileStore(t *testing.T) {
	t.Parallel()
	h := newHome(t, map[string]any{})
	noKeychain := []string{"DBUS_SESSION_BUS_ADDRESS=unix:path=" + filepath.Join(h.dir, "no-bus")}
	out, stderr, code := h.nexusWith("", noKeychain, "add", "kg", "--command", built.nexus, "--env", "TOKEN=ghp_abcdefghijklmnopqrstuv",
		"--insecure-file-store", "--", "sample-server", "code-kg")
	store := filepath.Join(h.dir, "secrets", "secrets.json")
	if code != 0 || !strings.Contains(out, "stored secret kg/env/TOKEN in the insecure file store "+store) {
		t.Fatalf("add with the file store: exit %d\n%s%s", code, out, stderr)
	}
	// add remembers the choice: later commands find the secret without the flag.
	cfgPath := filepath.Join(h.dir, "config.json")
	if cfg := mustRead(t, cfgPath); !strings.Contains(cfg, `"insecureFileStore": true`) || !strings.Contains(stderr, `"secrets": {"insecureFileStore": true} is now in`) {
		t.Fatalf("add --insecure-file-store did not record the choice:\n%s\n%s", cfg, stderr)
	}
	if out, stderr, code := h.nexusWith("x\n", noKeychain, "secrets", "set", "OTHER"); code != 0 || !strings.Contains(out, "insecure file store") {
		t.Errorf("secrets set without the flag after add: exit %d\n%s%s", code, out, stderr)
	}
	if out, _, code := h.nexusWith("", noKeychain, "doctor"); code != 0 || !strings.Contains(out, "  ok    kg: ready, 14 tool(s) in ") {
		t.Errorf("doctor after add --insecure-file-store: exit %d\n%s", code, out)
	}
	// Without the setting, doctor says how to reach the secrets.
	var doc map[string]any
	if err := json.Unmarshal([]byte(mustRead(t, cfgPath)), &doc); err != nil {
		t.Fatal(err)
	}
	delete(doc, "secrets")
	h.writeConfig(doc)
	out, stderr, code = h.nexusWith("", noKeychain, "doctor")
	fix := "        fix: the values are in the insecure file store " + store + ": pass --insecure-file-store, or set \"secrets\": {\"insecureFileStore\": true} in " + filepath.Join(h.dir, "config.json")
	for _, want := range []string{
		"  FAIL  secret store: the OS keychain is unavailable; the secrets the config uses are in the insecure file store, which this run was not told to use\n" + fix + "\n",
		"  FAIL  kg: not started: TOKEN of server kg: ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor lacks\n%s\ngot:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if line != "" && !strings.HasPrefix(line, " ") && !slices.Contains([]string{"config layers", "catalog", "keychain", "servers", "pins", "memory"}, line) {
			t.Errorf("a line out of the layout: %q", line)
		}
	}
	if code != 1 || firstLine(stderr) != "nexus: 2 problem(s) found; see the fix lines above, then run nexus doctor again" {
		t.Errorf("doctor: exit %d, stderr %q", code, stderr)
	}
	if out, _, code := h.nexusWith("", noKeychain, "doctor", "--insecure-file-store"); code != 0 || !strings.Contains(out, "  ok    kg: ready, 14 tool(s) in ") {
		t.Errorf("doctor --insecure-file-store: exit %d\n%s", code, out)
	}
}
