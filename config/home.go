package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// Modes of what Nexus keeps in NEXUS_HOME: the config, the memory and audit
// databases and the secrets file may hold what no other user should read.
const (
	HomeDirMode  fs.FileMode = 0o700
	HomeFileMode fs.FileMode = 0o600
)

// Tightened is one entry of NEXUS_HOME whose mode SecureHome narrowed.
type Tightened struct {
	Path     string
	From, To fs.FileMode
}

func (t Tightened) String() string { return fmt.Sprintf("%s: %#o -> %#o", t.Path, t.From, t.To) }

// homeEntries are the entries Nexus keeps in NEXUS_HOME; the directories among
// them are made private with their files. Nothing else there is touched: a home
// may be a directory the user keeps other things in.
var homeEntries = []string{"config.json", "catalog.json", "memory.db", "audit.db", "run", "secrets"}

// SecureHome makes an existing home private to the user: the directory becomes
// HomeDirMode, and the entries Nexus keeps in it (homeEntries, with the -wal, -shm
// and -journal files of the databases, and the files in its directories)
// HomeFileMode or HomeDirMode, when they allowed more (a home made by hand with
// mkdir is usually 0755, and files there 0644). Entries already private are left
// as they are, and so are symbolic links; a home that does not exist is not
// created. When NEXUS_HOME is the user's own home directory, that directory keeps
// its mode (other programs rely on it) and only Nexus's entries are narrowed. It
// reports what it changed, for the log. On Windows, where permission bits do not
// say who may read a file, it does nothing.
func SecureHome(home string) ([]Tightened, error) {
	if runtime.GOOS == "windows" {
		return nil, nil
	}
	info, err := os.Lstat(home)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("making %s private: %w", home, err)
	}
	var changed []Tightened
	var errs []error
	narrow := func(path string, info fs.FileInfo) {
		want := HomeFileMode
		if info.IsDir() {
			want = HomeDirMode
		}
		if !info.IsDir() && !info.Mode().IsRegular() {
			return // a link may point anywhere; sockets and pipes are not ours to change
		}
		if mode := info.Mode().Perm(); mode&^want != 0 {
			if err := os.Chmod(path, mode&want); err != nil {
				errs = append(errs, fmt.Errorf("making %s private: %w", path, err))
				return
			}
			changed = append(changed, Tightened{Path: path, From: mode, To: mode & want})
		}
	}
	if info.IsDir() && !isUserHome(home) {
		narrow(home, info)
	}
	for _, name := range homeEntries {
		for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
			path := filepath.Join(home, name+suffix)
			info, err := os.Lstat(path)
			if err != nil {
				continue // absent (most suffixes are)
			}
			narrow(path, info)
			if !info.IsDir() {
				continue
			}
			files, err := os.ReadDir(path)
			if err != nil {
				errs = append(errs, fmt.Errorf("making %s private: %w", path, err))
				continue
			}
			for _, f := range files {
				if fi, err := f.Info(); err == nil && !fi.IsDir() {
					narrow(filepath.Join(path, f.Name()), fi)
				}
			}
		}
	}
	return changed, errors.Join(errs...)
}

// isUserHome reports whether dir is the user's home directory.
func isUserHome(dir string) bool {
	u, err := os.UserHomeDir()
	if err != nil {
		return false
	}
	a, errA := os.Stat(u)
	b, errB := os.Stat(dir)
	return errA == nil && errB == nil && os.SameFile(a, b)
}
