package tests

import (
	"bufio"
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	// conformanceNextScript is the suite's 0.2.0-alpha.12, whose client mode
	// scores OAuth (tests/package.json names it conformance-next).
	conformanceNextScript = "node_modules/conformance-next/dist/index.js"
	// authPassing lists the auth scenarios known to pass: the set must not shrink.
	authPassing = "conformance/auth-passing.txt"
)

// authRuns are the suite runs that together hold every auth/* scenario of the
// specification revisions Nexus speaks: the auth suite at 2025-11-25 and at
// 2026-07-28, the draft suite's auth scenarios (2026-07-28 only), and the two
// back-compatibility scenarios of 2025-03-26.
var authRuns = []struct{ spec, suite, scenario string }{
	{"2025-11-25", "auth", ""},
	{"2026-07-28", "auth", ""},
	{"2026-07-28", "draft", ""},
	{"2025-03-26", "", "auth/2025-03-26-oauth-metadata-backcompat"},
	{"2025-03-26", "", "auth/2025-03-26-oauth-endpoint-fallback"},
}

// TestConformanceAuth runs the client side of the official conformance suite's
// auth scenarios against tests/authclient, a client that authorizes with Nexus's
// oauth package as the gateway does. Every scenario listed in
// conformance/auth-passing.txt must pass; one that passes and is not listed is
// logged, so that it gets added.
func TestConformanceAuth(t *testing.T) {
	// Not parallel: the suite's timing fails on a loaded machine.
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("node is not installed, so the MCP conformance suite cannot run: %v", err)
	}
	if _, err := os.Stat(conformanceNextScript); err != nil {
		t.Fatalf("the MCP conformance suite 0.2.0-alpha.12 is not installed (%v): run `npm ci` in tests/", err)
	}
	client, err := authClientBin.build()
	if err != nil {
		t.Fatalf("building the auth client: %v", err)
	}

	results := map[string]scenarioResult{} // by "SPEC SCENARIO"
	for _, r := range authRuns {
		for name, res := range runClientConformance(t, node, client, r.spec, r.suite, r.scenario) {
			if strings.HasPrefix(name, "auth/") {
				results[r.spec+" "+name] = res
			}
		}
	}
	want, err := readLines(authPassing)
	if err != nil {
		t.Fatal(err)
	}
	var table []string
	for _, k := range slices.Sorted(maps.Keys(results)) {
		mark := "pass"
		if !results[k].passed {
			mark = "FAIL: " + results[k].summary()
		}
		table = append(table, k+": "+mark)
	}
	t.Log("auth scenarios:\n" + strings.Join(table, "\n"))
	for _, k := range want {
		r, ok := results[k]
		switch {
		case !ok:
			t.Errorf("%s: the suite did not run it", k)
		case !r.passed:
			t.Errorf("%s passed before and fails now: %s", k, r.summary())
		}
	}
	for _, k := range slices.Sorted(maps.Keys(results)) {
		if results[k].passed && !slices.Contains(want, k) {
			t.Logf("%s passes and is not in %s: add it", k, authPassing)
		}
	}
}

// runClientConformance runs the suite's client mode with the command client and
// returns the results by scenario name ("auth/metadata-default").
func runClientConformance(t *testing.T, node, client, spec, suite, scenario string) map[string]scenarioResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), suiteTimeout)
	defer cancel()
	out := t.TempDir()
	args := []string{"--import", conformanceHook, conformanceNextScript, "client", "--command", client, "--spec-version", spec, "-o", out}
	if suite != "" {
		args = append(args, "--suite", suite)
	} else {
		args = append(args, "--scenario", scenario)
	}
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.WaitDelay = 5 * time.Second
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	runErr := cmd.Run() // exits 1 when any scenario fails; checks.json says which
	if ctx.Err() != nil {
		t.Fatalf("the conformance suite (%s %s%s) did not finish within %s:\n%s", spec, suite, scenario, suiteTimeout, logs.String())
	}
	results, err := readConformanceResults(out, clientResultDir)
	if err != nil || len(results) == 0 {
		t.Fatalf("reading the results of the suite (%s %s%s): %v (exit: %v)\n%s", spec, suite, scenario, err, runErr, logs.String())
	}
	return results
}

// clientResultDir matches what the client mode writes under its output
// directory: [auth/]<scenario>-<timestamp>.
var clientResultDir = regexp.MustCompile(`^(.+)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d+Z$`)

// readLines reads a list file: one entry a line, # comments and blank lines skipped.
func readLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out, sc.Err()
}
