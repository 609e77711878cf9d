package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestHelpOnEveryCommand: --help on every command, parents included, prints
// its usage on stdout and succeeds, in process (tests/cli_test.go runs the
// binary's --help once, for the exit code). The commands the README's
// reader meets are named, so that one dropped or renamed fails here.
func TestHelpOnEveryCommand(t *testing.T) {
	t.Setenv("NEXUS_HOME", t.TempDir())
	t.Setenv("NEXUS_CONFIG", "")
	var paths [][]string
	var walk func(path []string, cmds []*cli.Command)
	walk = func(path []string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Name == "help" {
				continue
			}
			p := append(slices.Clone(path), c.Name)
			paths = append(paths, p)
			walk(p, c.Subcommands)
		}
	}
	walk(nil, newApp(nil, nil, nil).Commands)
	named := [][]string{
		{"serve"}, {"console"}, {"add"}, {"remove"}, {"list-servers"}, {"list-tools"}, {"call"}, {"version"},
		{"policy"}, {"policy", "show"}, {"policy", "explain"}, {"policy", "check"}, {"policy", "allow"}, {"policy", "deny"}, {"policy", "revoke"},
		{"agent", "add"}, {"agent", "list"}, {"agent", "rotate"}, {"agent", "remove"}, {"cache", "stats"}, {"cache", "list"}, {"cache", "clear"}, {"audit"}, {"demo"}, {"sample-server"},
		{"secrets", "set"}, {"secrets", "list"}, {"secrets", "rm"}, {"config", "show"}, {"config", "validate"},
		{"catalog", "list"}, {"catalog", "show"}, {"setup"}, {"import"}, {"doctor"},
		{"tools", "diff"}, {"tools", "approve"}, {"tools", "pins"},
	}
	for _, n := range named {
		if !slices.ContainsFunc(paths, func(p []string) bool { return slices.Equal(p, n) }) {
			t.Errorf("no command nexus %s", strings.Join(n, " "))
		}
	}
	for _, p := range paths {
		var out, stderr strings.Builder
		err := runCLI(context.Background(), append(append([]string{"nexus"}, p...), "--help"), strings.NewReader(""), &out, &stderr)
		if err != nil || !strings.Contains(out.String(), "USAGE") {
			t.Errorf("nexus %s --help: %v\n%s%s", strings.Join(p, " "), err, out.String(), stderr.String())
		}
	}
	if len(paths) < len(named) {
		t.Fatalf("only %d commands found", len(paths))
	}
}
