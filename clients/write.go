package clients

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nexus-mcp/nexus/config"
)

// backupInfix separates a client file's name from the time of its backup.
const backupInfix = ".nexus-backup-"

// writtenRecord names the hidden file beside a backup that records (as a
// SHA-256) what setup wrote, so that undo can tell whether the client file
// changed since.
func writtenRecord(backup string) string {
	return filepath.Join(filepath.Dir(backup), "."+filepath.Base(backup)+".written")
}

// clientFile is a client config file read for an edit: the name it was given
// by, the file that holds its bytes (the target of a symbolic link), and those
// bytes as read.
type clientFile struct {
	path   string // as given; backups are named after it
	target string // where the bytes are read and written
	data   []byte
	exists bool
}

// readClientFile reads path, following a symbolic link so that an edit writes the
// file the link points to and keeps the link (replacing the link by a file would
// cut it from the dotfiles repository it often points into).
func readClientFile(path string) (*clientFile, error) {
	f := &clientFile{path: path, target: path}
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		f.target = resolved
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	} else if link, err := os.Readlink(path); err == nil {
		// A link to a file not made yet: the file is made where it points.
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(path), link)
		}
		f.target = link
	}
	data, err := os.ReadFile(f.target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return f, nil
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	f.data, f.exists = data, true
	return f, nil
}

// write replaces the file's content by after, atomically, after a backup of what
// was read (returned; "" for a new file). It refuses, changing nothing, a file
// that is read-only (the user protected it) and one that changed since it was
// read (another program wrote it: writing would lose that).
func (f *clientFile) write(after []byte, now time.Time) (backup string, err error) {
	perm := fs.FileMode(0o600) // a client file may hold tokens in its env
	if err := f.unchanged(); err != nil {
		return "", err
	}
	if f.exists {
		st, err := os.Stat(f.target)
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", f.path, err)
		}
		perm = st.Mode().Perm()
		if perm&0o200 == 0 {
			return "", fmt.Errorf("%s is read-only (mode %04o), so nothing was changed: make it writable (chmod u+w %s) and run again, or add the entry by hand", f.path, perm, f.target)
		}
		if now.IsZero() {
			now = time.Now()
		}
		if backup, err = writeBackup(f.path, f.data, now); err != nil {
			return "", err
		}
		if err := os.WriteFile(writtenRecord(backup), []byte(digest(after)+"\n"), 0o600); err != nil {
			os.Remove(backup)
			return "", fmt.Errorf("making a backup of %s before editing it (nothing was changed): %w", f.path, err)
		}
	}
	if err := config.WriteFileAtomic(f.target, after, perm); err != nil {
		if backup != "" {
			os.Remove(backup)
			os.Remove(writtenRecord(backup))
		}
		return "", fmt.Errorf("writing %s (the original is unchanged): %w", f.path, err)
	}
	return backup, nil
}

// unchanged reports an error when the file no longer holds what was read.
func (f *clientFile) unchanged() error {
	now, err := os.ReadFile(f.target)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("reading %s again before writing it: %w", f.path, err)
	}
	if (err == nil) != f.exists || !bytes.Equal(now, f.data) {
		return fmt.Errorf("%s changed while Nexus was editing it (another program wrote it), so nothing was changed: run the command again", f.path)
	}
	return nil
}

func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Backups lists the backups setup made of the client file at path, oldest first.
func Backups(path string) ([]string, error) {
	dir, base := filepath.Split(path)
	entries, err := os.ReadDir(filepath.Clean(dir + "."))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the backups of %s: %w", path, err)
	}
	type backup struct {
		name  string
		stamp string
		n     int
	}
	var found []backup
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), base+backupInfix)
		if !ok || e.IsDir() {
			continue
		}
		// TIME is 20060102-150405, then -N when several were made that second.
		b := backup{name: filepath.Join(dir, e.Name()), stamp: rest, n: 1}
		if len(rest) > 16 && rest[15] == '-' {
			if n, err := strconv.Atoi(rest[16:]); err == nil {
				b.stamp, b.n = rest[:15], n
			}
		}
		found = append(found, b)
	}
	slices.SortFunc(found, func(a, b backup) int {
		if c := strings.Compare(a.stamp, b.stamp); c != 0 {
			return c
		}
		return a.n - b.n
	})
	names := make([]string, len(found))
	for i, b := range found {
		names[i] = b.name
	}
	return names, nil
}

// UndoResult says what Undo did or, in a dry run, would do.
type UndoResult struct {
	File    string `json:"file"`
	Backup  string `json:"backup"`
	Diff    string `json:"diff,omitempty"`
	Written bool   `json:"written"`
}

// ErrNoBackup is returned by Undo for a file setup never backed up.
var ErrNoBackup = errors.New("no backup to restore")

// Undo restores the newest backup setup made of the client file at path, when
// the file still holds exactly what setup wrote then: restoring over later
// changes (the user's, or the client's own) would lose them, so Undo refuses and
// says so. A restored backup is removed, so a second Undo goes one setup further
// back. dryRun computes the diff and writes nothing.
func Undo(path string, dryRun bool) (*UndoResult, error) {
	backups, err := Backups(path)
	if err != nil {
		return nil, err
	}
	if len(backups) == 0 {
		return nil, fmt.Errorf("%w: %s has no %s* beside it (setup makes one only when it changes a file that existed; a file setup created has nothing to go back to: delete it)", ErrNoBackup, path, backupInfix)
	}
	backup := backups[len(backups)-1]
	saved, err := os.ReadFile(backup)
	if err != nil {
		return nil, fmt.Errorf("reading the backup %s: %w", backup, err)
	}
	written, err := os.ReadFile(writtenRecord(backup))
	if err != nil {
		return nil, fmt.Errorf("%s has no record of what setup wrote (it was made by an older Nexus), so Nexus cannot tell whether %s changed since; nothing was changed: compare the two and copy the backup over the file by hand", backup, path)
	}
	f, err := readClientFile(path)
	if err != nil {
		return nil, err
	}
	if !f.exists || digest(f.data) != strings.TrimSpace(string(written)) {
		return nil, fmt.Errorf("%s changed since nexus setup wrote it, so undo would lose those changes; nothing was changed: the backup is %s, compare and copy it back by hand if you want it", path, backup)
	}
	res := &UndoResult{File: path, Backup: backup,
		Diff: UnifiedDiff(path, path+" (after nexus setup --undo)", redact(f.data), redact(saved))}
	if dryRun {
		return res, nil
	}
	st, err := os.Stat(f.target)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if st.Mode().Perm()&0o200 == 0 {
		return nil, fmt.Errorf("%s is read-only (mode %04o), so nothing was changed: make it writable (chmod u+w %s) and run again", path, st.Mode().Perm(), f.target)
	}
	if err := f.unchanged(); err != nil {
		return nil, err
	}
	if err := config.WriteFileAtomic(f.target, saved, st.Mode().Perm()); err != nil {
		return nil, fmt.Errorf("restoring %s from %s (the file is unchanged): %w", path, backup, err)
	}
	res.Written = true
	os.Remove(backup)
	os.Remove(writtenRecord(backup))
	return res, nil
}
