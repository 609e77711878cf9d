package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCommandTTLFile(t *testing.T) {
	path := CommandTTLFile(t.TempDir())
	if got, err := ReadCommandTTL(path); err != nil || len(got) != 0 {
		t.Fatalf("missing file: %v %v", got, err)
	}
	if err := WriteCommandTTL(path, map[string]string{"files.*": "5m", "kg.summary": "never"}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode: %v %v", fi, err)
	}
	raw, err := ReadCommandTTL(path)
	if err != nil {
		t.Fatal(err)
	}
	ttl, err := ParseCommandTTL(raw)
	if err != nil || ttl["files.*"].D != 5*time.Minute || !ttl["kg.summary"].Never {
		t.Fatalf("read back: %v %v", ttl, err)
	}
	for _, bad := range []map[string]string{{"files": "5m"}, {"files.*": "soon"}, {"files.*": "0"}, {"a*b": "5m"}} {
		if _, err := ParseCommandTTL(bad); err == nil {
			t.Errorf("ParseCommandTTL(%v) = nil", bad)
		}
	}
	if err := os.WriteFile(path, []byte(`{"files.*": 5}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCommandTTL(path); err == nil || !strings.Contains(err.Error(), filepath.Base(path)) {
		t.Errorf("a file that is not strings: %v", err)
	}
}
