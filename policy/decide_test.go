package policy

import (
	"strings"
	"testing"
)

var (
	latest    = Tool{Name: "code-kg.kg_latest_graph", ReadOnly: true}
	regen     = Tool{Name: "code-kg.kg_regenerate"}
	submit    = Tool{Name: "code-kg.kg_regenerate_submit", Destructive: true}
	search    = Tool{Name: "doc-kg.doc_kg_search", ReadOnly: true}
	confused  = Tool{Name: "code-kg.kg_wipe", ReadOnly: true, Destructive: true}
	dottedRO  = Tool{Name: "fs.read.file", ReadOnly: true}
	catalog   = []Tool{latest, regen, submit, search, confused, dottedRO}
	coderOnly = Config{Agents: map[string]Rules{"coder": {Allow: []string{"@readonly", "code-kg.kg_regenerate"}}}}
)

func mustCompile(t testing.TB, cfg Config) *Policy {
	t.Helper()
	p, err := Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDecide(t *testing.T) {
	def := &Rules{Allow: []string{"doc-kg.*"}}
	tests := []struct {
		name   string
		cfg    Config
		agent  string
		tool   Tool
		allow  bool
		rule   string
		origin string
	}{
		{"builtin allows read-only", Config{}, "", latest, true, `allow "@readonly"`, BuiltinOrigin},
		{"builtin refuses mutating", Config{}, "x", regen, false, "no allow rule matches", BuiltinOrigin},
		{"builtin refuses destructive", Config{}, "x", submit, false, "no allow rule matches", BuiltinOrigin},
		{"read-only and destructive is destructive", Config{}, "x", confused, false, "no allow rule matches", BuiltinOrigin},
		{"dotted tool part", Config{}, "x", dottedRO, true, `allow "@readonly"`, BuiltinOrigin},
		{"configured default replaces builtin", Config{Default: def}, "x", latest, false, "no allow rule matches", DefaultOrigin},
		{"configured default glob", Config{Default: def}, "x", search, true, `allow "doc-kg.*"`, DefaultOrigin},
		{"empty default allows nothing", Config{Default: &Rules{}}, "x", search, false, "no allow rule matches", DefaultOrigin},
		{"agent override grants", coderOnly, "coder", regen, true, `allow "code-kg.kg_regenerate"`, "policy.agents.coder"},
		{"agent override keeps what it lists", coderOnly, "coder", latest, true, `allow "@readonly"`, "policy.agents.coder"},
		{"other agents keep default", coderOnly, "qa", regen, false, "no allow rule matches", BuiltinOrigin},
		{"override replaces, not merges", Config{Default: def, Agents: map[string]Rules{"coder": {Allow: []string{"code-kg.*"}}}},
			"coder", search, false, "no allow rule matches", "policy.agents.coder"},
		{"deny beats allow", Config{Agents: map[string]Rules{"a": {Allow: []string{"*"}, Deny: []string{"code-kg.kg_regenerate"}}}},
			"a", regen, false, `deny "code-kg.kg_regenerate"`, "policy.agents.a"},
		{"deny glob beats exact allow", Config{Agents: map[string]Rules{"a": {Allow: []string{"code-kg.kg_regenerate"}, Deny: []string{"code-kg.*"}}}},
			"a", regen, false, `deny "code-kg.*"`, "policy.agents.a"},
		{"most specific deny is named", Config{Agents: map[string]Rules{"a": {Deny: []string{"*", "code-kg.*", "code-kg.kg_regenerate"}}}},
			"a", regen, false, `deny "code-kg.kg_regenerate"`, "policy.agents.a"},
		{"star", Config{Agents: map[string]Rules{"a": {Allow: []string{"*"}}}}, "a", submit, true, `allow "*"`, "policy.agents.a"},
		{"deny @readonly", Config{Agents: map[string]Rules{"a": {Allow: []string{"*"}, Deny: []string{"@readonly"}}}},
			"a", search, false, `deny "@readonly"`, "policy.agents.a"},
		{"deny @readonly spares writers", Config{Agents: map[string]Rules{"a": {Allow: []string{"*"}, Deny: []string{"@readonly"}}}},
			"a", regen, true, `allow "*"`, "policy.agents.a"},
		{"annotation override decides", Config{}, "x", Tool{Name: regen.Name, ReadOnly: true}, true, `allow "@readonly"`, BuiltinOrigin},
		{"glob of another server", Config{Agents: map[string]Rules{"a": {Allow: []string{"doc-kg.*"}}}}, "a", regen, false, "no allow rule matches", "policy.agents.a"},
		{"unknown tool", coderOnly, "coder", Tool{Name: "code-kg.kg_unknown"}, false, "no allow rule matches", "policy.agents.coder"},
		{"anonymous override", Config{Agents: map[string]Rules{Anonymous: {Allow: []string{"*"}}}}, "", regen, true, `allow "*"`, "policy.agents.anonymous"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := mustCompile(t, tt.cfg).Decide(tt.agent, tt.tool)
			if d.Allowed != tt.allow || (tt.rule != "" && d.Rule != tt.rule) || d.Origin != tt.origin || d.Tool != tt.tool.Name {
				t.Errorf("Decide = %+v\nwant allowed=%v rule=%q origin=%q", d, tt.allow, tt.rule, tt.origin)
			}
			if (d.Hint() == "") != (d.Allowed || d.Rule == "not a canonical <server>.<tool> name") {
				t.Errorf("Hint = %q for %+v", d.Hint(), d)
			}
		})
	}
}

