//go:build unix

package tests

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCtrlCForgetsNothing: Ctrl-C in a terminal interrupts the whole process
// group, so the gateway and its children stop at once. The children's exit is a
// clean shutdown, not a crash: what memory holds stays fresh for the next run.
func TestCtrlCForgetsNothing(t *testing.T) {
	h := memoryHome(t, nil)
	if out, stderr, code := h.nexus("call", "fx.lookup", "--args", `{"env":"kept"}`); code != 0 || !strings.Contains(out, `"miss"`) {
		t.Fatalf("first call: %d %s %s", code, out, stderr)
	}
	for i := range 3 {
		cmd := exec.Command(built.nexus, "serve")
		cmd.Env = h.env()
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		stdin, err := cmd.StdinPipe() // held open: the gateway serves until interrupted
		if err != nil {
			t.Fatal(err)
		}
		stderr := &lockedBuffer{}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(stderr.String(), "child connected") {
			if time.Now().After(deadline) {
				t.Fatalf("the child never connected:\n%s", stderr)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		stdin.Close()
		if strings.Contains(stderr.String(), "remembered answers") {
			t.Errorf("run %d: the interrupt was taken for a crash:\n%s", i, stderr)
		}
		out, errOut, code := h.nexus("call", "fx.lookup", "--args", `{"env":"kept"}`)
		if code != 0 || !strings.Contains(out, `"status": "hit"`) {
			t.Fatalf("run %d: after Ctrl-C, the answer is gone: %d %s %s\nserve's log:\n%s", i, code, out, errOut, stderr)
		}
	}
}
