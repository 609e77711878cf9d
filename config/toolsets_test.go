package config

import (
	"strings"
	"testing"
)

// TestToolsetsParsed: the short and the long form, the default and an agent's
// own, names.maxLength and tool overrides are read as written.
func TestToolsetsParsed(t *testing.T) {
	cfg, err := Parse("f.json", []byte(`{
		"servers": {"gh": {"command": "x", "tools": {"create_issue": {"name": "open_issue", "description": "Open an issue"}}}},
		"tools": "search",
		"agents": {"ci": {"tools": {"mode": "search", "pin": ["gh.*", "fs.read_file"], "budget": 4}}, "me": {"tools": "all"}},
		"names": {"maxLength": 48}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		agent  string
		mode   string
		budget int
	}{{"ci", ToolsSearch, 4}, {"me", ToolsAll, 0}, {"other", ToolsSearch, 0}} {
		if ts := cfg.ToolsetFor(tc.agent); ts.Mode != tc.mode || ts.Budget != tc.budget {
			t.Errorf("%s: %+v, want mode %s budget %d", tc.agent, ts, tc.mode, tc.budget)
		}
	}
	ci := cfg.ToolsetFor("ci")
	for name, want := range map[string]bool{"gh.create_issue": true, "fs.read_file": true, "fs.write_file": false} {
		if ci.Pins(name) != want {
			t.Errorf("Pins(%s) = %v", name, !want)
		}
	}
	if cfg.Names.MaxName() != 48 {
		t.Errorf("maxLength %d", cfg.Names.MaxName())
	}
	if o := cfg.Servers["gh"].Tools["create_issue"]; o.Name != "open_issue" || o.Description != "Open an issue" {
		t.Errorf("override %+v", o)
	}
	bare, err := Parse("f.json", []byte(`{}`))
	if err != nil || bare.ToolsetFor("x").Mode != ToolsAll || bare.Names.MaxName() != 64 {
		t.Errorf("defaults: %v %+v %d", err, bare.ToolsetFor("x"), bare.Names.MaxName())
	}
}

func TestToolsetErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"unknown mode", `{"tools": "some"}`, []string{"tools", `"search"`, `not "some"`}},
		{"unknown toolset key", `{"tools": {"mode": "search", "pins": []}}`, []string{"tools", "pins"}},
		{"pin in all mode", `{"tools": {"mode": "all", "pin": ["a.b"]}}`, []string{"tools", `"pin" and "budget"`}},
		{"toolset of the wrong type", `{"agents": {"ci": {"tools": 3}}}`, []string{"agents.ci.tools", `write "all", "search"`}},
		{"unknown agent toolset key", `{"agents": {"ci": {"tools": {"mode": "search", "pins": []}}}}`, []string{"agents.ci.tools", `unknown field "pins"`}},
		{"bad pin", `{"agents": {"ci": {"tools": {"mode": "search", "pin": ["gh__x"]}}}}`, []string{"agents.ci.tools", `"gh__x"`, "server.tool"}},
		{"budget too big", `{"agents": {"ci": {"tools": {"mode": "search", "budget": 1000}}}}`, []string{"agents.ci.tools", "64"}},
		{"negative budget", `{"tools": {"mode": "search", "budget": -1}}`, []string{"tools", "budget"}},
		{"tiny maxLength", `{"names": {"maxLength": 5}}`, []string{"names.maxLength", "from 20 to 64"}},
		{"long maxLength", `{"names": {"maxLength": 100}}`, []string{"names.maxLength"}},
		{"unknown names key", `{"names": {"max": 40}}`, []string{"names.max", `"maxLength"`}},
		{"bad override name", `{"servers": {"gh": {"command": "x", "tools": {"a": {"name": "a.b"}}}}}`, []string{"servers.gh", `"a.b"`}},
		{"two tools one name", `{"servers": {"gh": {"command": "x", "tools": {"a": {"name": "c"}, "b": {"name": "c"}}}}}`, []string{"servers.gh", "both"}},
		{"unknown override key", `{"servers": {"gh": {"command": "x", "tools": {"a": {"nmae": "c"}}}}}`, []string{"servers.gh.tools", "nmae"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.json", []byte(tc.doc))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestToolOverridesMergeByTool: a later layer's overrides join an earlier one's.
func TestToolOverridesMergeByTool(t *testing.T) {
	dir := t.TempDir()
	team := write(t, dir, "team.json", `{"servers": {"kg": {"command": "kg", "tools": {"a": {"name": "alpha"}}}}}`)
	personal := write(t, dir, "config.json", `{"servers": {"kg": {"tools": {"b": {"title": "Bee"}}}}}`)
	cfg, err := LoadLayers([]Layer{{Path: team}, {Path: personal}})
	if err != nil {
		t.Fatal(err)
	}
	if tools := cfg.Servers["kg"].Tools; tools["a"].Name != "alpha" || tools["b"].Title != "Bee" {
		t.Errorf("tools %+v", tools)
	}
}

func TestPinProblems(t *testing.T) {
	cfg, err := Parse("f.json", []byte(`{"tools": {"mode": "search", "pin": ["gh.create_issue", "gh.nope", "kg.*", "*"]},
		"agents": {"ci": {"tools": {"mode": "search", "pin": ["slow.x", "gone.*"]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.PinProblems(map[string][]string{"gh": {"create_issue"}, "kg": {"a"}, "slow": nil})
	want := []string{`tools.pin[1] "gh.nope": server "gh" lists no tool "nope"`, `agents.ci.tools.pin[1] "gone.*": no server is named "gone"`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("PinProblems:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
