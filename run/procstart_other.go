//go:build !linux

package run

import (
	"errors"
	"runtime"
)

// processStart cannot tell when a process started on this system without cgo:
// no gateway is signalled here, and the config poll applies edits instead.
func processStart(int) (string, error) {
	return "", errors.New("process start times are not read on " + runtime.GOOS)
}
