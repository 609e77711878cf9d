package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelpFromTheBinary: --help exits 0 with the usage on stdout, for the app and
// a subcommand. Every command's help is checked in process
// (cmd/nexus/help_test.go).
func TestHelpFromTheBinary(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	for _, c := range [][]string{{"--help"}, {"policy", "allow", "--help"}} {
		out, stderr, code := h.nexus(c...)
		if code != 0 || !strings.Contains(out, "USAGE") {
			t.Errorf("nexus %s: code %d\n%s%s", strings.Join(c, " "), code, out, stderr)
		}
	}
}

func TestAddRemoveListServers(t *testing.T) {
	t.Parallel()
	h := newHome(t, map[string]any{"toolNames": "wire", "servers": map[string]any{}})
	// Name first, as people type it, and flags first: both work.
	if _, stderr, code := h.nexus("add", "fx", "--transport", "stdio", "--command", built.fixture, "--plain-env", "A=1", "--", "-x", "y"); code != 0 {
		t.Fatalf("add (name first): %s", stderr)
	}
	if _, stderr, code := h.nexus("add", "--command", built.fixture, "fy"); code != 0 {
		t.Fatalf("add (flags first): %s", stderr)
	}
	data, _ := os.ReadFile(filepath.Join(h.dir, "config.json"))
	var cfg struct {
		ToolNames string `json:"toolNames"`
		Servers   map[string]struct {
			Transport, Command string
			Args               []string
			Env                map[string]string
		}
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	fx := cfg.Servers["fx"]
	if cfg.ToolNames != "wire" || fx.Command != built.fixture || strings.Join(fx.Args, " ") != "-x y" || fx.Env["A"] != "1" || cfg.Servers["fy"].Command != built.fixture {
		t.Fatalf("config after add: %s", data)
	}
	out, _, code := h.nexus("list-servers", "--json")
	var rows []struct{ Name, Transport string }
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 2 || rows[0].Name != "fx" || rows[0].Transport != "stdio" {
		t.Fatalf("list-servers --json: %s", out)
	}
	if _, stderr, code := h.nexus("add", "fx", "--command", "other"); code == 0 || !strings.Contains(stderr, "--force") {
		t.Errorf("adding an existing name should say how to replace it: %s", stderr)
	}
	if _, stderr, code := h.nexus("add", "Bad_Name", "--command", "x"); code == 0 || !strings.Contains(stderr, "lower-case") {
		t.Errorf("a bad name should be refused: %s", stderr)
	}
	if _, stderr, code := h.nexus("add", "fz", "--transport", "sse"); code == 0 || !strings.Contains(stderr, "url") {
		t.Errorf("a remote server without url should be refused: %s", stderr)
	}
	if _, stderr, code := h.nexus("add", "fz", "--command", "x", "--bogus"); code == 0 || !strings.Contains(stderr, "bogus") {
		t.Errorf("an unknown flag should be refused: %s", stderr)
	}
	if _, stderr, code := h.nexus("remove", "fy"); code != 0 {
		t.Fatalf("remove: %s", stderr)
	}
	if _, stderr, code := h.nexus("remove", "fy"); code == 0 || !strings.Contains(stderr, "no server named") {
		t.Errorf("removing twice: %s", stderr)
	}
	after, _ := os.ReadFile(filepath.Join(h.dir, "config.json"))
	if strings.Contains(string(after), `"fy"`) || !strings.Contains(string(after), `"toolNames"`) {
		t.Errorf("remove should drop fy and keep the other keys: %s", after)
	}
}

func TestListToolsAndCall(t *testing.T) {
	t.Parallel()
	h := fixtureHome(t, nil, nil)
	out, stderr, code := h.nexus("list-tools")
	if code != 0 || !strings.Contains(out, "fx.echo") || !strings.Contains(out, "fx__echo") || !strings.Contains(out, "Echo the message back.") || strings.Contains(out, "Second line") {
		t.Fatalf("list-tools: %d\n%s%s", code, out, stderr)
	}
	out, stderr, code = h.nexus("call", "fx.echo", "--args", `{"message":"from the cli"}`)
	if code != 0 || !strings.Contains(out, "from the cli") {
		t.Fatalf("call: %d\n%s%s", code, out, stderr)
	}
	if _, stderr, code = h.nexus("call", "fx.nope"); code == 0 || !strings.Contains(stderr, "unknown tool") {
		t.Errorf("call of an unknown tool: %d %s", code, stderr)
	}
	if _, stderr, code = h.nexus("call", "fx.echo", "--args", `{"message":`); code != 2 || !strings.Contains(stderr, "not valid JSON") {
		t.Errorf("call with malformed --args: %d %s", code, stderr)
	}
	if out, _, code = h.nexus("call", "fx.getenv", "--args", `{"name":"X","fail":true}`); code != 1 || !strings.Contains(out, "isError") {
		t.Errorf("a tool error exits 1 and still prints the result: %d %s", code, out)
	}
	out, _, code = h.nexus("version")
	if code != 0 || !strings.HasPrefix(out, "nexus ") {
		t.Errorf("version: %s", out)
	}
}

func TestConfigErrorsNameFileAndKey(t *testing.T) {
	t.Parallel()
	h := newHome(t, map[string]any{"servers": map[string]any{"fx": map[string]any{"comand": "x"}}})
	_, stderr, code := h.nexus("list-servers")
	if code == 0 || !strings.Contains(stderr, filepath.Join(h.dir, "config.json")) || !strings.Contains(stderr, "servers.fx") || !strings.Contains(stderr, `did you mean "command"`) {
		t.Errorf("config error: %d %s", code, stderr)
	}
	team := filepath.Join(h.dir, "team.json")
	os.WriteFile(team, []byte(`{"mcpServers": {"desk": {"command": "`+built.fixture+`"}}}`), 0o600)
	h.writeConfig(map[string]any{})
	out, stderr, code := h.nexus("--config", team, "list-servers", "--json")
	if code != 0 || !strings.Contains(out, `"desk"`) || !strings.Contains(out, "team.json") {
		t.Errorf("a Claude Desktop mcpServers layer: %d %s %s", code, out, stderr)
	}
}
