//go:build unix

package upstream

import (
	"os"
	"os/exec"
	"syscall"
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
