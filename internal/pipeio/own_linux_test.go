//go:build linux && (amd64 || arm64)

package pipeio

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestOwn takes blocking pipes and a socket, as a client hands them to a stdio
// server, and checks what a gateway relies on: Own reads and writes them
// without changing the mode of the descriptors it was given (another process
// may share them), and restore ends a read waiting on them, leaving the
// original descriptor as usable as before.
func TestOwn(t *testing.T) {
	pipe := func(t *testing.T) (reader, writer int) {
		var fds [2]int
		if err := syscall.Pipe(fds[:]); err != nil {
			t.Fatal(err)
		}
		return fds[0], fds[1]
	}
	// nonblockingPipe is a pipe handed over non-blocking, as a wrapper that
	// read its own stdin may hand it; the wrapper may make it blocking again.
	nonblockingPipe := func(t *testing.T) (reader, writer int) {
		var fds [2]int
		if err := syscall.Pipe2(fds[:], syscall.O_NONBLOCK); err != nil {
			t.Fatal(err)
		}
		return fds[0], fds[1]
	}
	socketpair := func(t *testing.T) (int, int) {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		return fds[0], fds[1]
	}
	for _, c := range []struct {
		name string
		make func(t *testing.T) (int, int)
		// owned is the descriptor Own takes; peer the client's end.
		owned func(a, b int) (owned, peer int)
		read  bool // the owned end is read (stdin), else written (stdout)
	}{
		{"pipe read (stdin)", pipe, func(r, w int) (int, int) { return r, w }, true},
		{"pipe write (stdout)", pipe, func(r, w int) (int, int) { return w, r }, false},
		{"non-blocking pipe read (stdin)", nonblockingPipe, func(r, w int) (int, int) { return r, w }, true},
		{"socket (stdin)", socketpair, func(a, b int) (int, int) { return a, b }, true},
		{"socket (stdout)", socketpair, func(a, b int) (int, int) { return a, b }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			fd, peerFD := c.owned(c.make(t))
			f, peer := os.NewFile(uintptr(fd), "owned"), os.NewFile(uintptr(peerFD), "peer")
			defer f.Close()
			defer peer.Close()
			mode := nonblocking(t, fd)
			rw, restore := Own(f)
			if rw == io.ReadWriter(f) {
				t.Fatal("Own left the descriptor to os.File")
			}
			if nonblocking(t, fd) != mode {
				t.Fatal("Own changed the shared descriptor's mode")
			}
			if mode {
				_ = syscall.SetNonblock(fd, false) // as the process sharing it may
			}
			// One message through the owned end, the way a gateway uses it.
			buf := make([]byte, 6)
			if c.read {
				go peer.Write([]byte("hello\n"))
				_, err := io.ReadFull(rw, buf)
				check(t, buf, err)
			} else {
				if _, err := rw.Write([]byte("hello\n")); err != nil {
					t.Fatal(err)
				}
				_, err := io.ReadFull(peer, buf)
				check(t, buf, err)
			}
			if !c.read {
				restore()
				return
			}
			// A read waiting when restore runs ends, and the descriptor reads on.
			waiting := make(chan error, 1)
			go func() {
				_, err := rw.Read(buf)
				waiting <- err
			}()
			time.Sleep(50 * time.Millisecond) // let it wait
			restore()
			select {
			case err := <-waiting:
				if !errors.Is(err, os.ErrClosed) {
					t.Errorf("the waiting read ended with %v, want os.ErrClosed", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("restore left a read waiting")
			}
			go peer.Write([]byte("again\n"))
			_, err := io.ReadFull(f, buf)
			if err != nil || string(buf) != "again\n" {
				t.Errorf("the original descriptor after restore: %q, %v", buf, err)
			}
		})
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

func check(t *testing.T, buf []byte, err error) {
	t.Helper()
	if err != nil || string(buf) != "hello\n" {
		t.Fatalf("got %q, %v", buf, err)
	}
}

func nonblocking(t *testing.T, fd int) bool {
	t.Helper()
	flags, err := getFlags(fd)
	if err != nil {
		t.Fatal(err)
	}
	return flags&syscall.O_NONBLOCK != 0
}
