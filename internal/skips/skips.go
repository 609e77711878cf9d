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
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
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
	if afterExit() {
		return 0
	}
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
// and on Linux also where the go command that started this binary writes: `go
// test ./...` discards a passing package's output, and this line is meant for
// exactly that run (see goOutputs).
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
	for _, out := range goOutputs(parent) {
		if out.overwritten {
			appendAfterExit(parent, out.path, line)
			continue
		}
		appendLine(out.path, line)
	}
}

// output is one of the go command's outputs the line goes to.
type output struct {
	path string // /proc/PID/fd/N, or the file it names
	// overwritten: a regular file the go command writes at its own offset (opened
	// by the shell's > without O_APPEND): a line appended now would be written over
	// by go's next lines, so it is appended once go has exited.
	overwritten bool
}

// goOutputs are where the go command (pid) writes that a person reads: its
// stderr, and its stdout too when that is a file other than its stderr (`go test
// ./... > test.log` keeps the line in test.log as well as on the terminal).
func goOutputs(pid int) []output {
	var outs []output
	var seen []os.FileInfo
	for _, fd := range []int{2, 1} {
		link := fmt.Sprintf("/proc/%d/fd/%d", pid, fd)
		st, err := os.Stat(link)
		if err != nil {
			continue
		}
		if fd == 1 && !st.Mode().IsRegular() {
			continue // a terminal or a pipe shows stderr's line already
		}
		if slices.ContainsFunc(seen, func(o os.FileInfo) bool { return os.SameFile(o, st) }) {
			continue
		}
		seen = append(seen, st)
		out := output{path: link}
		if st.Mode().IsRegular() && !appendMode(pid, fd) {
			if target, err := os.Readlink(link); err == nil {
				out = output{path: target, overwritten: true}
			}
		}
		outs = append(outs, out)
	}
	return outs
}

// appendMode reports whether the go command's fd was opened with O_APPEND (the
// shell's >>, a terminal), from /proc/PID/fdinfo/FD's octal flags.
func appendMode(pid, fd int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%d", pid, fd))
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "flags:"); ok {
			flags, err := strconv.ParseInt(strings.TrimSpace(v), 8, 64)
			return err == nil && flags&oAppend != 0
		}
	}
	return false
}

// oAppend is Linux's O_APPEND (the package builds everywhere; this is read only
// on Linux).
const oAppend = 0o2000

func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}

// Environment of the process that appends the line once the go command exits.
const (
	envAfterPID  = "NEXUS_TEST_SKIP_AFTER_PID"
	envAfterFile = "NEXUS_TEST_SKIP_AFTER_FILE"
	envAfterLine = "NEXUS_TEST_SKIP_AFTER_LINE"
)

// appendAfterExit starts this binary again, detached and holding none of the go
// command's pipes (go would wait for them), to append line to path once the go
// command pid has exited: the file then ends with one line per package that
// skipped something, after go's own.
func appendAfterExit(pid int, path, line string) {
	self, err := os.Executable()
	if err != nil {
		return
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), envAfterPID+"="+strconv.Itoa(pid), envAfterFile+"="+path, envAfterLine+"="+line)
	detach(cmd)
	if cmd.Start() == nil {
		_ = cmd.Process.Release()
	}
}

// afterExit is the detached process of appendAfterExit: it waits (at most a
// day) for the go command to exit, then appends the line. It reports whether
// this process is one.
func afterExit() bool {
	pid, err := strconv.Atoi(os.Getenv(envAfterPID))
	if err != nil {
		return false
	}
	for deadline := time.Now().Add(24 * time.Hour); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			break
		}
	}
	appendLine(os.Getenv(envAfterFile), os.Getenv(envAfterLine))
	return true
}
