//go:build unix

package skips

import (
	"os/exec"
	"syscall"
)

// detach puts cmd in a session of its own, so that it outlives the go command's
// process group and no terminal signal reaches it. Its standard streams stay
// unset (/dev/null): it holds none of the go command's pipes.
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
}
