//go:build linux && (amd64 || arm64)

package pipeio

import (
	"errors"
	"io"
	"os"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

// raw is a file read and written with raw system calls. Its descriptor is
// watched by the poller, which a call that would block waits in instead.
type raw struct {
	f  *os.File
	rc syscall.RawConn
	// socket: the descriptor is a socket, read and written with recv and send
	// and MSG_DONTWAIT, so that no call blocks whatever mode its open file
	// description is in (Own shares it with the process that started this one).
	socket bool
}

// rawFile is f as a raw file, or nil when f is not non-blocking or the poller
// does not watch it. (It clears f's deadlines: no pipe here has one.)
func rawFile(f *os.File) *raw {
	fd, ok := descriptor(f)
	if !ok {
		return nil
	}
	flags, err := getFlags(fd)
	if err != nil || flags&syscall.O_NONBLOCK == 0 {
		return nil
	}
	return polled(f, false)
}

// polled is f as a raw file when the poller watches it, else nil.
func polled(f *os.File, socket bool) *raw {
	if f.SetDeadline(time.Time{}) != nil {
		return nil // os.ErrNoDeadline: not in the poller
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	return &raw{f: f, rc: rc, socket: socket}
}

func (r *raw) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := r.rc.Read(func(fd uintptr) bool {
		for {
			var m uintptr
			var e syscall.Errno
			if r.socket {
				m, _, e = syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), syscall.MSG_DONTWAIT, 0, 0)
			} else {
				m, _, e = syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			}
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait in the poller until there is something to read
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
			var m uintptr
			var e syscall.Errno
			rest := uintptr(unsafe.Pointer(&p[written]))
			if r.socket {
				m, _, e = syscall.RawSyscall6(syscall.SYS_SENDTO, fd, rest, uintptr(len(p)-written), syscall.MSG_DONTWAIT|syscall.MSG_NOSIGNAL, 0, 0)
			} else {
				m, _, e = syscall.RawSyscall(syscall.SYS_WRITE, fd, rest, uintptr(len(p)-written))
			}
			switch e {
			case 0:
				if m == 0 {
					errno = syscall.EIO // a pipe never takes nothing; do not spin
					return true
				}
				written += int(m)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false // full: wait in the poller until it takes more
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

// wrap is the error of a wait the poller ended. Past rawFile's checks it ends
// one only for a deadline or the file's closing, which os.File reports as
// os.ErrClosed and a RawConn as an error of its own.
func (r *raw) wrap(op string, err error) error {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		err = os.ErrClosed
	}
	return &os.PathError{Op: op, Path: r.f.Name(), Err: err}
}

// own opens, for f's pipe or socket, a descriptor of this process's own that
// the poller watches, and leaves f's as it is: the open file description
// behind f may be shared (a shell's stdin, stderr as 2>&1), and its mode is
// not this process's to change for the others. The descriptor is closed by
// restore, which ends a read or write waiting on it.
//
// A descriptor handed over non-blocking gets one of the gateway's own too:
// whoever shares it (a Node wrapper that read its own stdin) may make it
// blocking again, and a raw read would then block in the kernel.
func own(f *os.File) (io.ReadWriter, func()) {
	fd, ok := descriptor(f)
	if !ok {
		return f, func() {}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return f, func() {}
	}
	var private *os.File
	socket := false
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFIFO:
		private = reopen(fd, f.Name())
	case syscall.S_IFSOCK:
		private, socket = pollSocket(fd, f.Name()), true
	}
	if private == nil {
		return f, func() {}
	}
	r := polled(private, socket)
	if r == nil {
		_ = private.Close()
		return f, func() {}
	}
	return r, func() { _ = private.Close() }
}

// reopen opens the pipe fd is an end of again, through /proc, for a new open
// file description of this process's own: non-blocking, and read or written
// as fd is. nil when it cannot: no /proc, EACCES (the pipe belongs to another
// user ID), ENXIO (a named FIFO with no reader).
func reopen(fd int, name string) *os.File {
	flags, err := getFlags(fd)
	if err != nil {
		return nil
	}
	mode := flags&syscall.O_ACCMODE | syscall.O_NONBLOCK | syscall.O_CLOEXEC
	nfd, err := syscall.Open("/proc/self/fd/"+strconv.Itoa(fd), mode, 0)
	if err != nil {
		return nil
	}
	return os.NewFile(uintptr(nfd), name) // non-blocking: os watches it in the poller
}

// pollSocket is a duplicate of socket fd that the poller watches. A socket
// cannot be opened again, so the duplicate shares fd's open file description:
// a blocking one is made non-blocking for the few microseconds os takes to
// register it with the poller, then given back its mode. Reads and writes on
// it say MSG_DONTWAIT themselves.
func pollSocket(fd int, name string) *os.File {
	flags, err := getFlags(fd)
	if err != nil {
		return nil
	}
	nfd, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 0)
	if e != 0 {
		return nil
	}
	if err := syscall.SetNonblock(int(nfd), true); err != nil {
		_ = syscall.Close(int(nfd))
		return nil
	}
	f := os.NewFile(nfd, name)
	if flags&syscall.O_NONBLOCK == 0 {
		if err := syscall.SetNonblock(int(nfd), false); err != nil {
			_ = f.Close() // os.Stdin, read blocking, must not meet EAGAIN
			return nil
		}
	}
	return f
}

// descriptor is f's descriptor, read without os.File.Fd, which would make a
// non-blocking file blocking.
func descriptor(f *os.File) (int, bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, false
	}
	fd := -1
	if rc.Control(func(d uintptr) { fd = int(d) }) != nil || fd < 0 {
		return 0, false
	}
	return fd, true
}

func getFlags(fd int) (int, error) {
	flags, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFL, 0)
	if e != 0 {
		return 0, e
	}
	return int(flags), nil
}
