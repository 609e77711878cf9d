package pipeio

import (
	"errors"
	"io"
	"os"
	"syscall"
	"time"
	"unsafe"
)

// raw is a non-blocking, pollable file read and written with raw system calls.
type raw struct {
	f    *os.File // kept: its finalizer would close the descriptor
	rc   syscall.RawConn
	keep *os.File // the File Own made f beside, kept for the same reason
}

// rawFile is f as a raw file, or nil when f is not non-blocking or the poller
// does not watch it. (It clears f's deadlines: no pipe here has one.)
func rawFile(f *os.File) *raw {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	nonblocking := false
	if err := rc.Control(func(fd uintptr) {
		flags, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		nonblocking = e == 0 && flags&syscall.O_NONBLOCK != 0
	}); err != nil || !nonblocking {
		return nil
	}
	// A file the poller does not watch says so here; one it watches can wait
	// for its pipe to be ready.
	if f.SetDeadline(time.Time{}) != nil {
		return nil
	}
	return &raw{f: f, rc: rc}
}

func (r *raw) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := r.rc.Read(func(fd uintptr) bool {
		for {
			m, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait in the poller until the pipe is readable
			}
			n, errno = int(m), e
			return true
		}
	})
	switch {
	case err != nil:
		return 0, r.wrap("read", err)
	case errno != 0:
		return 0, &os.PathError{Op: "read", Path: r.f.Name(), Err: errno}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (r *raw) Write(p []byte) (int, error) {
	written := 0
	var errno syscall.Errno
	err := r.rc.Write(func(fd uintptr) bool {
		for written < len(p) {
			m, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[written])), uintptr(len(p)-written))
			switch e {
			case 0:
				if m == 0 {
					errno = syscall.EIO // a pipe never takes nothing; do not spin
					return true
				}
				written += int(m)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false // the pipe is full: wait until it is writable
			default:
				errno = e
				return true
			}
		}
		return true
	})
	switch {
	case err != nil:
		return written, r.wrap("write", err)
	case errno != 0:
		return written, &os.PathError{Op: "write", Path: r.f.Name(), Err: errno}
	}
	return written, nil
}

// wrap is the error of a wait the poller ended: its deadline, else the file's
// closing, which os.File reports as os.ErrClosed and a RawConn does not.
func (r *raw) wrap(op string, err error) error {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		err = os.ErrClosed
	}
	return &os.PathError{Op: op, Path: r.f.Name(), Err: err}
}

func own(f *os.File) (io.ReadWriter, func()) {
	unchanged := func() {}
	if r := rawFile(f); r != nil {
		return r, unchanged // non-blocking from the start, so Go already polls it
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return f, unchanged
	}
	fd := -1
	if rc.Control(func(d uintptr) { fd = int(d) }) != nil || fd < 0 {
		return f, unchanged
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return f, unchanged
	}
	if kind := st.Mode & syscall.S_IFMT; kind != syscall.S_IFIFO && kind != syscall.S_IFSOCK {
		return f, unchanged
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		return f, unchanged
	}
	restore := func() { _ = syscall.SetNonblock(fd, false) }
	// A second File for the descriptor: made while it is non-blocking, it is
	// one the poller watches (f, made blocking, is not). f is kept with it, so
	// that neither's finalizer closes the descriptor under the other.
	dup := os.NewFile(uintptr(fd), f.Name())
	r := rawFile(dup)
	if r == nil {
		restore()
		return f, unchanged
	}
	r.keep = f
	return r, restore
}
