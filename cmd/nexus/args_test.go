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
		{"nexus setup claude-desktop --move-all --insecure-file-store", "nexus --insecure-file-store setup --move-all -- claude-desktop"},
		{"nexus list-tools --json --config team.json --log-level debug", "nexus --config team.json --log-level debug list-tools --json"},
		{"nexus add gh --config team.json --project --command x", "nexus --project add --config team.json --command x -- gh"},
		{"nexus policy --project show --agent a", "nexus --project policy show --agent a"},
		{"nexus add gh --command npx -- --project", "nexus add --command npx -- gh --project"},
		{"nexus", "nexus"},
	}
	for _, tc := range tests {
		got := strings.Join(interspersed(app, strings.Fields(tc.in)), " ")
		if got != tc.want {
			t.Errorf("%s\n got  %s\n want %s", tc.in, got, tc.want)
		}
	}
}

func TestWithDashDash(t *testing.T) {
	tests := []struct{ typed, bad, want string }{
		{"nexus add files --command npx -y pkg /tmp", "-y", "nexus add files --command npx -- -y pkg /tmp"},
		{"/usr/bin/nexus add files --command npx --yes=1", "--yes", "nexus add files --command npx -- --yes=1"},
		{"nexus add files -- -y", "-z", "nexus add files -- -y"},
	}
	for _, tc := range tests {
		if got := withDashDash(strings.Fields(tc.typed), tc.bad); got != tc.want {
			t.Errorf("withDashDash(%q, %q) = %q, want %q", tc.typed, tc.bad, got, tc.want)
		}
	}
}
