package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestSecureHome: a home made by hand (0755, its files 0644) becomes private to
// the user, with the entries Nexus keeps in it, and each change is reported;
// entries already private, and what is not Nexus's, are left alone, and a missing
// home is not created.
func TestSecureHome(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("permission bits do not say who may read a file on Windows")
	}
	home := filepath.Join(t.TempDir(), "nexus")
	t.Setenv("HOME", t.TempDir()) // the home is not the user's own
	entries := []struct {
		path       string
		dir        bool
		mode, want fs.FileMode
	}{
		{"", true, 0o755, 0o700},
		{"config.json", false, 0o644, 0o600},
		{"audit.db", false, 0o644, 0o600},
		{"memory.db", false, 0o600, 0o600},
		{"audit.db-wal", false, 0o644, 0o600},
		{"notes.txt", false, 0o644, 0o644}, // not Nexus's: left alone
		{"run", true, 0o755, 0o700},
		{"run/4242", false, 0o644, 0o600},
		{"secrets", true, 0o700, 0o700},
		{"secrets/secrets.json", false, 0o600, 0o600},
	}
	for _, e := range entries {
		p := filepath.Join(home, e.path)
		var err error
		if e.dir {
			err = os.MkdirAll(p, 0o700)
		} else {
			err = os.WriteFile(p, []byte("x"), 0o600)
		}
		if err == nil {
			err = os.Chmod(p, e.mode) // not subject to the umask
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	changed, err := SecureHome(home)
	if err != nil {
		t.Fatal(err)
	}
	reported := map[string]bool{}
	for _, c := range changed {
		reported[c.Path] = true
	}
	for _, e := range entries {
		p := filepath.Join(home, e.path)
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().Perm(); got != e.want {
			t.Errorf("%s: mode %#o, want %#o", p, got, e.want)
		}
		if reported[p] != (e.mode != e.want) {
			t.Errorf("%s: reported %v, changed %v", p, reported[p], e.mode != e.want)
		}
	}

	missing := filepath.Join(t.TempDir(), "none")
	if changed, err := SecureHome(missing); err != nil || len(changed) != 0 {
		t.Errorf("a missing home: %v, %v", changed, err)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("SecureHome created a missing home")
	}
}

// TestSecureHomeIsTheUsersHome: NEXUS_HOME set to the user's own home directory
// narrows Nexus's entries there but not the directory, which other programs read.
func TestSecureHomeIsTheUsersHome(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("permission bits do not say who may read a file on Windows")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	cfg := filepath.Join(home, "config.json")
	if err := os.WriteFile(cfg, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	for p, mode := range map[string]fs.FileMode{home: 0o755, cfg: 0o644} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := SecureHome(home); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]fs.FileMode{home: 0o755, cfg: 0o600} {
		if info, err := os.Stat(p); err != nil || info.Mode().Perm() != want {
			t.Errorf("%s: %v, want %#o (%v)", p, info.Mode().Perm(), want, err)
		}
	}
}
