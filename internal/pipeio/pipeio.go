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
// ends, a stdin or stdout that Own made non-blocking); any other is used as it
// is. On systems other than Linux every file is. The race detector does not see
// these reads and writes as synchronising anything; the pipes they are used on
// lead to other processes, so nothing in this one synchronises through them.
package pipeio

import (
	"io"
	"os"
)

// Reader is f read as this package reads a pipe, or f itself when it cannot be.
func Reader(f *os.File) io.Reader {
	if r := rawFile(f); r != nil {
		return r
	}
	return f
}

// Writer is f written as this package writes a pipe, or f itself when it
// cannot be.
func Writer(f *os.File) io.Writer {
	if w := rawFile(f); w != nil {
		return w
	}
	return f
}

// Own is f, a pipe or socket this process alone reads or writes (its stdin,
// its stdout, as a client that starts a stdio server makes them), made
// non-blocking and used raw. A terminal, a regular file or /dev/null is
// returned as it is. restore gives f back the blocking mode it had, for
// whatever shares it once this process is done with it; until then nothing
// else in the process may use f.
func Own(f *os.File) (rw io.ReadWriter, restore func()) {
	return own(f)
}
