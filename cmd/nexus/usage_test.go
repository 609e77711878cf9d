package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestArgCount: the one rule reads every ArgsUsage the commands use.
func TestArgCount(t *testing.T) {
	for _, tt := range []struct {
		usage    string
		min, max int
		needs    string
	}{
		{"", 0, 0, ""},
		{"NAME", 1, 1, "one NAME"},
		{"claude-desktop|claude-code|cursor|vscode|codex|FILE", 1, 1, "one of claude-desktop, claude-code, cursor, vscode, codex, FILE"},
		{"[NAME DURATION|off]", 0, 2, ""},
		{"ENTRY...", 1, -1, "one or more ENTRY"},
		{"NAME [-- ARGS...]", 1, -1, "one NAME"},
		{"FROM TO", 2, 2, "FROM TO"},
	} {
		min, max := argCount(tt.usage)
		if min != tt.min || max != tt.max {
			t.Errorf("argCount(%q) = %d, %d; want %d, %d", tt.usage, min, max, tt.min, tt.max)
		}
		if min > 0 {
			if got := needed(tt.usage, min); got != tt.needs {
				t.Errorf("needed(%q) = %q, want %q", tt.usage, got, tt.needs)
			}
		}
	}
}

// TestEveryCommandCountsArguments runs every leaf command in-process with one
// argument too many and, where it needs some, one too few: each is refused
// with exit code 2 before it does anything, by the one rule.
func TestEveryCommandCountsArguments(t *testing.T) {
	t.Setenv("NEXUS_HOME", t.TempDir())
	t.Setenv("NEXUS_CONFIG", "")
	var leaves [][]string
	var walk func(path []string, cmds []*cli.Command)
	walk = func(path []string, cmds []*cli.Command) {
		for _, c := range cmds {
			p := append(slices.Clone(path), c.Name)
			if len(c.Subcommands) > 0 {
				walk(p, c.Subcommands)
				continue
			}
			if !c.SkipFlagParsing {
				leaves = append(leaves, append(p, c.ArgsUsage))
			}
		}
	}
	walk(nil, newApp(nil, io.Discard, io.Discard).Commands)
	if len(leaves) < 20 {
		t.Fatalf("only %d commands found", len(leaves))
	}
	for _, leaf := range leaves {
		path, usage := leaf[:len(leaf)-1], leaf[len(leaf)-1]
		min, max := argCount(usage)
		try := func(n int, want string) {
			t.Helper()
			args := append([]string{"nexus"}, path...)
			for i := range n {
				args = append(args, fmt.Sprintf("a%d", i))
			}
			var stderr strings.Builder
			err := runCLI(context.Background(), args, strings.NewReader(""), io.Discard, &stderr)
			var exit cli.ExitCoder
			if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v (%T), want exit code 2 saying %q", strings.Join(args, " "), err, err, want)
			}
		}
		if max >= 0 {
			try(max+1, "takes")
		}
		if min > 0 {
			try(min-1, "needs")
		}
	}
}
