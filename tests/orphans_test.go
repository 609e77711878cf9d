//go:build unix

package tests

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKilledGatewayLeavesNoChildren: a gateway killed with SIGKILL cannot end its
// children. Its stdio child exits when its stdin closes, but what the child
// started (here a sleep, as npx starts node) would run on. The next gateway
// started with the same home ends it.
func TestKilledGatewayLeavesNoChildren(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "grandchild")
	// The wrapper starts a grandchild that ignores its stdin, then runs the sample
	// server in its own place, as launchers do.
	wrapper := `sleep 600 & echo $! > ` + pidFile + `; exec "$0" "$@"`
	h := newHome(t, map[string]any{
		"servers": map[string]any{"wrapped": map[string]any{"command": "sh", "args": []string{"-c", wrapper, built.sample, "code-kg"}}},
		"policy":  map[string]any{"default": map[string]any{"allow": []string{"*"}}},
	})
	s := h.serveStdioReady([]string{"wrapped"})
	var grandchild int
	eventually(t, 10*time.Second, "the grandchild's pid", func() bool {
		b, err := os.ReadFile(pidFile)
		grandchild, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && grandchild > 0
	})
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = s.cmd.Wait()
	time.Sleep(200 * time.Millisecond) // the child sees its stdin close and exits
	if !running(grandchild) {
		t.Fatalf("the grandchild %d ended with the killed gateway: nothing left to test", grandchild)
	}

	// Any command that starts a gateway with this home ends what the killed one left.
	out, stderr, _ := h.nexus("call", "wrapped.list_symbols", "--args", `{}`)
	eventually(t, 10*time.Second, "the killed gateway's grandchild ends", func() bool { return !running(grandchild) })
	if !strings.Contains(stderr, "ended the children of a gateway that was killed") {
		t.Errorf("the next gateway did not say it ended the killed one's children:\n%s%s", out, stderr)
	}
}

// running reports whether process pid exists and has not exited (a zombie
// waiting for its parent, init for an orphan, to reap it has).
func running(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || !strings.HasPrefix(strings.TrimSpace(string(b[i+1:])), "Z")
}
