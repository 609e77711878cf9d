package main

import (
	"strings"
	"testing"
)

func TestInterspersed(t *testing.T) {
	app := newApp(nil, nil, nil)
	tests := []struct{ in, want string }{
		{"nexus add gh --transport stdio --command npx -- -y pkg", "nexus add --transport stdio --command npx -- gh -y pkg"},
		{"nexus add --transport stdio gh --command npx", "nexus add --transport stdio --command npx -- gh"},
		{"nexus --config team.json add gh --env A=1 --env B=2", "nexus --config team.json add --env A=1 --env B=2 -- gh"},
		{"nexus call code-kg.x --args {}", "nexus call --args {} -- code-kg.x"},
		{"nexus policy explain code-kg.x --agent coder", "nexus policy explain --agent coder -- code-kg.x"},
		{"nexus list-tools --json", "nexus list-tools --json"},
		{"nexus list-tools --json --agent a", "nexus list-tools --json --agent a"},
		{"nexus serve", "nexus serve"},
		{"nexus", "nexus"},
	}
	for _, tc := range tests {
		got := strings.Join(interspersed(app, strings.Fields(tc.in)), " ")
		if got != tc.want {
			t.Errorf("%s\n got  %s\n want %s", tc.in, got, tc.want)
		}
	}
}
