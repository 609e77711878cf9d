package tests

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSetupCapsNamesForClients: setup writes --max-name-length into the entry of
// a client that caps names lower or prefixes them, and nothing for the others;
// the serve it writes shortens names to fit.
func TestSetupCapsNamesForClients(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		client, want string
	}{
		{"cursor", `"--max-name-length",`},
		{"claude-code", `"--max-name-length",`},
		{"claude-desktop", ""},
	} {
		t.Run(tc.client, func(t *testing.T) {
			h := newHome(t, nil)
			path := clPlace(t, h, tc.client, "")
			if _, stderr, code := h.nexusEnv(clEnv(h), "setup", tc.client, "--json"); code != 0 {
				t.Fatalf("setup %s: %s", tc.client, stderr)
			}
			var doc struct {
				MCPServers map[string]struct {
					Args []string `json:"args"`
				} `json:"mcpServers"`
			}
			if err := json.Unmarshal([]byte(clRead(t, path)), &doc); err != nil {
				t.Fatal(err)
			}
			args := strings.Join(doc.MCPServers["nexus"].Args, " ")
			limit := map[string]string{"cursor": "60", "claude-code": "52"}[tc.client]
			switch {
			case limit != "" && args != "serve --max-name-length "+limit:
				t.Errorf("%s entry: serve %q, want --max-name-length %s", tc.client, args, limit)
			case limit == "" && args != "serve":
				t.Errorf("%s entry: %q, want plain serve", tc.client, args)
			}
		})
	}
}

// TestMaxNameLengthShortensNames: a wire name over the bound is shortened to it,
// the same way each time, and a call by the short name reaches the tool; the
// bound from the config and from the flag agree.
func TestMaxNameLengthShortensNames(t *testing.T) {
	t.Parallel()
	long := "a_tool_with_a_rather_long_name_for_claude_code"
	h := fixtureHome(t, map[string]any{"env": map[string]string{"FIXTURE_EXTRA_TOOLS": long}}, map[string]any{"names": map[string]any{"maxLength": 40}})
	wire := func(args ...string) string {
		out, stderr, code := h.nexus(append([]string{"list-tools", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("list-tools: %s", stderr)
		}
		var rows []struct{ Canonical, Wire string }
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if len(r.Wire) > 40 {
				t.Errorf("%s goes by %q, longer than 40", r.Canonical, r.Wire)
			}
			if r.Canonical == "fx."+long {
				return r.Wire
			}
		}
		t.Fatalf("no fx.%s in %s", long, out)
		return ""
	}
	fromConfig, fromFlag := wire(), wire("--max-name-length", "40")
	if fromConfig != fromFlag || !strings.HasPrefix(fromConfig, "fx__a_tool") {
		t.Errorf("config gives %q, the flag %q", fromConfig, fromFlag)
	}
	s := h.serveStdio()
	if _, ok := s.tools()[fromConfig]; !ok {
		t.Errorf("serve does not list %s", fromConfig)
	}
	if r := s.call(fromConfig, map[string]any{}); r.IsError {
		t.Errorf("calling %s: %s", fromConfig, r.text())
	}
	if _, stderr, code := h.nexus("serve", "--max-name-length", "5"); code != 2 || !strings.Contains(stderr, "from 20 to 64") {
		t.Errorf("serve --max-name-length 5: %d %s", code, stderr)
	}
}

// TestListToolsCost: list-tools --cost says what each agent's manifest costs,
// in search mode and not.
func TestListToolsCost(t *testing.T) {
	t.Parallel()
	h := fixtureHome(t, nil, map[string]any{"agents": map[string]any{"finder": map[string]any{"tools": "search"}}})
	out, stderr, code := h.nexus("list-tools", "--cost", "--json")
	if code != 0 {
		t.Fatalf("list-tools --cost: %s", stderr)
	}
	var costs []struct {
		Agent        string `json:"agent"`
		Mode         string `json:"mode"`
		Tools        int    `json:"tools"`
		AllTokens    int    `json:"allTokens"`
		SearchTokens int    `json:"searchTokens"`
		ListedTokens int    `json:"listedTokens"`
	}
	if err := json.Unmarshal([]byte(out), &costs); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	modes := map[string]string{}
	for _, c := range costs {
		modes[c.Agent] = c.Mode
		if c.Tools == 0 || c.SearchTokens >= c.AllTokens {
			t.Errorf("%+v", c)
		}
		if want := map[string]int{"all": c.AllTokens, "search": c.SearchTokens}[c.Mode]; c.ListedTokens != want {
			t.Errorf("%s sends %d tokens, want %d", c.Agent, c.ListedTokens, want)
		}
	}
	if modes["anonymous"] != "all" || modes["finder"] != "search" {
		t.Errorf("modes %v", modes)
	}
	if text, _, _ := h.nexus("list-tools"); !strings.Contains(text, "estimated: bytes/4") || !strings.Contains(text, "finder") {
		t.Errorf("list-tools ends without the cost per agent:\n%s", text)
	}
}

// TestRenamedToolEndToEnd: a tool renamed in servers.NAME.tools is called,
// allowed by policy and checked by its new name; a pin naming no tool is
// reported by policy check.
func TestRenamedToolEndToEnd(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	h.writeConfig(map[string]any{
		"servers": map[string]any{"fx": h.fixtureServer(map[string]any{"tools": map[string]any{"echo": map[string]any{"name": "say", "description": "Says it back"}}})},
		"policy":  map[string]any{"default": map[string]any{"allow": []string{"fx.say"}}},
		"tools":   map[string]any{"mode": "search", "pin": []string{"fx.say", "fx.nope"}},
	})
	if out, stderr, code := h.nexus("call", "fx.say", "--args", `{"message":"renamed"}`); code != 0 || !strings.Contains(out, "renamed") {
		t.Errorf("call fx.say: %d %s%s", code, out, stderr)
	}
	if _, stderr, code := h.nexus("call", "fx.echo", "--args", `{"message":"x"}`); code == 0 || !strings.Contains(stderr, "unknown tool") {
		t.Errorf("call fx.echo, the old name: %d %s", code, stderr)
	}
	if h.calls()["echo"] != 1 {
		t.Errorf("the child was called %v, want echo once, by its own name", h.calls())
	}
	out, _, code := h.nexus("policy", "check")
	if code != 1 || strings.Contains(out, `"fx.say"`) || !strings.Contains(out, `tools.pin[1] "fx.nope": server "fx" lists no tool "nope"`) {
		t.Errorf("policy check: %d\n%s", code, out)
	}
}
