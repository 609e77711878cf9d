package pipeio

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestRoundTrip writes messages of several sizes through a pipe and reads them
// back: one larger than a pipe's buffer makes the writer wait for the reader.
func TestRoundTrip(t *testing.T) {
	for _, size := range []int{1, 4 << 10, 64 << 10, 1 << 20} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		want := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
		done := make(chan error, 1)
		go func() {
			_, err := Raw(w).Write(want)
			w.Close()
			done <- err
		}()
		got, err := io.ReadAll(Raw(r))
		r.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: read %d bytes, %v", size, len(got), err)
		}
		if err := <-done; err != nil {
			t.Fatalf("%d bytes: write: %v", size, err)
		}
	}
}

// TestRawWhereItCan checks which files take the raw path: a pipe's ends on
// Linux, never a regular file.
func TestRawWhereItCan(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	regular, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer regular.Close()
	linux := runtime.GOOS == "linux" && (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64")
	for _, c := range []struct {
		name string
		got  any
		f    *os.File
		raw  bool
	}{
		{"pipe's read end", Raw(r), r, linux},
		{"pipe's write end", Raw(w), w, linux},
		{"regular file", Raw(regular), regular, false},
	} {
		if isRaw := c.got != any(c.f); isRaw != c.raw {
			t.Errorf("%s: raw %v, want %v", c.name, isRaw, c.raw)
		}
	}
}

// TestErrors checks the errors a caller tells apart: a pipe nobody reads any
// more (EPIPE), and a file closed while a read waits on it (os.ErrClosed).
func TestErrors(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if _, err := Raw(w).Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Errorf("write to a pipe with no reader: %v, want EPIPE", err)
	}
	w.Close()

	r, w, err = os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	read := make(chan error, 1)
	reader := Raw(r) // before the goroutine: made after the close, it would be r
	go func() {
		_, err := reader.Read(make([]byte, 16))
		read <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the read wait
	r.Close()
	select {
	case err := <-read:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("read of a file closed under it: %v, want os.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a read on a closed file did not return")
	}
}
