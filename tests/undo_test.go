package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSetupPreviewBackupUndo: on a YAML client (Goose), setup --dry-run prints the
// diff and writes nothing, setup says where the backup went, setup again changes
// nothing, and setup --undo gives the file back byte for byte, then says there
// is nothing left to undo.
func TestSetupPreviewBackupUndo(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	path := clPlace(t, h, "goose", "")
	original := "# mine\nGOOSE_PROVIDER: anthropic\nextensions:\n  developer:\n    enabled: true\n    name: developer\n    type: builtin\n"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(original), 0o600); err != nil {
		t.Fatal(err)
	}

	out, stderr, code := h.nexusEnv(clEnv(h), "setup", "goose", "--dry-run")
	if code != 0 || !strings.Contains(out, "--- "+path) || !strings.Contains(out, "+  nexus:") || !strings.Contains(out, "dry run: nothing was written") {
		t.Fatalf("setup --dry-run: %d\n%s%s", code, out, stderr)
	}
	if clRead(t, path) != original || len(clBackups(t, path)) != 0 {
		t.Fatal("--dry-run changed the file or made a backup")
	}

	out, stderr, code = h.nexusEnv(clEnv(h), "setup", "goose", "--agent", "goose")
	backups := clBackups(t, path)
	if code != 0 || len(backups) != 1 || !strings.Contains(out, "backup of the original: "+backups[0]) {
		t.Fatalf("setup: %d %v\n%s%s", code, backups, out, stderr)
	}
	if out, _, code := h.nexusEnv(clEnv(h), "setup", "goose"); code != 0 || !strings.Contains(out, "already runs Nexus") || len(clBackups(t, path)) != 1 {
		t.Errorf("setup again: %d\n%s", code, out)
	}

	out, stderr, code = h.nexusEnv(clEnv(h), "setup", "goose", "--undo")
	if code != 0 || !strings.Contains(out, "restored "+path+" from "+backups[0]) {
		t.Fatalf("setup --undo: %d\n%s%s", code, out, stderr)
	}
	if clRead(t, path) != original || len(clBackups(t, path)) != 0 {
		t.Errorf("after undo:\n%s", clRead(t, path))
	}
	if _, stderr, code := h.nexusEnv(clEnv(h), "setup", "goose", "--undo"); code == 0 || !strings.Contains(stderr, "no backup to restore") {
		t.Errorf("undo with nothing to undo: %d %s", code, stderr)
	}
}
