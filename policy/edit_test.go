package policy

import (
	"errors"
	"reflect"
	"testing"
)

func TestEdit(t *testing.T) {
	base := Config{
		Default: &Rules{Allow: []string{"@readonly"}, Deny: []string{"code-kg.kg_regenerate_submit"}},
		Agents:  map[string]Rules{"qa": {Allow: []string{"doc-kg.*"}, Deny: []string{"code-kg.*"}}},
		Sources: map[string]string{"policy.default": "/etc/nexus.json"},
	}
	type edit func(Config, string, string) (Config, error)
	tests := []struct {
		name  string
		op    edit
		agent string
		entry string
		want  Rules
	}{
		{"allow starts from default", Allow, "coder", "code-kg.kg_regenerate",
			Rules{Allow: []string{"@readonly", "code-kg.kg_regenerate"}, Deny: []string{"code-kg.kg_regenerate_submit"}}},
		{"allow removes deny", Allow, "coder", "code-kg.kg_regenerate_submit",
			Rules{Allow: []string{"@readonly", "code-kg.kg_regenerate_submit"}, Deny: []string{}}},
		{"allow is idempotent", Allow, "qa", "doc-kg.*", Rules{Allow: []string{"doc-kg.*"}, Deny: []string{"code-kg.*"}}},
		{"deny removes allow", Deny, "qa", "doc-kg.*", Rules{Allow: []string{}, Deny: []string{"code-kg.*", "doc-kg.*"}}},
		{"revoke removes deny", Revoke, "qa", "code-kg.*", Rules{Allow: []string{"doc-kg.*"}, Deny: []string{}}},
		{"revoke from default copy", Revoke, "coder", "@readonly", Rules{Allow: []string{}, Deny: []string{"code-kg.kg_regenerate_submit"}}},
	}
	for _, tt := range tests {
		before := clone(base)
		got, err := tt.op(base, tt.agent, tt.entry)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !reflect.DeepEqual(got.Agents[tt.agent], tt.want) {
			t.Errorf("%s: agents.%s = %+v, want %+v", tt.name, tt.agent, got.Agents[tt.agent], tt.want)
		}
		if !reflect.DeepEqual(base, before) {
			t.Errorf("%s: input mutated: %+v", tt.name, base)
		}
		if _, err := Compile(got); err != nil {
			t.Errorf("%s: result does not compile: %v", tt.name, err)
		}
	}

	// Granting one write tool to an agent without a policy keeps its read-only access.
	cfg, _ := Allow(Config{}, "coder", "code-kg.kg_regenerate")
	p := mustCompile(t, cfg)
	if !p.Decide("coder", regen).Allowed || !p.Decide("coder", latest).Allowed || p.Decide("other", regen).Allowed {
		t.Errorf("Allow on empty config: %+v", cfg)
	}
	// Revoking takes the right away at the next decision.
	cfg, _ = Revoke(cfg, "coder", "code-kg.kg_regenerate")
	if mustCompile(t, cfg).Decide("coder", regen).Allowed {
		t.Errorf("still allowed after Revoke: %+v", cfg)
	}
	cfg, _ = Reset(cfg, "coder")
	if _, ok := cfg.Agents["coder"]; ok {
		t.Errorf("Reset kept the override: %+v", cfg)
	}
}

func TestEditErrors(t *testing.T) {
	var perr *Error
	if _, err := Allow(Config{}, "coder", "code-*.x"); !errors.As(err, &perr) || perr.Problems[0].Entry != "code-*.x" {
		t.Errorf("Allow bad entry: %v", err)
	}
	if _, err := Deny(Config{}, "Coder", "*"); !errors.As(err, &perr) {
		t.Errorf("Deny bad agent: %v", err)
	}
	if _, err := Revoke(Config{}, "coder", "code-kg.kg_regenerate"); err == nil {
		t.Error("Revoke of an absent entry succeeded")
	}
	if _, err := Reset(Config{}, "a b"); err == nil {
		t.Error("Reset of an invalid agent succeeded")
	}
}
