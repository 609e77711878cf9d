package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// friction is one row of the CLI tables of issue 30: a command run against the
// built binary in a fresh NEXUS_HOME, its exit code and what its output holds.
type friction struct {
	name   string
	config string // config.json; "" for none
	files  map[string]string
	stdin  string
	env    []string
	args   []string
	code   int
	stderr string // a substring of stderr ("" for: not checked)
	stdout string // a substring of stdout ("" for: not checked)
	not    string // a substring neither may hold ("" for: not checked)
	check  func(t *testing.T, h *home, stdout, stderr string)
}

// runFrictions runs each row in a home of its own, the rows side by side. HOME in
// args, files and config stands for the home's directory.
func runFrictions(t *testing.T, rows []friction) {
	t.Helper()
	runFrictionRows(t, rows, false)
}

// runFrictionRows is runFrictions, the rows one at a time when serial.
func runFrictionRows(t *testing.T, rows []friction, serial bool) {
	t.Helper()
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			if !serial {
				t.Parallel() // each row in a home of its own
			}
			h := newHome(t, nil)
			sub := func(s string) string { return strings.ReplaceAll(s, "HOME", h.dir) }
			if tc.config != "" {
				if err := os.WriteFile(filepath.Join(h.dir, "config.json"), []byte(sub(tc.config)), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			for name, body := range tc.files {
				p := filepath.Join(h.dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(sub(body)), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				args[i] = sub(a)
			}
			env := make([]string, len(tc.env))
			for i, v := range tc.env {
				env[i] = sub(v)
			}
			stdout, stderr, code := h.nexusWith(tc.stdin, env, args...)
			if code != tc.code {
				t.Errorf("nexus %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, tc.code, stdout, stderr)
			}
			if tc.stderr != "" && !strings.Contains(stderr, sub(tc.stderr)) {
				t.Errorf("stderr lacks %q:\n%s", sub(tc.stderr), stderr)
			}
			if tc.stdout != "" && !strings.Contains(stdout, sub(tc.stdout)) {
				t.Errorf("stdout lacks %q:\n%s", sub(tc.stdout), stdout)
			}
			if tc.not != "" && strings.Contains(stdout+stderr, sub(tc.not)) {
				t.Errorf("output holds %q:\n%s%s", sub(tc.not), stdout, stderr)
			}
			if tc.check != nil {
				tc.check(t, h, stdout, stderr)
			}
		})
	}
}

// TestFrictionTypos: a misspelt subcommand is blamed, not the flag after it; a
// misspelt flag gets one line with the flag meant; names get "did you mean"; and
// every command refuses arguments it does not take.
func TestFrictionTypos(t *testing.T) {
	t.Parallel()
	servers := `{"servers": {"files": {"command": "x"}}}`
	runFrictions(t, []friction{
		{name: "misspelt subcommand before a flag", args: []string{"policy", "alow", "--agent", "x", "foo.bar"}, code: 2,
			stderr: "nexus: unknown command \"nexus policy alow\"; did you mean `nexus policy allow`?\n"},
		{name: "misspelt flag of add", args: []string{"add", "foo", "--comand", "npx"}, code: 2,
			stderr: "nexus: flag provided but not defined: -comand; did you mean --command? (`nexus add --help` lists the flags)\n"},
		{name: "child flag of add still wants --", args: []string{"add", "files", "--command", "npx", "-y", "pkg"}, code: 2,
			stderr: "put `--` before the server's own arguments: nexus add files --command npx -- -y pkg"},
		{name: "catalog show", args: []string{"catalog", "show", "githb"}, code: 2,
			stderr: "nexus: no catalog entry \"githb\"; did you mean `nexus catalog show github`?"},
		{name: "remove", config: servers, args: []string{"remove", "file"}, code: 1,
			stderr: "did you mean `nexus remove files`?"},
		{name: "setup", args: []string{"setup", "claude-dekstop"}, code: 2,
			stderr: "nexus: unknown client \"claude-dekstop\"; did you mean claude-desktop?"},
		{name: "list-tools takes no argument", config: `{}`, args: []string{"list-tools", "x"}, code: 2,
			stderr: "nexus: list-tools takes no arguments, got \"x\"; `nexus list-tools --help` shows its usage"},
		{name: "call takes one tool", config: `{}`, args: []string{"call", "a.b", "c.d"}, code: 2,
			stderr: "call takes at most 1 argument(s) (TOOL), got \"c.d\""},
		{name: "doctor takes no argument", config: `{}`, args: []string{"doctor", "now"}, code: 2,
			stderr: "doctor takes no arguments"},
	})
}

// claudeDesktopFile is where setup claude-desktop writes in a test home (HOME is the
// home, XDG_CONFIG_HOME unset).
func claudeDesktopFile(h *home) string {
	return filepath.Join(h.dir, ".config", "Claude", "claude_desktop_config.json")
}

func backupsOf(t *testing.T, file string) []string {
	t.Helper()
	m, err := filepath.Glob(file + ".nexus-backup-*")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFrictionSetupKeepsTheEntry: setup again without --agent keeps the agent and
// whatever the user added to the entry, and touches nothing (no backup) when
// nothing changes.
func TestFrictionSetupKeepsTheEntry(t *testing.T) {
	t.Parallel()
	h := newHome(t, map[string]any{})
	file := claudeDesktopFile(h)
	if _, stderr, code := h.nexus("setup", "claude-desktop", "--agent", "claude"); code != 0 {
		t.Fatalf("setup: %s", stderr)
	}
	// The user adds a flag and a variable of their own.
	var doc map[string]map[string]map[string]any
	if err := json.Unmarshal([]byte(mustRead(t, file)), &doc); err != nil {
		t.Fatal(err)
	}
	nx := doc["mcpServers"]["nexus"]
	nx["args"] = append(nx["args"].([]any), "--log-level", "debug")
	nx["env"].(map[string]any)["FOO"] = "bar"
	b, _ := json.MarshalIndent(doc, "", "  ")
	os.WriteFile(file, b, 0o600)
	before := mustRead(t, file)
	for _, args := range [][]string{{"setup", "claude-desktop"}, {"setup", "claude-desktop", "--agent", "claude"}} {
		out, stderr, code := h.nexus(args...)
		if code != 0 || !strings.Contains(out, "already runs Nexus; nothing to change") {
			t.Errorf("nexus %s: exit %d\n%s%s", strings.Join(args, " "), code, out, stderr)
		}
		if after := mustRead(t, file); after != before || len(backupsOf(t, file)) != 0 {
			t.Errorf("nexus %s changed the file (backups %v):\n%s", strings.Join(args, " "), backupsOf(t, file), after)
		}
	}
	// A new agent replaces the old one and keeps the rest.
	if _, stderr, code := h.nexus("setup", "claude-desktop", "--agent", "coder"); code != 0 {
		t.Fatalf("setup --agent coder: %s", stderr)
	}
	after := mustRead(t, file)
	if !strings.Contains(after, `"--agent",`) || !strings.Contains(after, `"coder",`) || strings.Contains(after, `"claude"`) ||
		!strings.Contains(after, `"debug"`) || !strings.Contains(after, `"FOO": "bar"`) || len(backupsOf(t, file)) != 1 {
		t.Errorf("after --agent coder:\n%s", after)
	}
}

// TestFrictionClientPath: setup records the PATH of its shell in the entry, and
// doctor checks every server's command against the PATH the client gives Nexus.
func TestFrictionClientPath(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	bin := filepath.Join(h.dir, "bin")
	os.MkdirAll(bin, 0o700)
	if err := os.WriteFile(filepath.Join(bin, "fakelaunch"), []byte("#!/bin/sh\nexec "+built.fixture+" \"$@\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	h.writeConfig(map[string]any{"servers": map[string]any{"fx": map[string]any{"command": "fakelaunch"}}})
	shell := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}
	// setup from a shell whose PATH lacks bin: the entry's PATH lacks it too.
	if _, stderr, code := h.nexus("setup", "claude-desktop"); code != 0 {
		t.Fatalf("setup: %s", stderr)
	}
	if !strings.Contains(mustRead(t, claudeDesktopFile(h)), `"PATH": "`) {
		t.Errorf("setup wrote no PATH:\n%s", mustRead(t, claudeDesktopFile(h)))
	}
	out, _, code := h.nexusWith("", shell, "doctor")
	if code != 1 || !strings.Contains(out, "  ok    fx: ready") ||
		!strings.Contains(out, "  FAIL  Claude Desktop: not found with the PATH its entry sets, so these servers fail when Claude Desktop starts Nexus: fakelaunch (server fx)") ||
		!strings.Contains(out, "fix: run `nexus setup claude-desktop` again from a shell where they work") {
		t.Errorf("doctor with the launcher missing from the client's PATH: exit %d\n%s", code, out)
	}
	// setup again from the shell that finds it: the PATH gains bin, doctor is happy.
	if _, stderr, code := h.nexusWith("", shell, "setup", "claude-desktop"); code != 0 {
		t.Fatalf("setup again: %s", stderr)
	}
	out, _, code = h.nexusWith("", shell, "doctor")
	if code != 0 || !strings.Contains(out, "  ok    Claude Desktop: Claude Desktop starts Nexus from ") {
		t.Errorf("doctor after setup again: exit %d\n%s", code, out)
	}
}

func mustRead(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFrictionPolicyEdits: allow and deny take several entries, --default edits
// policy.default, an entry naming a server no config has is refused with the
// closest one (--later writes it, with a warning), and an entry naming a tool
// nothing knows of is written with a warning.
func TestFrictionPolicyEdits(t *testing.T) {
	t.Parallel()
	cfg := `{"servers": {"kg": {"command": "x", "annotations": {"lookup": {"readOnlyHint": true}}}}}`
	runFrictions(t, []friction{
		{name: "several entries", config: cfg, args: []string{"policy", "allow", "--agent", "coder", "kg.lookup", "kg.write"}, code: 0,
			stdout: "policy.agents.coder in HOME/config.json: allow [@readonly kg.lookup kg.write], deny []",
			stderr: `warning: policy.agents.coder: "kg.write" matches no tool Nexus knows of: server "kg" lists no tool "write"`,
			not:    `"kg.lookup" matches`},
		{name: "a server no config has is refused", config: cfg, args: []string{"policy", "allow", "--agent", "coder", "kg.lookup", "kgg.write"}, code: 2,
			stderr: `nexus: kgg.write: no server "kgg" is configured, nothing was written; did you mean kg.write? (--later writes it for a server you add later)`,
			check: func(t *testing.T, h *home, _, _ string) {
				if s := mustRead(t, filepath.Join(h.dir, "config.json")); strings.Contains(s, "policy") {
					t.Errorf("a refused edit wrote:\n%s", s)
				}
			}},
		{name: "default, with a server added later", config: cfg, args: []string{"policy", "deny", "--default", "--later", "kg.*", "other.tool"}, code: 0,
			stdout: "policy.default in HOME/config.json: allow [@readonly], deny [kg.* other.tool]",
			stderr: `warning: policy.default: "other.tool" matches no tool Nexus knows of: no server is named "other" (known: kg)`,
			check: func(t *testing.T, h *home, _, _ string) {
				if s := mustRead(t, filepath.Join(h.dir, "config.json")); !strings.Contains(s, `"default": {`) {
					t.Errorf("config after --default:\n%s", s)
				}
			}},
		{name: "agent and default", config: cfg, args: []string{"policy", "allow", "--agent", "a", "--default", "kg.*"}, code: 2,
			stderr: "nexus: nexus policy allow needs --agent NAME or --default"},
		{name: "one bad entry writes nothing", config: cfg, args: []string{"policy", "allow", "--agent", "a", "kg.lookup", "bad"}, code: 1,
			stderr: `"bad"`, check: func(t *testing.T, h *home, _, _ string) {
				if s := mustRead(t, filepath.Join(h.dir, "config.json")); strings.Contains(s, "policy") {
					t.Errorf("a refused edit wrote:\n%s", s)
				}
			}},
	})
}

// TestFrictionAgents: agent list shows agents and never tokens; rotate replaces the
// token (the config keeps only the new one's hash); remove drops it.
func TestFrictionAgents(t *testing.T) {
	t.Parallel()
	h := newHome(t, map[string]any{})
	hash := func(tok string) string {
		sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
		return hex.EncodeToString(sum[:])
	}
	old, stderr, code := h.nexus("agent", "add", "coder")
	if code != 0 {
		t.Fatalf("agent add: %s", stderr)
	}
	rotated, stderr, code := h.nexus("agent", "rotate", "coder")
	cfg := mustRead(t, filepath.Join(h.dir, "config.json"))
	if code != 0 || !strings.Contains(stderr, "the old one no longer works") || strings.TrimSpace(rotated) == strings.TrimSpace(old) ||
		!strings.Contains(cfg, hash(rotated)) || strings.Contains(cfg, hash(old)) {
		t.Errorf("agent rotate: exit %d\n%s%s\nconfig:\n%s", code, rotated, stderr, cfg)
	}
	for _, tc := range []struct {
		args       []string
		code       int
		want, none string
	}{
		{[]string{"agent", "list"}, 0, "AGENT  TOKEN  POLICY   SOURCE\ncoder  yes    default  " + filepath.Join(h.dir, "config.json"), "nxs_"},
		{[]string{"agent", "list", "--json"}, 0, `"name": "coder",` + "\n" + `    "token": true,`, "nxs_"},
		{[]string{"agent", "rotate", "nobody"}, 2, `no agent "nobody"`, ""},
		{[]string{"agent", "add", "coder"}, 2, "`nexus agent rotate coder` gives it a new token", ""},
		{[]string{"agent", "remove", "coder"}, 0, "removed agent coder", ""},
		{[]string{"agent", "remove", "coder"}, 1, `no agent "coder"`, ""},
		{[]string{"agent", "list"}, 0, "no agents yet", ""},
	} {
		out, stderr, code := h.nexus(tc.args...)
		if code != tc.code || !strings.Contains(out+stderr, tc.want) || (tc.none != "" && strings.Contains(out+stderr, tc.none)) {
			t.Errorf("nexus %s: exit %d, want %d and %q:\n%s%s", strings.Join(tc.args, " "), code, tc.code, tc.want, out, stderr)
		}
	}
}

// TestFrictionCallArgs: --args takes @FILE and - (stdin); a bad value says where
// and how to write it.
func TestFrictionCallArgs(t *testing.T) {
	t.Parallel()
	cfg := mustJSON(t, map[string]any{"servers": map[string]any{"fx": map[string]any{"command": built.fixture}}})
	files := map[string]string{"args.json": `{"message": "from a file"}`, "bad.json": "{\n  \"message\": \n}"}
	how := `write a JSON object, e.g. --args '{"message": "hi"}', --args @args.json or --args - (stdin)`
	runFrictions(t, []friction{
		{name: "@file", config: cfg, files: files, args: []string{"call", "fx.echo", "--args", "@HOME/args.json"}, code: 0, stdout: "from a file"},
		{name: "stdin", config: cfg, stdin: `{"message": "from stdin"}`, args: []string{"call", "fx.echo", "--args", "-"}, code: 0, stdout: "from stdin"},
		{name: "not an object", config: cfg, args: []string{"call", "fx.echo", "--args", "[1]"}, code: 2,
			stderr: "nexus: --args must be a JSON object of the tool's arguments by name, not an array; " + how},
		{name: "bad file", config: cfg, files: files, args: []string{"call", "fx.echo", "--args", "@HOME/bad.json"}, code: 2,
			stderr: "nexus: --args @HOME/bad.json is not valid JSON at line 3, column 1 (invalid character '}' looking for beginning of value); " + how},
		{name: "missing file", config: cfg, args: []string{"call", "fx.echo", "--args", "@HOME/nope.json"}, code: 2,
			stderr: "nexus: --args @HOME/nope.json: cannot read the file (no such file or directory); give a JSON file's path after @"},
		{name: "empty stdin", config: cfg, args: []string{"call", "fx.echo", "--args", "-"}, code: 2,
			stderr: "nexus: --args - (stdin) is empty; " + how},
	})
}

// TestFrictionConfigList: NEXUS_CONFIG lists layers separated like PATH.
func TestFrictionConfigList(t *testing.T) {
	t.Parallel()
	files := map[string]string{"a.json": `{"servers": {"srv-a": {"command": "x"}}}`, "b.json": `{"servers": {"srv-b": {"command": "y"}}}`}
	list := "NEXUS_CONFIG=HOME/a.json" + string(os.PathListSeparator) + string(os.PathListSeparator) + "HOME/b.json"
	runFrictions(t, []friction{
		{name: "two layers", config: `{}`, files: files, env: []string{list}, args: []string{"list-servers", "--json"}, code: 0,
			check: func(t *testing.T, h *home, stdout, _ string) {
				if !strings.Contains(stdout, `"srv-a"`) || !strings.Contains(stdout, `"srv-b"`) {
					t.Errorf("list-servers with both layers:\n%s", stdout)
				}
			}},
		{name: "--config wins over the variable", config: `{}`, files: files, env: []string{list}, args: []string{"list-servers", "--json", "--config", "HOME/b.json"}, code: 0,
			stdout: `"srv-b"`, not: `"srv-a"`},
		{name: "a missing layer is named", config: `{}`, files: files, env: []string{"NEXUS_CONFIG=HOME/a.json" + string(os.PathListSeparator) + "HOME/nope.json"}, args: []string{"list-servers"}, code: 1,
			stderr: "HOME/nope.json"},
	})
}

// TestFrictionSetupClaudeCodeAndCodex: setup writes Claude Code's ~/.claude.json
// (keeping its other keys) and Codex's ~/.codex/config.toml (keeping the rest of
// the TOML), and leaves both alone when run again.
func TestFrictionSetupClaudeCodeAndCodex(t *testing.T) {
	t.Parallel()
	claudeJSON := `{"numStartups": 3, "projects": {"/src": {"mcpServers": {}}}, "mcpServers": {"docs": {"type": "stdio", "command": "npx", "args": ["-y", "docs"]}}}`
	codexTOML := "model = \"o3\" # mine\n\n[mcp_servers.docs]\ncommand = \"npx\"\nargs = [\"-y\", \"docs\"]\n"
	runFrictions(t, []friction{
		{name: "claude-code", config: `{}`, files: map[string]string{".claude.json": claudeJSON},
			args: []string{"setup", "claude-code", "--agent", "claude"}, code: 0, stdout: "restart Claude Code to connect it to Nexus",
			check: func(t *testing.T, h *home, _, _ string) {
				var doc struct {
					NumStartups int                                `json:"numStartups"`
					Projects    map[string]any                     `json:"projects"`
					MCPServers  map[string]struct{ Args []string } `json:"mcpServers"`
				}
				if err := json.Unmarshal([]byte(mustRead(t, filepath.Join(h.dir, ".claude.json"))), &doc); err != nil {
					t.Fatal(err)
				}
				if doc.NumStartups != 3 || doc.Projects["/src"] == nil || len(doc.MCPServers) != 2 || strings.Join(doc.MCPServers["nexus"].Args, " ") != "serve --agent claude --max-name-length 52" {
					t.Errorf("~/.claude.json after setup: %+v", doc)
				}
				if out, _, code := h.nexus("setup", "claude-code"); code != 0 || !strings.Contains(out, "already runs Nexus") {
					t.Errorf("setup claude-code again: %d %s", code, out)
				}
			}},
		{name: "codex", config: `{}`, files: map[string]string{".codex/config.toml": codexTOML},
			args: []string{"setup", "codex", "--agent", "codex"}, code: 0, stdout: "restart Codex to connect it to Nexus",
			check: func(t *testing.T, h *home, _, _ string) {
				file := filepath.Join(h.dir, ".codex", "config.toml")
				got := mustRead(t, file)
				want := codexTOML + "\n[mcp_servers.nexus]\ncommand = \"" + built.nexus + "\"\nargs = [\"serve\", \"--agent\", \"codex\"]\n\n[mcp_servers.nexus.env]\nNEXUS_HOME = \"" + h.dir + "\"\nPATH = \""
				if !strings.HasPrefix(got, want) || len(backupsOf(t, file)) != 1 {
					t.Errorf("config.toml after setup:\n%s\nwant it to start with\n%s", got, want)
				}
				if out, _, code := h.nexus("setup", "codex"); code != 0 || !strings.Contains(out, "already runs Nexus") || mustRead(t, file) != got || len(backupsOf(t, file)) != 1 {
					t.Errorf("setup codex again: %d %s", code, out)
				}
				if out, _, code := h.nexus("doctor"); code != 0 || !strings.Contains(out, "  ok    Codex: Codex starts Nexus from "+file) {
					t.Errorf("doctor after setup codex: %d\n%s", code, out)
				}
			}},
		{name: "codex moves its servers", config: `{}`,
			files: map[string]string{".codex/config.toml": "model = \"o3\" # mine\n\n[mcp_servers.kg]\ncommand = \"" + built.nexus + "\"\nargs = [\"sample-server\", \"code-kg\"]\n"},
			args:  []string{"setup", "codex", "--move-all"}, code: 0, stdout: "moved behind Nexus: kg",
			check: func(t *testing.T, h *home, _, _ string) {
				got := mustRead(t, filepath.Join(h.dir, ".codex", "config.toml"))
				if !strings.HasPrefix(got, "model = \"o3\" # mine\n") || strings.Contains(got, "[mcp_servers.kg]") || !strings.Contains(got, "[mcp_servers.nexus]") {
					t.Errorf("config.toml after the move:\n%s", got)
				}
				if cfg := mustRead(t, filepath.Join(h.dir, "config.json")); !strings.Contains(cfg, `"kg"`) {
					t.Errorf("the Nexus config lacks kg:\n%s", cfg)
				}
			}},
	})
}

// TestFrictionImportVariables: an import resolves ${workspaceFolder} and
// ${userHome} (or refuses the server, exit 1), copies envFile into env, and says
// which tools the default policy hides, with the command that grants them.
func TestFrictionImportVariables(t *testing.T) {
	t.Parallel()
	client := mustJSON(t, map[string]any{"servers": map[string]any{
		"kg":  map[string]any{"command": built.nexus, "args": []string{"sample-server", "code-kg"}, "env": map[string]string{"ROOT": "${workspaceFolder}", "NOTES": "${userHome}/notes"}, "envFile": ".env"},
		"odd": map[string]any{"command": "x", "args": []string{"${cwd}"}},
	}})
	runFrictions(t, []friction{
		{name: "vscode workspace file", config: `{}`, files: map[string]string{"proj/.vscode/mcp.json": client, "proj/.env": "UNITS=metric\n"},
			args: []string{"import", "HOME/proj/.vscode/mcp.json", "--yes"}, code: 1,
			stderr: "nexus: 1 server(s) were not imported; see why above",
			check: func(t *testing.T, h *home, stdout, _ string) {
				for _, want := range []string{
					"imported kg\n",
					"  note: ${userHome} resolved to " + h.dir + "\n",
					"  note: envFile " + filepath.Join(h.dir, "proj", ".env") + ": 1 variable(s) copied into env",
					`skipped odd: ` + filepath.Join(h.dir, "proj", ".vscode", "mcp.json") + `: server "odd": it uses ${cwd}, which Nexus cannot resolve`,
					"policy: agent anonymous will not see 2 of the 14 tools of kg (not read-only): kg.kg_regenerate, kg.kg_regenerate_submit\n",
					"  to grant them: nexus policy allow --default kg.kg_regenerate kg.kg_regenerate_submit   (or 'kg.*' for all of them)\n",
				} {
					if !strings.Contains(stdout, want) {
						t.Errorf("import output lacks %q:\n%s", want, stdout)
					}
				}
				cfg := mustRead(t, filepath.Join(h.dir, "config.json"))
				for _, want := range []string{`"ROOT": "` + filepath.Join(h.dir, "proj") + `"`, `"NOTES": "` + h.dir + `/notes"`, `"UNITS": "metric"`} {
					if !strings.Contains(cfg, want) {
						t.Errorf("config lacks %s:\n%s", want, cfg)
					}
				}
			}},
	})
}

// TestFrictionLaunchers: the catalog's NEEDS column names the launcher an entry
// runs with, and installing one whose launcher is missing warns as --command does.
func TestFrictionLaunchers(t *testing.T) {
	t.Parallel()
	noLaunchers := []string{"PATH=" + filepath.Dir(built.nexus)}
	runFrictions(t, []friction{
		{name: "catalog list", args: []string{"catalog", "list"}, code: 0,
			stdout: "\ntime                 stdio            uvx                                  Current time and time zone conversions\n"},
		{name: "catalog list --json", args: []string{"catalog", "list", "--json"}, code: 0, stdout: `"launcher": "uvx",`},
		{name: "add time without uvx", config: `{}`, env: noLaunchers, args: []string{"add", "time", "--yes"}, code: 0,
			stdout: "added time (catalog entry time)",
			stderr: "warning: uvx is not on PATH (executable file not found in $PATH); the server is saved, but it will not start until uvx is installed (nexus doctor checks it)"},
		{name: "add by hand without the program", config: `{}`, env: noLaunchers, args: []string{"add", "files", "--command", "npx", "--", "-y", "pkg"}, code: 0,
			stderr: "warning: npx is not on PATH"},
		{name: "a sample needs nothing", config: `{}`, env: noLaunchers, args: []string{"add", "code-kg-sample", "--yes"}, code: 0, not: "warning"},
	})
}

// TestFrictionSecretStoreWords: messages name the store that holds the secrets,
// the no-bus hint says what works, and a one-shot command using the file store
// prints no WARN line for it.
func TestFrictionSecretStoreWords(t *testing.T) {
	noBusAtAll := []string{"DBUS_SESSION_BUS_ADDRESS=", "PATH=" + filepath.Dir(built.nexus)}
	runFrictionRows(t, []friction{
		{name: "no bus at all", config: `{}`, env: noBusAtAll, args: []string{"add", "gh", "--command", "x", "--env", "TOKEN=ghp_abcdefghijklmnopqrstuvwx"}, code: 1,
			stderr: "OS keychain unavailable: no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set)\nTo fix: there is no D-Bus session bus, so no Secret Service to keep secrets (installing dbus-x11 alone does not help",
			not:    `exec: "dbus-launch"`},
	}, true) // serial, as the test: it stores secrets
	h := newHome(t, map[string]any{"secrets": map[string]any{"insecureFileStore": true}})
	env := []string{"DBUS_SESSION_BUS_ADDRESS=unix:path=" + filepath.Join(h.dir, "no-bus")}
	if _, stderr, code := h.nexusWith("", env, "add", "kg", "--command", "x", "--env", "TOKEN=ghp_abcdefghijklmnopqrstuvwx"); code != 0 || strings.Contains(stderr, "level=WARN") {
		t.Fatalf("add with the file store: exit %d (and no WARN line wanted)\n%s", code, stderr)
	}
	out, stderr, code := h.nexusWith("", env, "remove", "kg")
	if code != 0 || !strings.Contains(out, "deleted 1 secret(s) of kg from the insecure file store "+filepath.Join(h.dir, "secrets", "secrets.json")) || strings.Contains(stderr, "level=WARN") {
		t.Errorf("remove with the file store: exit %d\n%s%s", code, out, stderr)
	}
}
