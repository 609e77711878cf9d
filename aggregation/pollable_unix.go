//go:build unix

package aggregation

import (
	"io"
	"os"
	"syscall"
)

// pollable returns a reader of the same pipe that waits in Go's network poller
// rather than in a blocking read. A client's pipe is inherited blocking, and a
// goroutine blocked in read(2) holds its thread's P until the runtime takes it
// back: a worker handed a request meanwhile waits for that, tens of
// microseconds a call. A terminal or a file is left as it is: their flags are
// shared with whoever else holds them.
func pollable(in io.Reader) io.Reader {
	f, ok := in.(*os.File)
	if !ok {
		return in
	}
	if st, err := f.Stat(); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		return in
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return in
	}
	var fd uintptr
	var setErr error
	if err := rc.Control(func(d uintptr) { fd, setErr = d, syscall.SetNonblock(int(d), true) }); err != nil || setErr != nil {
		return in
	}
	// NewFile sees the descriptor non-blocking and reads it through the poller.
	// The descriptor stays f's: closing either closes it, which ServeStdio never does.
	return os.NewFile(fd, f.Name())
}
