package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestFilePermissions(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows uses ACLs, not mode bits")
	}
	dir := filepath.Join(t.TempDir(), "secrets")
	f := &File{Path: filepath.Join(dir, "secrets.json")}
	if err := f.Set(context.Background(), "a/B", "value"); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, f.Path: 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s has mode %v, want %v", path, got, want)
		}
	}

	// A file others can read is refused, with the fix.
	if err := os.Chmod(f.Path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Get(context.Background(), "a/B"); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("Get of a world-readable file: %v, want a refusal saying chmod 600", err)
	}
	os.Chmod(f.Path, 0o600)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := f.Set(context.Background(), "a/B", "v2"); err == nil || !strings.Contains(err.Error(), "chmod 700") {
		t.Errorf("Set in an open directory: %v, want a refusal saying chmod 700", err)
	}
	os.Chmod(dir, 0o700)
}

func TestFileAtomic(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "private")
	f := &File{Path: filepath.Join(dir, "secrets.json")}
	for _, n := range []string{"a/A", "b/B", "c/C"} {
		if err := f.Set(ctx, n, "value of "+n); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Delete(ctx, "b/B"); err != nil {
		t.Fatal(err)
	}
	// No temporary file is left behind, and the file is whole, versioned JSON.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only secrets.json: %v", len(entries), entries)
	}
	data, err := os.ReadFile(f.Path)
	if err != nil {
		t.Fatal(err)
	}
	var ff fileFormat
	if err := json.Unmarshal(data, &ff); err != nil || ff.Version != 1 || len(ff.Secrets) != 2 {
		t.Fatalf("file = %s (%v)", data, err)
	}
	// The rename replaces the inode: a reader holding the old file never sees a
	// half-written new one.
	before, _ := os.Stat(f.Path)
	if err := f.Set(ctx, "d/D", "v"); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(f.Path)
	if os.SameFile(before, after) {
		t.Error("Set rewrote the file in place; want a new file renamed over it")
	}
	names, err := f.Names(ctx)
	if err != nil || strings.Join(names, ",") != "a/A,c/C,d/D" {
		t.Errorf("Names = %v, %v", names, err)
	}
}

func TestFileCorrupt(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "private")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	f := &File{Path: filepath.Join(dir, "secrets.json")}
	if err := os.WriteFile(f.Path, []byte(`{"version":1,"secrets":{"a/B":`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := f.Get(ctx, "a/B")
	if err == nil || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "corrupt") || !strings.Contains(err.Error(), f.Path) {
		t.Fatalf("Get from a corrupt file: %v, want an error naming the file as corrupt", err)
	}
	// Set must not overwrite what it could not read.
	if err := f.Set(ctx, "a/B", "v"); err == nil {
		t.Fatal("Set over a corrupt file succeeded, losing its contents")
	}
	if data, _ := os.ReadFile(f.Path); !strings.HasSuffix(string(data), `"a/B":`) {
		t.Errorf("the corrupt file was changed: %s", data)
	}

	if err := os.WriteFile(f.Path, []byte(`{"version":2,"secrets":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Get(ctx, "a/B"); err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Errorf("Get from a newer file: %v", err)
	}
}
