package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// inProcessEnv points NEXUS_HOME and HOME at home for the rest of t and clears the
// variables of the test's own environment that a command reads, so a command run
// with runIn sees what a child started with only NEXUS_HOME, HOME and PATH would
// (as tests/ starts the binary). The keychain's variables are kept, as there.
// t.Setenv: the test and its subtests cannot be parallel.
func inProcessEnv(t *testing.T, home string) {
	t.Helper()
	t.Setenv("NEXUS_HOME", home)
	t.Setenv("HOME", home)
	for _, k := range []string{"NEXUS_CONFIG", "NEXUS_AGENT", "NEXUS_STATE_KEY", "NEXUS_MAX_NAME_LENGTH", "NEXUS_CPUPROFILE", "XDG_CONFIG_HOME"} {
		t.Setenv(k, "") // restored when t ends
		os.Unsetenv(k)
	}
}

// runIn runs one nexus command in process as main would: stdin is its input,
// and it returns what it printed, main's "nexus: ..." error line included, and
// the exit code main would pick.
func runIn(stdin string, args ...string) (stdout, stderr string, code int) {
	var out, errb strings.Builder
	err := runCLI(context.Background(), append([]string{"nexus"}, args...), strings.NewReader(stdin), &out, &errb)
	if err != nil {
		code = 1
		var exit cli.ExitCoder
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		}
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(&errb, "nexus:", msg)
		}
	}
	return out.String(), errb.String(), code
}
