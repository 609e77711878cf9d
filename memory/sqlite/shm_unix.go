//go:build unix

package sqlite

import (
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// walHeaderWords is the WAL-index header (the first of its two copies at
// the start of the -shm file, 48 bytes; see "WAL-Index Format" in
// SQLite's file format documentation), read as twelve 32-bit words.
// Every commit rewrites it (its change counter, last frame, salts and
// checksums), so an unchanged header means nothing was committed.
const walHeaderWords = 12

// shmView is a read-only mapping of memory.db's -shm file, so the hot
// layer can tell in a few loads that no connection committed, and ask
// SQLite (PRAGMA data_version) only when the header moved.
type shmView struct{ data []byte }

func openShm(dbPath string) (*shmView, error) {
	f, err := os.Open(dbPath + "-shm")
	if err != nil {
		return nil, fmt.Errorf("open wal-index: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat wal-index: %w", err)
	}
	if fi.Size() < 4*walHeaderWords {
		return nil, fmt.Errorf("wal-index is %d bytes", fi.Size())
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, 4*walHeaderWords, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map wal-index: %w", err)
	}
	return &shmView{data: data}, nil
}

// header reads the WAL-index header. A read torn by a concurrent commit
// differs from the last one seen, which only sends the caller to SQLite.
func (v *shmView) header() (h [walHeaderWords]uint32) {
	for i := range h {
		h[i] = atomic.LoadUint32((*uint32)(unsafe.Pointer(&v.data[4*i])))
	}
	return h
}

func (v *shmView) close() { syscall.Munmap(v.data) }
