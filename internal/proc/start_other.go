//go:build !linux

package proc

import (
	"errors"
	"runtime"
)

// Start cannot tell when a process started on this system without cgo; callers
// do without (a gateway is not signalled, a child group is not reaped unless its
// leader is gone).
func Start(int) (string, error) {
	return "", errors.New("process start times are not read on " + runtime.GOOS)
}
