package policy

import "testing"

// TestRevision: the same rules have the same revision, stamped on decisions;
// an edited rule changes it; where a rule was written does not.
func TestRevision(t *testing.T) {
	cfg := Config{Agents: map[string]Rules{"coder": {Allow: []string{"fx.*"}}}}
	a, err := Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Sources = map[string]string{"policy.agents.coder": "/etc/x.json"}
	b, _ := Compile(cfg)
	c, _ := Compile(Config{Agents: map[string]Rules{"coder": {Allow: []string{"fx.*"}, Deny: []string{"fx.rm"}}}})
	if a.Revision() == "" || len(a.Revision()) != 12 || a.Revision() != b.Revision() || a.Revision() == c.Revision() {
		t.Fatalf("revisions %q %q %q", a.Revision(), b.Revision(), c.Revision())
	}
	if d := a.Decide("coder", Tool{Name: "fx.echo"}); d.Revision != a.Revision() {
		t.Errorf("a decision's revision %q, want %q", d.Revision, a.Revision())
	}
	if d := a.DecideItem("other", "fx", ""); d.Revision != a.Revision() {
		t.Errorf("an item decision's revision %q, want %q", d.Revision, a.Revision())
	}
}
