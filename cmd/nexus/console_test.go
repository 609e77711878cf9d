package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestConsoleRefusals: nexus console listens on loopback only (a usage error,
// exit code 2, before it looks for a gateway), and with no gateway running it
// says so and how to start one; --list says the same without failing.
func TestConsoleRefusals(t *testing.T) {
	t.Setenv("NEXUS_HOME", t.TempDir())
	t.Setenv("NEXUS_CONFIG", "")
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--addr", "0.0.0.0:0"}, 2, "loopback only"},
		{[]string{"--addr", "8765"}, 2, "loopback only"},
		{nil, 1, "no gateway is running"},
		{[]string{"--pid", "12345"}, 1, "nexus serve"},
	} {
		var out, stderr strings.Builder
		err := runCLI(context.Background(), append([]string{"nexus", "console"}, tt.args...), strings.NewReader(""), &out, &stderr)
		var exit cli.ExitCoder
		code := 0
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			code = 1
		}
		if code != tt.code || err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("nexus console %v: exit %d, %v; want %d saying %q", tt.args, code, err, tt.code, tt.want)
		}
	}
	var out, stderr strings.Builder
	if err := runCLI(context.Background(), []string{"nexus", "console", "--list", "--json"}, strings.NewReader(""), &out, &stderr); err != nil || strings.TrimSpace(out.String()) != "[]" {
		t.Errorf("nexus console --list --json with no gateway: %v %q", err, out.String())
	}
}
