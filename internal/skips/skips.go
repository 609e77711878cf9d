// Package skips records the tests skipped because a prerequisite is missing (a
// keychain session, PostgreSQL, Chromium, node packages) and prints them as one
// line when a package's tests end: `go test ./...` shows only "ok" for a package
// that passes, so a run that skipped half of what it was meant to check would
// otherwise look like one that checked everything.
//
// A test calls Need instead of t.Skip; the package's TestMain calls Main. The
// record is a file named by an environment variable, not a variable of this
// package: tests run in parallel and in helper packages (pgtest) that have no
// handle to pass around.
package skips

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// EnvFile names the file Main records this test binary's skips in.
const EnvFile = "NEXUS_TEST_SKIP_LOG"

// Need skips t, recording that it needs what (say "PostgreSQL"), which how
// provides ("set NEXUS_TEST_PG_DSN"); why is the skip message.
func Need(t testing.TB, what, how, why string) {
	t.Helper()
	record(t.Name(), what, how)
	t.Skip(why)
}

// record appends one line to the file Main created; without Main it does nothing.
func record(test, what, how string) {
	path := os.Getenv(EnvFile)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return
	}
	defer f.Close()
	clean := func(s string) string { return strings.NewReplacer("\t", " ", "\n", " ").Replace(s) }
	// One write of one short line: O_APPEND keeps parallel tests' lines whole.
	_, _ = io.WriteString(f, clean(what)+"\t"+clean(how)+"\t"+clean(test)+"\n")
}

// Main runs the tests and then prints the summary of their skips, and returns
// the exit code for os.Exit.
func Main(m *testing.M) int {
	f, err := os.CreateTemp("", "nexus-skips-")
	if err != nil {
		return m.Run()
	}
	f.Close()
	defer os.Remove(f.Name())
	os.Setenv(EnvFile, f.Name())
	code := m.Run()
	if line := Summary(pkgName(), read(f.Name())); line != "" {
		report(line)
	}
	return code
}

// Skip is one recorded skip.
type Skip struct{ What, How, Test string }

func read(path string) []Skip {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []Skip
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.SplitN(sc.Text(), "\t", 3)
		if len(p) == 3 {
			out = append(out, Skip{p[0], p[1], p[2]})
		}
	}
	return out
}

// Summary is the one line that names what was skipped for which prerequisite,
// and what provides it; "" when nothing was.
func Summary(pkg string, skips []Skip) string {
	if len(skips) == 0 {
		return ""
	}
	type need struct{ what, how string }
	tests := map[need][]string{}
	var order []need
	for _, s := range skips {
		n := need{s.What, s.How}
		if _, ok := tests[n]; !ok {
			order = append(order, n)
		}
		top, _, _ := strings.Cut(s.Test, "/")
		if !slices.Contains(tests[n], top) {
			tests[n] = append(tests[n], top)
		}
	}
	slices.SortFunc(order, func(a, b need) int { return strings.Compare(a.what, b.what) })
	parts := make([]string, 0, len(order))
	for _, n := range order {
		names := tests[n]
		slices.Sort(names)
		list := strings.Join(names, ", ")
		if len(names) > 3 {
			list = fmt.Sprintf("%d tests", len(names))
		}
		parts = append(parts, fmt.Sprintf("%s (%s): %s", n.what, n.how, list))
	}
	return fmt.Sprintf("%s: SKIPPED for a missing prerequisite: %s", pkg, strings.Join(parts, "; "))
}

// pkgName names the package under test for the summary: the test binary is
// <package>.test.
func pkgName() string {
	return strings.TrimSuffix(filepath.Base(os.Args[0]), ".test")
}

// report prints the line on stderr, where `go test -v` and a failing run show it,
// and on Linux also on the stderr of the go command that started this binary:
// `go test ./...` discards a passing package's output, and this line is meant for
// exactly that run.
func report(line string) {
	fmt.Fprintln(os.Stderr, line)
	if runtime.GOOS != "linux" {
		return
	}
	parent := os.Getppid()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", parent))
	if err != nil || strings.TrimSuffix(filepath.Base(exe), ".exe") != "go" {
		return // not started by go test (a debugger, -exec): stderr above is seen
	}
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/2", parent), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}
