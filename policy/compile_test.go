package policy

import (
	"errors"
	"strings"
	"testing"
)

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		cfg   Config
		where string
		hint  string // part of the message saying what to write instead
	}{
		{Config{Default: &Rules{Allow: []string{""}}}, "policy.default.allow[0]", `write a tool name such as "code-kg.kg_latest_graph"`},
		{Config{Default: &Rules{Deny: []string{"a.b", "c.d", "a.b"}}}, "policy.default.deny[2]", "duplicate of deny[0]"},
		{agent("coder", "@readonly", "doc-kg.*", "code-*.x"), "policy.agents.coder.allow[2]", `write "<server>.*" for each server, or "*"`},
		{agent("coder", "a*"), "policy.agents.coder.allow[0]", `write "a.*"`},
		{agent("coder", "code-kg.kg_*"), "policy.agents.coder.allow[0]", `write "code-kg.*" or list the tools by name`},
		{agent("coder", " code-kg.x"), "policy.agents.coder.allow[0]", `write "code-kg.x"`},
		{agent("coder", "Code-KG.x"), "policy.agents.coder.allow[0]", `write "code-kg.x"`},
		{agent("coder", "code-kg__kg_regenerate"), "policy.agents.coder.allow[0]", `write "code-kg.kg_regenerate"`},
		{agent("coder", "kg_regenerate"), "policy.agents.coder.allow[0]", `"code-kg.kg_regenerate"`},
		{agent("coder", "@write"), "policy.agents.coder.allow[0]", `the only group is "@readonly"`},
		{agent("coder", "code-kg.kg\tregenerate"), "policy.agents.coder.allow[0]", `no control characters`},
		{agent("coder", "code_kg.x"), "policy.agents.coder.allow[0]", `^[a-z0-9][a-z0-9-]{0,31}$`},
		{agent("Coder", "*"), "policy.agents.Coder", `write "coder"`},
		{agent("my agent", "*"), "policy.agents.my agent", `write "my-agent"`},
		{agent("", "*"), "policy.agents.", `agent names match`},
	}
	for _, tt := range tests {
		p, err := Compile(tt.cfg)
		var perr *Error
		if p != nil || !errors.As(err, &perr) || len(perr.Problems) != 1 {
			t.Errorf("Compile(%+v) = %v, %v; want one problem", tt.cfg, p, err)
			continue
		}
		if pr := perr.Problems[0]; pr.Where != tt.where || !strings.Contains(pr.Message, tt.hint) {
			t.Errorf("problem = %s\nwant at %s, saying %s", pr, tt.where, tt.hint)
		}
	}
}

func TestCompileReportsAll(t *testing.T) {
	_, err := Compile(Config{Default: &Rules{Allow: []string{""}}, Agents: map[string]Rules{"b": {Deny: []string{"x"}}, "A": {}}})
	var perr *Error
	if !errors.As(err, &perr) || len(perr.Problems) != 3 {
		t.Fatalf("err = %v, want 3 problems", err)
	}
	if !strings.HasPrefix(err.Error(), `invalid policy: policy.default.allow[0] "": empty entry`) {
		t.Errorf("Error() = %s", err)
	}
}

func TestCompileValid(t *testing.T) {
	cfg := Config{
		Default: &Rules{Allow: []string{"@readonly", "*"}, Deny: []string{"@readonly"}},
		Agents: map[string]Rules{
			"anonymous": {},
			"a":         {Allow: []string{"x.y.z", "x.Y_z-1", "0.0", "a-b.*"}},
			"coder-2":   {Allow: []string{"code-kg.kg_regenerate"}, Deny: []string{"code-kg.kg_regenerate"}},
		},
	}
	if _, err := Compile(cfg); err != nil {
		t.Fatal(err)
	}
}

func agent(name string, allow ...string) Config {
	return Config{Agents: map[string]Rules{name: {Allow: allow}}}
}
