package skips

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestSummary(t *testing.T) {
	tests := []struct {
		name  string
		skips []Skip
		want  string
	}{
		{"none", nil, ""},
		{"grouped by need, subtests by their test", []Skip{
			{"PostgreSQL", "set NEXUS_TEST_PG_DSN", "TestReplica/a"},
			{"PostgreSQL", "set NEXUS_TEST_PG_DSN", "TestReplica/b"},
			{"Chromium", "apt-get install chromium", "TestStatusPage"},
			{"PostgreSQL", "set NEXUS_TEST_PG_DSN", "TestAudit"},
		}, "tests: SKIPPED for a missing prerequisite: Chromium (apt-get install chromium): TestStatusPage; PostgreSQL (set NEXUS_TEST_PG_DSN): TestAudit, TestReplica"},
		{"many become a count", []Skip{
			{"keychain", "run under .ci/keyring-session", "TestA"}, {"keychain", "run under .ci/keyring-session", "TestB"},
			{"keychain", "run under .ci/keyring-session", "TestC"}, {"keychain", "run under .ci/keyring-session", "TestD"},
		}, "tests: SKIPPED for a missing prerequisite: keychain (run under .ci/keyring-session): 4 tests"},
	}
	for _, tc := range tests {
		if got := Summary("tests", tc.skips); got != tc.want {
			t.Errorf("%s:\n got  %s\n want %s", tc.name, got, tc.want)
		}
	}
}

// TestSummarySurvivesRedirection runs go test on a package that skips for a
// missing prerequisite with its output redirected to a file, as a person keeping
// a log would: the file ends with the summary line, after go's own lines (go
// writes over a line appended while it runs; the line is appended once it exits).
func TestSummarySurvivesRedirection(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the summary reaches the go command's outputs on Linux only")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	const want = "skipper: SKIPPED for a missing prerequisite: something (install it): TestNeedsSomething"
	for name, redirect := range map[string]string{"both": "> '%s' 2>&1", "stdout": "> '%s' 2>/dev/null"} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "test.log")
			cmd := exec.Command("sh", "-c", goCmd+" test -count=1 ./testdata/skipper "+fmt.Sprintf(redirect, out))
			if msg, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go test: %v %s", err, msg)
			}
			var text string
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				b, _ := os.ReadFile(out)
				if text = string(b); strings.Contains(text, want) {
					break
				}
			}
			lines := strings.Split(strings.TrimSpace(text), "\n")
			if len(lines) < 2 || lines[len(lines)-1] != want || !strings.HasPrefix(lines[len(lines)-2], "ok") {
				t.Errorf("the log does not end with go's ok line, then the summary:\n%s", text)
			}
		})
	}
}
