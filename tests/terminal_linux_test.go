package tests

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair: what the program under test gets as its
// terminal, and the side the test reads.
func openPTY(t *testing.T) (control, term *os.File) {
	t.Helper()
	control, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here (%v): the terminal-only output is not tested", err)
	}
	fd := int(control.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		control.Close()
		t.Fatalf("unlocking the pty: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		control.Close()
		t.Fatalf("naming the pty: %v", err)
	}
	term, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		control.Close()
		t.Fatalf("opening the pty: %v", err)
	}
	t.Cleanup(func() { control.Close(); term.Close() })
	return control, term
}

// onTerminal runs nexus with the streams named in which ("stdin", "stdout",
// "stderr") on a terminal and the others on pipes, until it exits or, when until
// is not nil, until holds for what the terminal showed so far (then it gets
// SIGINT). It returns what the terminal showed and the other output.
func (h *home) onTerminal(which string, until func(shown string) bool, args ...string) (terminal, other string, code int) {
	h.t.Helper()
	control, term := openPTY(h.t)
	cmd := exec.Command(built.nexus, args...)
	cmd.Env = h.env()
	var rest bytes.Buffer
	cmd.Stdout, cmd.Stderr = &rest, &rest
	if strings.Contains(which, "stdin") {
		cmd.Stdin = term
	}
	if strings.Contains(which, "stdout") {
		cmd.Stdout = term
	}
	if strings.Contains(which, "stderr") {
		cmd.Stderr = term
	}
	var shown lockedBuffer
	var wg sync.WaitGroup
	wg.Go(func() { io.Copy(&shown, control) }) // ends with EIO once the terminal is closed
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	term.Close() // the child holds its own copy
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	timeout := time.After(60 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case err = <-exited:
			break wait
		case <-tick.C:
			if until != nil && until(shown.String()) {
				cmd.Process.Signal(syscall.SIGINT)
				err = <-exited
				break wait
			}
		case <-timeout:
			cmd.Process.Kill()
			h.t.Fatalf("nexus %v did not end", args)
		}
	}
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	wg.Wait()
	return strings.ReplaceAll(shown.String(), "\r\n", "\n"), rest.String(), code
}

// TestCLITerminal checks what only a person at a terminal sees: serve's notice,
// the progress of slow connections, readable call results; and that none of it
// reaches a pipe.
func TestCLITerminal(t *testing.T) {
	// Not parallel (a terminal), but its subtests, each on a pseudo-terminal of its
	// own, run beside one another: they mostly wait on a slow child.
	t.Run("serve says it waits for a client", func(t *testing.T) {
		t.Parallel()
		h := newHome(t, map[string]any{})
		// Interrupted once the notice is shown (main handles SIGINT from its
		// start), or after 10s to report what was shown instead.
		start := time.Now()
		shown, _, code := h.onTerminal("stdin stderr", func(shown string) bool {
			return strings.Contains(shown, "Press Ctrl-C to stop.") || time.Since(start) > 10*time.Second
		}, "serve")
		if code != 0 || !strings.Contains(shown, "nexus: waiting for an MCP client on stdin") || !strings.Contains(shown, "Press Ctrl-C to stop.") {
			t.Errorf("serve on a terminal: exit %d:\n%s", code, shown)
		}
	})
	slow := map[string]any{"servers": map[string]any{"slow": map[string]any{"command": "sh", "args": []string{"-c", "sleep 2"}}}}
	t.Run("list-tools shows who is still connecting", func(t *testing.T) {
		t.Parallel()
		h := newHome(t, slow)
		shown, _, _ := h.onTerminal("stderr", nil, "list-tools")
		for _, want := range []string{"nexus: waiting for slow to connect (", "nexus: 0 of 1 server(s) ready after "} {
			if !strings.Contains(shown, want) {
				t.Errorf("stderr on a terminal lacks %q:\n%q", want, shown)
			}
		}
	})
	t.Run("no progress off a terminal", func(t *testing.T) {
		t.Parallel()
		h := newHome(t, slow)
		_, stderr, _ := h.nexus("list-tools")
		if strings.Contains(stderr, "waiting for") || strings.Contains(stderr, "ready after") {
			t.Errorf("progress on a pipe:\n%s", stderr)
		}
	})
	t.Run("no progress with --json", func(t *testing.T) {
		t.Parallel()
		h := newHome(t, slow)
		shown, _, _ := h.onTerminal("stderr", nil, "list-tools", "--json")
		if strings.Contains(shown, "waiting for") {
			t.Errorf("progress with --json:\n%s", shown)
		}
	})
	sample := map[string]any{"servers": map[string]any{"code-kg": map[string]any{"command": built.nexus, "args": []string{"sample-server", "code-kg"}}}}
	t.Run("call prints structured content readably", func(t *testing.T) {
		t.Parallel()
		h := newHome(t, sample)
		shown, _, code := h.onTerminal("stdout", nil, "call", "code-kg.kg_latest_graph", "--args", `{"repository": "nowhere"}`)
		if code != 1 || !strings.HasPrefix(shown, "tool error:\n{\n  \"known_repositories\": [\n") || strings.Contains(shown, `"content"`) {
			t.Errorf("call on a terminal: exit %d:\n%s", code, shown)
		}
		shown, _, _ = h.onTerminal("stdout", nil, "call", "code-kg.kg_latest_graph", "--args", `{"repository": "nowhere"}`, "--json")
		if !strings.Contains(shown, `"structuredContent": {`) || !strings.Contains(shown, `"text": "{\"known_repositories\"`) {
			t.Errorf("call --json on a terminal keeps the raw result:\n%s", shown)
		}
	})
}
