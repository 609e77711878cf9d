package clients

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/config"
)

// osLayouts are a home directory and environment per OS, for Known.
var osLayouts = []struct {
	goos, home string
	env        map[string]string
}{
	{"linux", "/home/me", nil},
	{"darwin", "/Users/me", nil},
	{"windows", `C:\Users\me`, map[string]string{"APPDATA": `C:\Users\me\AppData\Roaming`}},
}

// sampleFile is the realistic config file of testdata/roundtrip for a client:
// as its docs show it, with comments where the format has them and servers of
// its own (one with a token).
func sampleFile(t *testing.T, c Client) []byte {
	t.Helper()
	ext := ".json"
	switch c.Format {
	case FormatCodex:
		ext = ".toml"
	case FormatGoose, FormatContinue:
		ext = ".yaml"
	}
	data, err := os.ReadFile(filepath.Join("testdata", "roundtrip", c.Name+ext))
	if err != nil {
		t.Fatalf("no sample file for %s: %v", c.Name, err)
	}
	return data
}

// underRoot maps a client's path on goos into root, keeping its layout below the
// home directory: the files of every OS are then tested on this one.
func underRoot(root, home, p string) string {
	rel := strings.TrimPrefix(p, home)
	return filepath.Join(root, filepath.FromSlash(strings.ReplaceAll(rel, `\`, "/")))
}

// TestRoundTrip: for every client, on the path layout of each OS, from the
// client's own file: a dry run prints the diff and changes nothing; setup adds
// Nexus and keeps the rest; setup again changes nothing and makes no backup;
// undo gives the original back byte for byte; and every server moves behind
// Nexus, its token to the store.
func TestRoundTrip(t *testing.T) {
	entry := NexusEntry("/opt/nexus/bin/nexus", "coder")
	entry.Env = map[string]string{"PATH": "/usr/local/bin:/usr/bin"}
	for _, layout := range osLayouts {
		getenv := func(k string) string { return layout.env[k] }
		for _, c := range Known(layout.goos, layout.home, getenv) {
			t.Run(layout.goos+"/"+c.Name, func(t *testing.T) {
				root := t.TempDir()
				file := underRoot(root, layout.home, c.Path)
				orig := sampleFile(t, c)
				if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, orig, 0o600); err != nil {
					t.Fatal(err)
				}
				before, err := ReadServersAs(file, c.Format)
				if err != nil {
					t.Fatal(err)
				}
				if len(before) < 2 {
					t.Fatalf("the sample has %d servers", len(before))
				}

				// --dry-run: the diff, nothing written.
				dry, err := Setup(file, entry, SetupOptions{Format: c.Format, DryRun: true})
				if err != nil {
					t.Fatal(err)
				}
				if !dry.Changed || !strings.Contains(dry.Diff, "+") || !strings.Contains(dry.Diff, "/opt/nexus/bin/nexus") {
					t.Errorf("dry run diff:\n%s", dry.Diff)
				}
				if strings.Contains(dry.Diff, "ghp_example") {
					t.Error("the diff shows a token")
				}
				assertFile(t, file, orig)
				assertBackups(t, file, 0)

				// setup: Nexus in, the rest kept.
				res, err := Setup(file, entry, SetupOptions{Format: c.Format, Now: time.Unix(1, 0)})
				if err != nil {
					t.Fatal(err)
				}
				if res.Backup == "" || !res.Changed {
					t.Errorf("setup: %+v", res)
				}
				got, found, err := FindNexus(file, c.Format)
				if err != nil || !found || got.Command != entry.Command || !slices.Equal(got.Args, []string{"serve", "--agent", "coder"}) || got.Env["PATH"] == "" {
					t.Errorf("the Nexus entry: %+v %v %v", got, found, err)
				}
				after, err := ReadServersAs(file, c.Format)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(originals(after), originals(before)) {
					t.Errorf("servers after setup %v, before %v", originals(after), originals(before))
				}
				written, _ := os.ReadFile(file)
				if c.Format != FormatMCPServers && c.Format != FormatCopilot {
					// Formats with comments keep them.
					for _, line := range strings.Split(string(orig), "\n") {
						if l := strings.TrimSpace(line); (strings.HasPrefix(l, "//") || strings.HasPrefix(l, "#")) && !strings.Contains(string(written), l) {
							t.Errorf("comment %q lost:\n%s", l, written)
						}
					}
				}

				// setup again: nothing to change, no new backup.
				again, err := Setup(file, entry, SetupOptions{Format: c.Format, Now: time.Unix(2, 0)})
				if err != nil || again.Changed || again.Backup != "" {
					t.Errorf("setup again: %+v %v", again, err)
				}
				assertFile(t, file, written)
				assertBackups(t, file, 1)

				// --undo: the original, byte for byte.
				undo, err := Undo(file, false)
				if err != nil || !undo.Written {
					t.Fatalf("undo: %+v %v", undo, err)
				}
				assertFile(t, file, orig)
				assertBackups(t, file, 0)

				// import: each server moves behind Nexus, the token to the store.
				f := newConnectFixture(t, nil)
				f.client = file
				cfg, cfgErr := config.Load([]string{f.personal}, map[string]bool{f.personal: true})
				var move []string
				for _, s := range before {
					if s.Err == nil {
						move = append(move, s.Original)
					}
				}
				conn, err := f.imp.Connect(context.Background(), file, entry,
					ConnectOptions{Format: c.Format, Move: move, Config: cfg, ConfigErr: cfgErr})
				if err != nil {
					t.Fatal(err)
				}
				srv := f.nexusServers(t)
				for _, s := range before {
					if s.Err != nil {
						t.Errorf("%s cannot be imported: %v", s.Original, s.Err)
						continue
					}
					if srv[s.Name] == nil {
						t.Errorf("%s was not moved: %+v", s.Original, conn)
					}
				}
				if gh := srv["github"]; gh != nil {
					if v, err := f.store.Get(context.Background(), "github/env/GITHUB_PERSONAL_ACCESS_TOKEN"); err != nil || v != "ghp_exampleexampleexample" {
						t.Errorf("the token in the store: %q %v", v, err)
					}
				} else {
					t.Error("github was not moved")
				}
				left, err := ReadServersAs(file, c.Format)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range left {
					if slices.Contains(move, s.Original) {
						t.Errorf("%s is still in the client", s.Original)
					}
				}
				if _, found, _ := FindNexus(file, c.Format); !found {
					t.Error("no Nexus entry after the move")
				}
			})
		}
	}
}

func assertFile(t *testing.T, file string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is\n%s\nwant\n%s", file, got, want)
	}
}

func assertBackups(t *testing.T, file string, n int) {
	t.Helper()
	backups, err := Backups(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(backups) != n {
		t.Errorf("%d backups, want %d: %v", len(backups), n, backups)
	}
}