// TestTricks checks that matching is exact: names that look like a granted one, or are not
// canonical at all, never borrow its permission.
func TestTricks(t *testing.T) {
	exactOnly := mustCompile(t, Config{Agents: map[string]Rules{"a": {Allow: []string{"code-kg.kg_regenerate"}}}})
	globs := mustCompile(t, Config{Agents: map[string]Rules{"a": {Allow: []string{"*", "@readonly", "code-kg.*"}}}})
	const malformed = "not a canonical <server>.<tool> name"
	tests := []struct {
		name       string
		exactRule  string // rule when only "code-kg.kg_regenerate" is allowed
		globsAllow bool   // allowed under "*", "@readonly", "code-kg.*"
	}{
		{"code-kg.KG_REGENERATE", "no allow rule matches", true},
		{"Code-kg.kg_regenerate", malformed, false},
		{"CODE-KG.kg_regenerate", malformed, false},
		{"code-kg.kg_regenerat", "no allow rule matches", true},
		{"code-kg.kg_regenerate_submit", "no allow rule matches", true},
		{"code-kg.kg_regenerate.x", "no allow rule matches", true},
		// Names the spec does not allow but children send: globs match them.
		{"code-kg.a/b", "no allow rule matches", true},
		{"code-kg.two words", "no allow rule matches", true},
		{"code-kg.c++", "no allow rule matches", true},
		{"code-kg.résumé", "no allow rule matches", true},
		{"code-kg.bad\x00name", malformed, false},
		{"code-kg.\xff", malformed, false},
		{" code-kg.kg_regenerate", malformed, false},
		{"code-kg.kg_regenerate ", malformed, false},
		{"code-kg.kg_regenerate\n", malformed, false},
		{"code-kg__kg_regenerate", malformed, false},
		{"code-kg/kg_regenerate", malformed, false},
		{"code-kg.", malformed, false},
		{".kg_regenerate", malformed, false},
		{"code-kg.*", malformed, false},
		{"*", malformed, false},
		{"@readonly", malformed, false},
		{"", malformed, false},
	}
	for _, tt := range tests {
		tool := Tool{Name: tt.name, ReadOnly: true}
		if d := exactOnly.Decide("a", tool); d.Allowed || d.Rule != tt.exactRule {
			t.Errorf("exact policy: Decide(%q) = %v, %q; want denied, %q", tt.name, d.Allowed, d.Rule, tt.exactRule)
		}
		if d := globs.Decide("a", tool); d.Allowed != tt.globsAllow {
			t.Errorf("glob policy: Decide(%q) = %v (%s)", tt.name, d.Allowed, d.Rule)
		}
	}
}

