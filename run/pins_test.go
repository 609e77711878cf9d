package run

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/pins"
)

// TestServeRefusesUntrustedPins: serve does not start on a pin file that does
// not parse or whose hash is not its definition's: the error names the file and
// the line, and no client is served (so nothing of any server is listed).
func TestServeRefusesUntrustedPins(t *testing.T) {
	for _, tc := range []struct {
		name, pins, line string
	}{
		{"a broken line", "{\n  \"version\": 1,\n  \"servers\": {\n    \"fx\": {\"tools\": {,}}\n  }\n}\n", ":4:"},
		{"a hash that is not its definition's", "{\n  \"version\": 1,\n  \"servers\": {\n    \"fx\": {\"tools\": {\n      \"echo\": {\"sha256\": \"" + strings.Repeat("0", 64) + "\",\n        \"definition\": {\"name\": \"echo\"}}}}\n  }\n}\n", ":5:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			cfg, path := testConfig(t, home, child(t))
			if err := os.WriteFile(pins.Path(home), []byte(tc.pins), 0o600); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			err := Serve(context.Background(), ServeOptions{Env: testEnv(t, home, path), Config: cfg,
				Stdin: strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}` + "\n"), Stdout: &out})
			if err == nil || !strings.Contains(err.Error(), pins.Path(home)+tc.line) {
				t.Fatalf("serve: %v; want a refusal naming %s%s", err, pins.Path(home), tc.line)
			}
			if out.Len() > 0 {
				t.Fatalf("a client was answered: %s", out.String())
			}
		})
	}
}

// syncBuffer is a log a gateway's goroutines write while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSharedLayerServerNamed: a server a team layer brings, that this machine
// never listed, is named with what it runs when a gateway starts; once seen, it
// is not named again.
func TestSharedLayerServerNamed(t *testing.T) {
	home := t.TempDir()
	url := child(t)
	team := home + "/team.json"
	if err := os.WriteFile(team, []byte(`{"servers": {"fx": {"url": "`+url+`", "headers": {"X-Team": "${env:TEAM_TOKEN}"}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadLayers([]config.Layer{{Path: team, Shared: true}})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		var log syncBuffer
		e := testEnv(t, home, team)
		e.Logger = slog.New(slog.NewTextHandler(&log, nil))
		r, err := Build(context.Background(), cfg, e, Options{NoMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		named := strings.Contains(log.String(), "a config layer brings a server this machine has not run before") &&
			strings.Contains(log.String(), "url: "+url+"; headers: X-Team") && strings.Contains(log.String(), team)
		if named != want {
			t.Errorf("start %d: named %v, want %v; log:\n%s", i+1, named, want, log.String())
		}
	}
}
