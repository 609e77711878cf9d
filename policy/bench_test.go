package policy

import (
	"fmt"
	"testing"
)

// benchPolicy has 300 exact names and 50 server globs spread over 10 agents and the default.
func benchPolicy(b *testing.B) (*Policy, []Tool) {
	cfg := Config{Default: &Rules{Allow: []string{"@readonly"}}, Agents: map[string]Rules{}}
	for a := range 10 {
		var r Rules
		for i := range 30 {
			r.Allow = append(r.Allow, fmt.Sprintf("srv-%d.tool_%d", (a+i)%40, i))
		}
		for i := range 5 {
			r.Deny = append(r.Deny, fmt.Sprintf("srv-%d.*", 40+a*5+i))
		}
		cfg.Agents[fmt.Sprintf("agent-%d", a)] = r
	}
	tools := make([]Tool, 1000)
	for i := range tools {
		tools[i] = Tool{Name: fmt.Sprintf("srv-%d.tool_%d", i%100, i%30), ReadOnly: i%3 == 0}
	}
	return mustCompile(b, cfg), tools
}

func BenchmarkDecide(b *testing.B) {
	p, tools := benchPolicy(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p.Decide("agent-3", tools[i%len(tools)])
		i++
	}
}

func BenchmarkFilter1000(b *testing.B) {
	p, tools := benchPolicy(b)
	b.ReportAllocs()
	for b.Loop() {
		p.Filter("agent-3", tools)
	}
}
