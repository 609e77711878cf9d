package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
)

// File is the opt-in fallback for machines without a usable keychain
// (--insecure-file-store): a JSON file readable by the user alone (0600, in a 0700
// directory). It is "insecure" because any process running as the user, and anyone
// with the disk, can read it; the keychain at least encrypts at rest and can ask.
//
// Every call reads the file afresh, so a value set by `nexus secrets set` is seen by a
// running gateway. Writes go to a temporary file in the same directory, synced, then
// renamed over the old one, so a crash leaves either the old or the new file, never a
// torn one. Calls on one File are serialized; two processes writing at once can lose
// one update (there is no cross-process lock), which is acceptable for a store changed
// by hand.
//
// On Unix the file and its directory must not be accessible by group or others: a
// looser mode is refused with the chmod to run, rather than silently tightened.
type File struct {
	// Path is the JSON file. Its directory is created 0700 when missing.
	Path string

	mu sync.Mutex
}

var _ Store = (*File)(nil)

// fileFormat is the on-disk layout. Version lets a later Nexus change it knowingly.
type fileFormat struct {
	Version int               `json:"version"`
	Secrets map[string]string `json:"secrets"`
}

// Get returns the value stored under name.
func (f *File) Get(ctx context.Context, name string) (string, error) {
	if err := ValidateName(name); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.read()
	if err != nil {
		return "", err
	}
	v, ok := m[name]
	if !ok {
		return "", fmt.Errorf("%w: %s is not in %s; set it with `nexus secrets set %s`", ErrNotFound, name, f.Path, name)
	}
	return v, nil
}

// Set stores value under name, replacing any previous value.
func (f *File) Set(ctx context.Context, name, value string) error {
	if err := checkSet(name, value); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.read()
	if err != nil {
		return err
	}
	m[name] = value
	return f.write(m)
}

// Delete removes name; an absent name is not an error.
func (f *File) Delete(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.read()
	if err != nil {
		return err
	}
	if _, ok := m[name]; !ok {
		return nil
	}
	delete(m, name)
	return f.write(m)
}

// Names lists the stored names, sorted; the keychain cannot list, but the file can,
// which helps move its values into a keychain later.
func (f *File) Names(ctx context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.read()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// check verifies at start-up that the file is usable, so a bad mode or a corrupt file
// is reported by Open rather than by the first child that needs a secret.
func (f *File) check() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, err := f.read()
	return err
}

// read returns the stored map; a missing file is an empty store.
func (f *File) read() (map[string]string, error) {
	if f.Path == "" {
		return nil, errors.New("secrets file: no path given")
	}
	if err := checkPrivate(filepath.Dir(f.Path), true); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	data, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading secrets file: %w", err)
	}
	if err := checkPrivate(f.Path, false); err != nil {
		return nil, err
	}
	var ff fileFormat
	if err := json.Unmarshal(data, &ff); err != nil {
		return nil, fmt.Errorf("secrets file %s is corrupt (%v); fix it by hand, or delete it and set each secret again with `nexus secrets set NAME`", f.Path, err)
	}
	if ff.Version != 1 {
		return nil, fmt.Errorf("secrets file %s has version %d; this Nexus reads version 1 (was it written by a newer Nexus?)", f.Path, ff.Version)
	}
	if ff.Secrets == nil {
		ff.Secrets = map[string]string{}
	}
	return ff.Secrets, nil
}

// write replaces the file atomically.
func (f *File) write(m map[string]string) error {
	dir := filepath.Dir(f.Path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the secrets directory: %w", err)
	}
	data, err := json.MarshalIndent(fileFormat{Version: 1, Secrets: m}, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding secrets file: %w", err)
	}
	// CreateTemp makes the file 0600 before any byte is written, so the secret is
	// never readable by others, not even briefly.
	tmp, err := os.CreateTemp(dir, ".secrets-*.tmp")
	if err != nil {
		return fmt.Errorf("writing secrets file: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o600); err != nil && runtime.GOOS != "windows" {
		return fmt.Errorf("writing secrets file: %w", err)
	}
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		return fmt.Errorf("writing secrets file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("writing secrets file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing secrets file: %w", err)
	}
	if err := os.Rename(tmp.Name(), f.Path); err != nil {
		return fmt.Errorf("writing secrets file: %w", err)
	}
	committed = true
	syncDir(dir)
	return nil
}

// syncDir makes the rename durable. Best effort: not every platform can sync a
// directory, and the data itself is already synced.
func syncDir(dir string) {
	if runtime.GOOS == "windows" {
		return
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// checkPrivate refuses a file or directory that group or others can access. Windows
// has no such mode bits (ACLs instead), so nothing is checked there.
func checkPrivate(path string, isDir bool) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o077 == 0 {
		return nil
	}
	if isDir {
		return fmt.Errorf("the secrets file's directory %s can be accessed by other users (mode %v); run `chmod 700 %s` or choose a private directory",
			path, fi.Mode().Perm(), path)
	}
	return fmt.Errorf("secrets file %s can be read by other users (mode %v); run `chmod 600 %s` (and consider rotating the secrets in it)",
		path, fi.Mode().Perm(), path)
}
