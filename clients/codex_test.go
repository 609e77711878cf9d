package clients

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSetupCodex(t *testing.T) {
	entry := NexusEntry("/opt/nexus", "codex")
	entry.Env = map[string]string{"PATH": "/usr/bin:/opt/bin"}
	tests := []struct {
		name, before, entryArgs, want string
	}{
		{name: "new file", before: "", want: "[mcp_servers.nexus]\ncommand = \"/opt/nexus\"\nargs = [\"serve\", \"--agent\", \"codex\"]\n\n[mcp_servers.nexus.env]\nPATH = \"/usr/bin:/opt/bin\"\n"},
		{name: "other keys kept",
			before: "# my settings\nmodel = \"o3\"\n\n[mcp_servers.docs]\ncommand = \"npx\"\nargs = [\"-y\", \"docs\"]\n",
			want:   "# my settings\nmodel = \"o3\"\n\n[mcp_servers.docs]\ncommand = \"npx\"\nargs = [\"-y\", \"docs\"]\n\n[mcp_servers.nexus]\ncommand = \"/opt/nexus\"\nargs = [\"serve\", \"--agent\", \"codex\"]\n\n[mcp_servers.nexus.env]\nPATH = \"/usr/bin:/opt/bin\"\n"},
		{name: "the user's flags and env kept, PATH merged",
			before: "[mcp_servers.nexus]\ncommand = \"/old/nexus\" # moved\nargs = [\n  \"serve\",\n  \"--log-level\", \"debug\",\n]\nstartup_timeout_sec = 20\n\n[mcp_servers.nexus.env]\nFOO = 'bar'\nPATH = \"/home/me/bin\"\n\n[profiles.x]\nmodel = \"y\"\n",
			want:   "[mcp_servers.nexus]\ncommand = \"/opt/nexus\" # moved\nargs = [\"serve\", \"--log-level\", \"debug\", \"--agent\", \"codex\"]\nstartup_timeout_sec = 20\n\n[mcp_servers.nexus.env]\nFOO = 'bar'\nPATH = \"/home/me/bin:/usr/bin:/opt/bin\"\n\n[profiles.x]\nmodel = \"y\"\n"},
		{name: "inline env",
			before: "[mcp_servers.nexus]\ncommand = \"/opt/nexus\"\nargs = [\"serve\", \"--agent\", \"codex\"]\nenv = { FOO = \"bar\" }\n",
			want:   "[mcp_servers.nexus]\ncommand = \"/opt/nexus\"\nargs = [\"serve\", \"--agent\", \"codex\"]\nenv = { FOO = \"bar\", PATH = \"/usr/bin:/opt/bin\" }\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), ".codex", "config.toml")
			if tc.before != "" {
				os.MkdirAll(filepath.Dir(file), 0o700)
				os.WriteFile(file, []byte(tc.before), 0o600)
			}
			res, err := Setup(file, entry, SetupOptions{Format: FormatCodex, Now: time.Unix(0, 0)})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(file)
			if string(got) != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
			if (tc.before != "") != (res.Backup != "") {
				t.Errorf("backup %q for a file that existed: %v", res.Backup, tc.before != "")
			}
			// Again: nothing changes, no backup.
			again, err := Setup(file, NexusEntry("/opt/nexus", ""), SetupOptions{Format: FormatCodex})
			if err != nil || again.Changed || again.Backup != "" {
				t.Errorf("setup again: %+v %v", again, err)
			}
			doc, err := parseCodex(file, got)
			if err != nil {
				t.Fatal(err)
			}
			if e, ok, err := doc.codexEntry("nexus"); err != nil || !ok || e.Command != "/opt/nexus" || !strings.Contains(strings.Join(e.Args, " "), "--agent codex") || e.Env["PATH"] == "" {
				t.Errorf("codexEntry: %+v %v", e, ok)
			}
		})
	}
}

// TestSetupCodexRefusesWhatItCannotRead: a value of a type Nexus does not
// expect is refused, and the file is left alone, rather than replaced.
func TestSetupCodexRefusesWhatItCannotRead(t *testing.T) {
	for _, body := range []string{
		"[mcp_servers.nexus]\ncommand = \"/opt/nexus\"\nargs = [\"serve\", 3]\n",
		"[mcp_servers.nexus]\ncommand = \"/opt/nexus\"\nargs = [\"serve\"]\nenv = { N = 3 }\n",
	} {
		file := filepath.Join(t.TempDir(), "config.toml")
		os.WriteFile(file, []byte(body), 0o600)
		if _, err := Setup(file, NexusEntry("/opt/nexus", "codex"), SetupOptions{}); err == nil || !strings.Contains(err.Error(), "Nexus can read") {
			t.Errorf("%q: %v", body, err)
		}
		if got, _ := os.ReadFile(file); string(got) != body {
			t.Errorf("the file changed:\n%s", got)
		}
	}
}
