//go:build unix

package upstream

import (
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/internal/proc"
)

// deadPid is the pid of a process that has exited and been reaped.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// startGroup starts sh running script as the leader of a group of its own, and
// returns the group's id.
func startGroup(t *testing.T, script string) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait() // reaped as it exits, as the gateway's would be by init
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	return cmd.Process.Pid
}

// TestLedgerReapsWhatAGoneGatewayLeft: the groups a gateway that is gone
// recorded are ended, those of a gateway that runs are kept, and each ended
// group is forgotten.
func TestLedgerReapsWhatAGoneGatewayLeft(t *testing.T) {
	dir := t.TempDir()
	l := OpenLedger(dir, slog.New(slog.DiscardHandler))
	write := func(pgid, gateway int) {
		t.Helper()
		e := entry{Server: "s", Pid: pgid, Gateway: gateway}
		e.Start, _ = proc.Start(pgid)
		e.GatewayStart, _ = proc.Start(gateway)
		b, _ := json.Marshal(e)
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(pgid)+".json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	left := startGroup(t, "sleep 600 & sleep 600")    // its gateway is gone
	leaderGone := startGroup(t, "sleep 600 & exit 0") // its leader exited, its grandchild stays
	kept := startGroup(t, "sleep 600")                // its gateway (this test) runs
	write(left, deadPid(t))
	time.Sleep(100 * time.Millisecond) // the second group's leader exits
	write(leaderGone, deadPid(t))
	write(kept, os.Getpid())

	if n := l.Reap(); n != 2 {
		t.Errorf("Reap ended %d groups, want 2", n)
	}
	for _, g := range []int{left, leaderGone} {
		if groupExists(g) {
			t.Errorf("group %d of a gone gateway still runs", g)
		}
		if _, err := os.Stat(filepath.Join(dir, strconv.Itoa(g)+".json")); !os.IsNotExist(err) {
			t.Errorf("group %d is still recorded: %v", g, err)
		}
	}
	if !groupExists(kept) {
		t.Error("the group of a running gateway was ended")
	}
}

// TestProcessRecordsItsGroup: a started child is in the ledger until it exits,
// and what it left in its group goes with it.
func TestProcessRecordsItsGroup(t *testing.T) {
	dir := t.TempDir()
	p := NewProcess(exec.Command("sh", "-c", "sleep 600 & read line"), Options{Name: "sh", Logger: slog.New(slog.DiscardHandler),
		MaxMessage: 1024, Ledger: OpenLedger(dir, slog.New(slog.DiscardHandler))})
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	pgid := p.cmd.Process.Pid
	file := filepath.Join(dir, strconv.Itoa(pgid)+".json")
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the running child is not recorded: %v", err)
	}
	p.Close() // its stdin closes: read ends, and the shell exits, leaving sleep
	deadline := time.Now().Add(10 * time.Second)
	for groupExists(pgid) || fileExists(file) {
		if time.Now().After(deadline) {
			t.Fatalf("after the child exited: group alive %v, recorded %v", groupExists(pgid), fileExists(file))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func fileExists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}
