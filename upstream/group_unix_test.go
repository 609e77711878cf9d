//go:build unix

package upstream

import (
	"context"
	"log/slog"
	"os/exec"
	"testing"
	"time"
)

// startShell starts script under sh as a stdio child.
func startShell(t *testing.T, script string) *Process {
	t.Helper()
	p := NewProcess(exec.Command("sh", "-c", script), Options{Name: "sh", Logger: slog.New(slog.DiscardHandler), MaxMessage: 1024})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

// closeWithin closes p and fails t unless Close returned within d.
func closeWithin(t *testing.T, p *Process, d time.Duration) time.Duration {
	t.Helper()
	started := time.Now()
	done := make(chan struct{})
	go func() {
		p.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("Close still waiting after %s", d)
	}
	return time.Since(started)
}

// TestCloseEndsWhatTheChildStarted: a child that does not exit when its stdin
// closes and started a process that holds its stdout (npx and its node) is
// ended with what it started: Close does not wait for the grandchild.
func TestCloseEndsWhatTheChildStarted(t *testing.T) {
	p := startShell(t, "sleep 600 & sleep 600")
	closeWithin(t, p, 3*shutdownGrace+10*time.Second)
}

// TestCloseSignalsAStrandedChild: a child that asks something once its stdin is
// closed waits for an answer that cannot come; Close signals it without waiting
// out the grace.
func TestCloseSignalsAStrandedChild(t *testing.T) {
	p := startShell(t, `read line; echo '{"jsonrpc":"2.0","id":0,"method":"roots/list"}'; sleep 600`)
	if took := closeWithin(t, p, 3*shutdownGrace+10*time.Second); took >= shutdownGrace {
		t.Errorf("Close took %s: the grace was waited out for a child that asked after stdin closed", took)
	}
}

// TestCloseDoesNotWaitOnWhatTheChildLeft: a child that exits when its stdin
// closes, leaving a process it started that holds its stdout (a wrapper's
// helper), is gone when it exits: Close neither waits out the grace for the
// pipe to end nor leaves the helper running.
func TestCloseDoesNotWaitOnWhatTheChildLeft(t *testing.T) {
	p := startShell(t, "sleep 600 & read line")
	pgid := p.cmd.Process.Pid
	if took := closeWithin(t, p, shutdownGrace); took >= shutdownGrace {
		t.Errorf("Close took %s, the whole grace", took)
	}
	if groupExists(pgid) {
		t.Error("the helper the child left still runs")
	}
}