func TestMessage(t *testing.T) {
	cfg := Config{
		Default: &Rules{Allow: []string{"@readonly"}},
		Agents: map[string]Rules{
			"coder": {Allow: []string{"@readonly", "code-kg.kg_regenerate"}, Deny: []string{"code-kg.kg_regenerate_submit"}},
			"qa":    {Allow: []string{"*"}, Deny: []string{"code-kg.*", "@readonly"}},
		},
		Sources: map[string]string{"policy.agents.coder": "/home/u/.nexus/config.json"},
	}
	p := mustCompile(t, cfg)
	tests := []struct {
		agent string
		tool  Tool
		want  string
	}{
		{"", regen, `agent "anonymous" may not call "code-kg.kg_regenerate": denied by policy.default (no allow rule matches; default allows @readonly only). To grant it: nexus policy allow --agent anonymous code-kg.kg_regenerate`},
		{"coder", regen, `agent "coder" may call "code-kg.kg_regenerate": allowed by policy.agents.coder in /home/u/.nexus/config.json (allow "code-kg.kg_regenerate")`},
		{"coder", submit, `agent "coder" may not call "code-kg.kg_regenerate_submit": denied by policy.agents.coder in /home/u/.nexus/config.json (deny "code-kg.kg_regenerate_submit"). To grant it: nexus policy allow --agent coder code-kg.kg_regenerate_submit`},
		{"qa", regen, `agent "qa" may not call "code-kg.kg_regenerate": denied by policy.agents.qa (deny "code-kg.*"). To grant it: nexus policy revoke --agent qa 'code-kg.*'`},
		{"qa", latest, `agent "qa" may not call "code-kg.kg_latest_graph": denied by policy.agents.qa (deny "code-kg.*"). To grant it: nexus policy revoke --agent qa 'code-kg.*' && nexus policy revoke --agent qa @readonly`},
		{"qa", Tool{Name: "code-kg__kg_regenerate"}, `agent "qa" may not call "code-kg__kg_regenerate": denied by policy.agents.qa ("code-kg__kg_regenerate" is not a canonical <server>.<tool> name, so no rule can match it)`},
	}
	for _, tt := range tests {
		if got := p.Decide(tt.agent, tt.tool).Message(); got != tt.want {
			t.Errorf("Message:\n got %s\nwant %s", got, tt.want)
		}
	}
	// A deny glob and no allow: revoke the glob, then allow the tool.
	p = mustCompile(t, Config{Agents: map[string]Rules{"ops": {Allow: []string{"doc-kg.*"}, Deny: []string{"code-kg.*"}}}})
	if got, want := p.Decide("ops", regen).Hint(), "nexus policy revoke --agent ops 'code-kg.*' && nexus policy allow --agent ops code-kg.kg_regenerate"; got != want {
		t.Errorf("Hint = %q, want %q", got, want)
	}
	// The built-in default names itself.
	got := mustCompile(t, Config{}).Decide("coder", regen).Message()
	if !strings.Contains(got, "denied by built-in default (no allow rule matches; default allows @readonly only)") {
		t.Errorf("Message = %s", got)
	}
}

// TestHintsGrant follows every hint with the editing functions and checks the tool is then
// allowed: a hint that does not work is worse than none.
func TestHintsGrant(t *testing.T) {
	cfgs := []Config{
		{},
		{Default: &Rules{Allow: []string{"*"}, Deny: []string{"code-kg.*"}}},
		{Agents: map[string]Rules{"a": {Allow: []string{"doc-kg.*"}, Deny: []string{"*", "@readonly", "code-kg.*", "code-kg.kg_latest_graph", "code-kg.kg_regenerate"}}}},
	}
	for i, cfg := range cfgs {
		for _, tool := range catalog {
			d := mustCompile(t, cfg).Decide("a", tool)
			if d.Allowed {
				continue
			}
			c := cfg
			for cmd := range strings.SplitSeq(d.Hint(), " && ") {
				f := strings.Fields(cmd) // nexus policy VERB --agent A ENTRY
				edit := map[string]func(Config, string, string) (Config, error){"allow": Allow, "revoke": Revoke}[f[2]]
				var err error
				if c, err = edit(c, f[4], strings.Trim(f[5], "'")); err != nil {
					t.Fatalf("cfg %d %s: %s: %v", i, tool.Name, cmd, err)
				}
			}
			if d2 := mustCompile(t, c).Decide("a", tool); !d2.Allowed {
				t.Errorf("cfg %d: after %q: %s", i, d.Hint(), d2.Message())
			}
		}
	}
}

func TestFilterExplain(t *testing.T) {
	p := mustCompile(t, coderOnly)
	names := func(ts []Tool) (s []string) {
		for _, t := range ts {
			s = append(s, t.Name)
		}
		return s
	}
	if got, want := strings.Join(names(p.Filter("", catalog)), " "), "code-kg.kg_latest_graph doc-kg.doc_kg_search fs.read.file"; got != want {
		t.Errorf("Filter(anonymous) = %s, want %s", got, want)
	}
	if got, want := strings.Join(names(p.Filter("coder", catalog)), " "), "code-kg.kg_latest_graph code-kg.kg_regenerate doc-kg.doc_kg_search fs.read.file"; got != want {
		t.Errorf("Filter(coder) = %s, want %s", got, want)
	}
	ds := p.Explain("coder", catalog)
	if len(ds) != len(catalog) {
		t.Fatalf("Explain returned %d decisions", len(ds))
	}
	for i, d := range ds {
		if d != p.Decide("coder", catalog[i]) {
			t.Errorf("Explain[%d] = %+v, Decide says otherwise", i, d)
		}
	}
}

func TestDecideAllocs(t *testing.T) {
	p := mustCompile(t, coderOnly)
	for _, tool := range catalog {
		if n := testing.AllocsPerRun(100, func() { p.Decide("coder", tool) }); n != 0 {
			t.Errorf("Decide(%s) allocates %v times", tool.Name, n)
		}
	}
}
