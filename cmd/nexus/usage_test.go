package main

import "testing"

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
