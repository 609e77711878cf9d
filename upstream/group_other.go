//go:build !unix

package upstream

import (
	"os"
	"os/exec"
	"syscall"
)

// ownGroup leaves the child as it is: outside unix there is no process group to
// signal. Close's bounded wait for the pipes still ends a child whose own children
// hold them.
func ownGroup(*exec.Cmd) {}

// signalGroup signals the child alone; SIGKILL is the only signal every system
// delivers.
func signalGroup(p *os.Process, sig syscall.Signal) error {
	if sig == syscall.SIGKILL {
		return p.Kill()
	}
	return p.Signal(sig)
}

// groupExists, leaderRuns and killGroup have no process group to work on here:
// a Ledger records nothing it could end.
func groupExists(int) bool { return false }
func leaderRuns(int) bool  { return false }
func killGroup(int) error  { return nil }

func killGroups([]int) error { return nil }
