// Package pipeio reads and writes the pipes a stdio gateway lives on (its
// client's stdin and stdout, its children's) without entering the Go
// scheduler's system-call path.
//
// Why: a gateway spends most of a call waiting, first for the child, then for
// its client. Once every P of the process is idle, the runtime's monitor thread
// (sysmon) goes to sleep, and the next goroutine to enter a system call through
// syscall.Syscall wakes it with a futex: measured here, about a sixth of a
// relayed call's CPU, paid on every call. A read or write on a non-blocking
// pipe never blocks, so it can be made with syscall.RawSyscall, which does not
// enter that path; when the pipe is not ready, the goroutine waits in the
// network poller as os.File's own reads do. (With more than one P, the wake-up
// the scheduler then makes to run the goroutine a read readied costs about as
// much: a stdio gateway also runs on one P, see docs/decisions.md.)
//
// Only a file that is non-blocking and pollable is read this way (os.Pipe's
// ends), and a stdin or stdout through a descriptor of the process's own that
// Own opens; any other is used as it is. On systems other than Linux (amd64,
// arm64) every file is. The race detector sees neither these reads' writes into
// their buffers nor any synchronisation through them; the pipes they are used
// on lead to other processes, so nothing in this one synchronises through them.
package pipeio

import (
	"io"
	"os"
)

// Raw is f read and written as this package reads and writes a pipe, or f
// itself when it cannot be (f is not non-blocking, or not in the poller).
func Raw(f *os.File) io.ReadWriter {
	if r := rawFile(f); r != nil {
		return r
	}
	return f
}

// Own is f, the pipe or socket a client handed this process as its stdin or
// stdout, read and written raw through a descriptor of the process's own: the
// pipe opened again (through /proc), or the socket duplicated and read with
// MSG_DONTWAIT. f's descriptor keeps its mode (a blocking socket's is
// non-blocking for the moment its duplicate is registered with the poller).
// restore closes the process's own descriptor, which ends a read or write
// waiting on it; f stays open. Anything else (a terminal, a regular file,
// /dev/null, a pipe that cannot be opened again) is returned as it is, with a
// restore that does nothing.
func Own(f *os.File) (rw io.ReadWriter, restore func()) {
	return own(f)
}
