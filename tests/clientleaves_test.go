//go:build linux

package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestClientThatStopsReadingEndsTheGateway: a client that closes its end of the
// gateway's stdout has left, as one that closes stdin has. The gateway's next
// answer finds the pipe broken; it ends its session and its children and exits
// cleanly, rather than dying of SIGPIPE and leaving what its children started
// for the next gateway to end; a line the client still sends meanwhile
// changes nothing. (Linux: elsewhere the gateway writes its stdout
// through os.File, which still dies of SIGPIPE.)
func TestClientThatStopsReadingEndsTheGateway(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "grandchild")
	wrapper := `sleep 600 & echo $! > ` + pidFile + `; exec "$0" "$@"`
	h := newHome(t, map[string]any{
		"servers": map[string]any{"wrapped": map[string]any{"command": "sh", "args": []string{"-c", wrapper, built.sample, "code-kg"}}},
	})
	cmd := exec.Command(built.nexus, "serve")
	cmd.Env = withRace(h.env())
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var grandchild int
	eventually(t, 30*time.Second, "the grandchild's pid", func() bool {
		b, err := os.ReadFile(pidFile)
		grandchild, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && grandchild > 0
	})

	stdout.Close() // the client stops reading, and stdin stays open
	if _, err := stdin.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	// One more line while the gateway shuts down: the reading of stdin must
	// end with the session, not block the gateway's only thread.
	eventually(t, 30*time.Second, "the gateway to see the client gone", func() bool {
		return strings.Contains(stderr.String(), "the client stopped reading")
	})
	_, _ = stdin.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}` + "\n"))
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the gateway ended with %v, want a clean exit\nstderr:\n%s", err, stderr)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the gateway still runs 30 s after its client stopped reading\nstderr:\n%s", stderr)
	}
	eventually(t, 10*time.Second, "the gateway's grandchild ends with it", func() bool { return !running(grandchild) })
}
