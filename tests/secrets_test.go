package tests

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/secrets"

	"github.com/nexus-mcp/nexus/internal/skips"
)

// realKeychain skips outside a keychain session (go test -v shows why), and fails
// when the run asked for a keychain: .ci/run sets NEXUS_REQUIRE_KEYCHAIN=1, so a
// broken session cannot turn these tests into silent skips. The requirement is the
// project's own variable, not CI, which every hosted runner sets.
func realKeychain(t *testing.T) {
	t.Helper()
	if os.Getenv("NEXUS_TEST_KEYRING") != "1" {
		if os.Getenv("NEXUS_REQUIRE_KEYCHAIN") == "1" {
			t.Fatal("NEXUS_REQUIRE_KEYCHAIN=1 but no keychain session: run the tests inside .ci/keyring-session (it sets NEXUS_TEST_KEYRING=1)")
		}
		skips.Need(t, "a keychain", "run under .ci/keyring-session, which sets NEXUS_TEST_KEYRING=1", "needs a Secret Service: run under .ci/keyring-session (sets NEXUS_TEST_KEYRING=1)")
	}
}

func (h *home) nexusEnv(env []string, args ...string) (stdout, stderr string, code int) {
	h.t.Helper()
	cmd := exec.Command(built.nexus, args...)
	cmd.Env = withRace(env)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		h.t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// TestSecretCanary passes a secret with --env, has the child echo it in a result, in
// an error and on stderr, and checks that it appears nowhere a user or a file could
// see it.
func TestSecretCanary(t *testing.T) {
	realKeychain(t)
	b := make([]byte, 12)
	rand.Read(b)
	canary := "canary-" + hex.EncodeToString(b)
	h := newHome(t, map[string]any{"policy": map[string]any{"default": map[string]any{"allow": []string{"*"}}}})
	var seen []string // every output to search
	record := func(parts ...string) { seen = append(seen, parts...) }

	out, stderr, code := h.nexus("add", "fx", "--command", built.fixture, "--env", "CANARY="+canary, "--plain-env", "FIXTURE_CALL_LOG="+h.log)
	if code != 0 {
		t.Fatalf("add: %s", stderr)
	}
	record(out, stderr)

	s := h.serveStdio()
	marker := "[redacted:fx/env/CANARY]"
	if got := s.call("fx__getenv", map[string]any{"name": "CANARY"}).text(); got != marker {
		t.Errorf("the child's echo of the secret should reach the client redacted, got %q", got)
	}
	if got := s.call("fx__getenv", map[string]any{"name": "CANARY", "fail": true}); !got.IsError || !strings.Contains(got.text(), marker) {
		t.Errorf("an error text carrying the secret: %+v", got)
	}
	if got := s.call("fx__getenv", map[string]any{"name": "CANARY"}); got.cacheStatus() != "hit" || got.text() != marker {
		t.Errorf("the remembered answer: %+v", got)
	}
	eventually(t, 5*time.Second, "the child's stderr line reaches the log", func() bool {
		return strings.Contains(s.stderr.String(), "fixture: CANARY="+marker)
	})
	s.close()
	s.mu.Lock()
	record(string(s.stdout), s.stderr.String())
	s.mu.Unlock()

	for _, args := range [][]string{
		{"call", "fx.getenv", "--args", `{"name":"CANARY"}`},
		{"call", "fx.getenv", "--args", `{"name":"CANARY","fail":true}`, "--no-memory"},
		{"list-servers"}, {"list-servers", "--json"}, {"list-tools"}, {"secrets", "list"}, {"cache", "list", "--json"},
	} {
		out, stderr, _ := h.nexus(args...)
		record(out, stderr)
	}
	files, _ := filepath.Glob(filepath.Join(h.dir, "*"))
	for _, f := range files {
		if data, err := os.ReadFile(f); err == nil {
			record(string(data))
		}
	}
	for i, text := range seen {
		if strings.Contains(text, canary) {
			t.Errorf("the canary leaked (output %d):\n%s", i, text)
		}
	}

	if _, stderr, code := h.nexus("remove", "fx"); code != 0 {
		t.Fatalf("remove: %s", stderr)
	}
	kr := &secrets.Keyring{}
	if _, err := kr.Get(context.Background(), "fx/env/CANARY"); !errors.Is(err, secrets.ErrNotFound) {
		t.Errorf("nexus remove left the keychain item behind: %v", err)
	}
}

// TestNoKeychain: with the Secret Service unreachable, a secret cannot be stored; the
// command fails fast, says what to do, and writes nothing.
func TestNoKeychain(t *testing.T) {
	h := newHome(t, nil)
	noBus := []string{"NEXUS_HOME=" + h.dir, "PATH=" + os.Getenv("PATH"), "HOME=" + h.dir, "DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent"}
	start := time.Now()
	_, stderr, code := h.nexusEnv(noBus, "add", "fx", "--command", built.fixture, "--env", "TOKEN=abcdefgh")
	if code == 0 || !strings.Contains(stderr, "--insecure-file-store") || !strings.Contains(stderr, "nothing was written") {
		t.Errorf("want a clear refusal, got %d:\n%s", code, stderr)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the refusal took %s: it should be fast", took)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "config.json")); !os.IsNotExist(err) {
		t.Errorf("the config was written: %v", err)
	}

	// Opting in keeps the value in a private file, with a warning, and never in config.
	_, stderr, code = h.nexusEnv(noBus, "--insecure-file-store", "add", "fx", "--command", built.fixture, "--env", "TOKEN=abcdefgh")
	if code != 0 || !strings.Contains(stderr, "plain file") {
		t.Fatalf("with --insecure-file-store: %d\n%s", code, stderr)
	}
	cfg, _ := os.ReadFile(filepath.Join(h.dir, "config.json"))
	if strings.Contains(string(cfg), "abcdefgh") || !strings.Contains(string(cfg), "${keyring:fx/env/TOKEN}") {
		t.Errorf("config: %s", cfg)
	}
	fi, err := os.Stat(filepath.Join(h.dir, "secrets", "secrets.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("secrets file: %v %v", fi, err)
	}
}
