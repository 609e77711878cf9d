package policy

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	cfg := Config{
		Default: &Rules{Allow: []string{"@readonly", "doc-kg.doc_kg_search", "doc-kg.doc_kg_serch"}},
		Agents: map[string]Rules{
			"coder": {Allow: []string{"code-kg.kg_regenerat", "cod-kg.*", "later.tool", "code-kg.kg_regenerate_submit"}, Deny: []string{"code-kg.kg_regenerate_submit"}},
			"ok":    {Allow: []string{"*", "code-kg.*", "code-kg.kg_impact", "later.anything"}},
		},
	}
	known := map[string][]string{
		"code-kg": {"kg_latest_graph", "kg_impact", "kg_regenerate", "kg_regenerate_submit"},
		"doc-kg":  {"doc_kg_search"},
		"later":   nil, // connecting: tools not known yet
	}
	want := []string{
		`policy.default.allow[2] "doc-kg.doc_kg_serch": server "doc-kg" lists no tool "doc_kg_serch"; did you mean "doc-kg.doc_kg_search"?`,
		`policy.agents.coder.allow[0] "code-kg.kg_regenerat": server "code-kg" lists no tool "kg_regenerat"; did you mean "code-kg.kg_regenerate"?`,
		`policy.agents.coder.allow[1] "cod-kg.*": no server is named "cod-kg" (known: code-kg, doc-kg, later); fix the name or remove the entry`,
		`policy.agents.coder.allow[3] "code-kg.kg_regenerate_submit": also in deny[0], which wins: this entry has no effect; remove one of them`,
	}
	p := mustCompile(t, cfg)
	var got []string
	for _, pr := range p.Check(known) {
		got = append(got, pr.String())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Check:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := len(p.Check(nil)); n != 1 {
		t.Errorf("Check(nil) = %d problems, want only the allow/deny conflict", n)
	}
	if pr := mustCompile(t, Config{}).Check(map[string][]string{}); pr != nil {
		t.Errorf("built-in default: %v", pr)
	}
}
