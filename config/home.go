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

// SecureHome makes an existing home private to the user: the directory and the
// directories in it become HomeDirMode, the files in them HomeFileMode, when they
// allowed more (a home made by hand with mkdir is usually 0755, and files there
// 0644). Entries already private are left as they are; a home that does not exist
// is not created. It reports what it changed, for the log. On Windows, where
// permission bits do not say who may read a file, it does nothing.
func SecureHome(home string) ([]Tightened, error) {
	if runtime.GOOS == "windows" {
		return nil, nil
	}
	var changed []Tightened
	err := filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == home && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 || !(d.IsDir() || d.Type().IsRegular()) {
			return nil // a link may point anywhere; sockets and pipes are not ours to change
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := HomeFileMode
		if d.IsDir() {
			want = HomeDirMode
		}
		if mode := info.Mode().Perm(); mode&^want != 0 {
			if err := os.Chmod(path, mode&want); err != nil {
				return fmt.Errorf("making %s private: %w", path, err)
			}
			changed = append(changed, Tightened{Path: path, From: mode, To: mode & want})
		}
		if d.IsDir() && path != home && filepath.Dir(path) != home {
			return fs.SkipDir // two levels: the home and the directories Nexus makes in it
		}
		return nil
	})
	return changed, err
}
