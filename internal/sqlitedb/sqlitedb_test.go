package sqlitedb

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestOpen: the file and its directory are created private to the user,
// and every connection has the pragmas Open promises.
func TestOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "home", "x.db")
	db, err := Open(path, 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (x)`); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"synchronous", "1"}, // NORMAL
		{"busy_timeout", "1500"},
		{"temp_store", "2"}, // MEMORY
		{"cache_size", "-8192"},
	} {
		var got string
		if err := db.QueryRowContext(ctx, "PRAGMA "+tt.pragma).Scan(&got); err != nil {
			t.Fatalf("PRAGMA %s: %v", tt.pragma, err)
		}
		if got != tt.want {
			t.Errorf("PRAGMA %s = %s, want %s", tt.pragma, got, tt.want)
		}
	}
	if runtime.GOOS == "windows" {
		return
	}
	for _, tt := range []struct {
		path string
		want os.FileMode
	}{
		{path, FileMode},
		{path + "-wal", FileMode},
		{filepath.Dir(path), DirMode},
	} {
		fi, err := os.Stat(tt.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != tt.want {
			t.Errorf("%s: mode %o, want %o", filepath.Base(tt.path), got, tt.want)
		}
	}
}

func TestOpenRejectsQueryCharacters(t *testing.T) {
	for _, name := range []string{"a?mode=ro", "a#b"} {
		if _, err := Open(filepath.Join(t.TempDir(), name), time.Second); err == nil || !strings.Contains(err.Error(), "not supported") {
			t.Errorf("Open(%q) = %v, want an error", name, err)
		}
	}
}
