//go:build !unix

package skips

import "os/exec"

// detach does nothing: report appends after the go command's exit on Linux only.
func detach(*exec.Cmd) {}
