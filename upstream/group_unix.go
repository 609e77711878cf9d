//go:build unix

package upstream

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"time"

	"github.com/nexus-mcp/nexus/internal/proc"
)

// ownGroup makes the child the leader of a process group of its own, so that
// what it starts (npx starts node, a shell script its commands) is signalled with
// it: a grandchild left behind would keep the child's stdout open, and with it
// the gateway waiting.
func ownGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// signalGroup sends sig to the child's process group: the child and whatever it
// started that did not leave the group.
func signalGroup(p *os.Process, sig syscall.Signal) error {
	return syscall.Kill(-p.Pid, sig)
}

// groupExists reports whether process group pgid has a member that has not
// exited (a member that exited and waits to be reaped does not count, where the
// system tells).
func groupExists(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	if alive, known := proc.GroupAlive(pgid); known {
		return alive
	}
	return true
}

// leaderRuns reports whether process pid exists.
func leaderRuns(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// killGroup ends process group pgid: SIGTERM, then SIGKILL to what is left after
// the grace.
func killGroup(pgid int) error { return killGroups([]int{pgid}) }

// killGroups ends the process groups pgids together: SIGTERM to each, then
// SIGKILL to what is left of them after one grace.
func killGroups(pgids []int) error {
	var errs []error
	for _, pgid := range pgids {
		if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, err)
		}
	}
	deadline := time.Now().Add(shutdownGrace)
	for time.Now().Before(deadline) && slices.ContainsFunc(pgids, groupExists) {
		time.Sleep(20 * time.Millisecond)
	}
	for _, pgid := range pgids {
		if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
