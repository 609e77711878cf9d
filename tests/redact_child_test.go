package tests

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestChildValuesRedacted gives a child one value through ${env:...} and one as a
// literal under a secret-looking key, has it echo both (in a result, an error, on
// stderr), then has a failing child print them for `nexus doctor`; neither value may
// appear in anything a client, a log, doctor or a file under NEXUS_HOME holds.
func TestChildValuesRedacted(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("the failing child is a shell script")
	}
	b := make([]byte, 10)
	rand.Read(b)
	fromEnv := "envcanary-" + hex.EncodeToString(b)
	literal := "litcanary-" + hex.EncodeToString(b)
	h := newHome(t, map[string]any{
		"policy": map[string]any{"default": map[string]any{"allow": []string{"*"}}},
		"servers": map[string]any{
			"fx": fixtureWithEnv(filepath.Join(t.TempDir(), "calls.log"), map[string]string{"CANARY": "${env:CANARY_SRC}", "API_KEY": literal}),
		},
	})
	env := h.env("CANARY_SRC=" + fromEnv)
	var seen []string

	s := startSession(t, env, built.nexus, "serve")
	for _, tc := range []struct{ name, marker string }{{"CANARY", "[redacted:fx/env/CANARY]"}, {"API_KEY", "[redacted:fx/env/API_KEY]"}} {
		if got := s.call("fx__getenv", map[string]any{"name": tc.name}).text(); got != tc.marker {
			t.Errorf("getenv %s: got %q, want %q", tc.name, got, tc.marker)
		}
		if got := s.call("fx__getenv", map[string]any{"name": tc.name, "fail": true}); !got.IsError || !strings.Contains(got.text(), tc.marker) {
			t.Errorf("getenv %s failing: %+v", tc.name, got)
		}
	}
	eventually(t, 5*time.Second, "the child's stderr reaches the log", func() bool {
		return strings.Contains(s.stderr.String(), "fixture: API_KEY=[redacted:fx/env/API_KEY]")
	})
	s.close()
	s.mu.Lock()
	seen = append(seen, string(s.stdout), s.stderr.String())
	s.mu.Unlock()

	// A child that fails at start, printing both values on stderr: doctor's report
	// shows its stderr tail, redacted.
	h.writeConfig(map[string]any{"servers": map[string]any{"broken": map[string]any{
		"command": "sh", "args": []string{"-c", `echo "token=$TOK key=$API_KEY" >&2; exit 1`},
		"env": map[string]string{"TOK": "${env:CANARY_SRC}", "API_KEY": literal},
	}}})
	for _, args := range [][]string{{"doctor"}, {"doctor", "--json"}} {
		out, stderr, code := h.nexusEnv(env, args...)
		if code == 0 || !strings.Contains(out, "token=[redacted:broken/env/TOK] key=[redacted:broken/env/API_KEY]") {
			t.Errorf("%v: want the failing child's stderr tail, redacted: %d\n%s%s", args, code, out, stderr)
		}
		seen = append(seen, out, stderr)
	}

	files, _ := filepath.Glob(filepath.Join(h.dir, "*"))
	for _, f := range files {
		if filepath.Base(f) == "config.json" {
			continue // the literal is where the user wrote it
		}
		if data, err := os.ReadFile(f); err == nil {
			seen = append(seen, string(data)) // memory.db and its WAL included
		}
	}
	for i, text := range seen {
		for _, v := range []string{fromEnv, literal} {
			if strings.Contains(text, v) {
				t.Errorf("%s leaked (output %d):\n%s", v, i, text)
			}
		}
	}
}

// fixtureWithEnv is a config entry running the fixture with env added.
func fixtureWithEnv(callLog string, env map[string]string) map[string]any {
	e := map[string]string{"FIXTURE_CALL_LOG": callLog}
	for k, v := range env {
		e[k] = v
	}
	return map[string]any{"command": built.fixture, "env": e}
}
