package pipeio

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestOwn makes a blocking pipe (as a client hands its server) non-blocking
// for the process's use, and blocking again on restore; a regular file is left
// as it is.
func TestOwn(t *testing.T) {
	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		t.Fatal(err)
	}
	r, w := os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(fds[1]), "peer")
	defer w.Close()
	if nonblocking(t, fds[0]) {
		t.Fatal("syscall.Pipe made a non-blocking pipe")
	}
	rw, restore := Own(r)
	if rw == io.ReadWriter(r) || !nonblocking(t, fds[0]) {
		t.Fatal("Own left the pipe as it was")
	}
	go w.Write([]byte("hello\n"))
	buf := make([]byte, 6)
	if _, err := io.ReadFull(rw, buf); err != nil || string(buf) != "hello\n" {
		t.Fatalf("read %q, %v", buf, err)
	}
	restore()
	if nonblocking(t, fds[0]) {
		t.Error("restore left the pipe non-blocking")
	}

	regular, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer regular.Close()
	if rw, restore := Own(regular); rw != io.ReadWriter(regular) {
		t.Error("Own changed a regular file")
	} else {
		restore()
	}
}

func nonblocking(t *testing.T, fd int) bool {
	t.Helper()
	flags, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFL, 0)
	if e != 0 {
		t.Fatal(e)
	}
	return flags&syscall.O_NONBLOCK != 0
}
