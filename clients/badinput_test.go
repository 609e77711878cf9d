package clients

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestUnparsableFileNamesTheLine: a client file that does not parse is refused
// with its name and the line to look at, and is never rewritten.
func TestUnparsableFileNamesTheLine(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
		format           Format
	}{
		{"settings.json", "{\n  \"context_servers\": {\n    \"a\": {\"command\": \"x\"}\n    \"b\": 1\n  }\n}\n", "settings.json:4: not valid JSON (line 4, column 5", FormatZed},
		{"config.toml", "model = \"o3\"\n\n[mcp_servers.a]\ncommand = \"x\nargs = []\n", "config.toml:4:", FormatCodex},
		{"config.yaml", "GOOSE_MODEL: o3\nextensions:\n\ta: 1\n", "config.yaml:3:", FormatGoose},
		{"config.yaml", "name: a\nmcpServers:\n  - name: x\n    command: [unclosed\n", "config.yaml:", FormatContinue},
	} {
		t.Run(string(tc.format), func(t *testing.T) {
			file := filepath.Join(t.TempDir(), tc.name)
			if err := os.WriteFile(file, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Setup(file, NexusEntry("/opt/nexus", ""), SetupOptions{Format: tc.format})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "nothing was changed") {
				t.Errorf("setup: %v, want %q", err, tc.want)
			}
			if _, err := ReadServersAs(file, tc.format); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("import: %v, want %q", err, tc.want)
			}
			assertFile(t, file, []byte(tc.body))
			assertBackups(t, file, 0)
		})
	}
}

// TestCodexReadsWhatTOMLMeans: multi-line strings and dotted keys are read as
// TOML means them: text in a string is never a table, and a server written
// with dotted keys is found (and left alone rather than misedited).
func TestCodexReadsWhatTOMLMeans(t *testing.T) {
	entry := NexusEntry("/opt/nexus", "codex")
	for _, tc := range []struct {
		name, body string
		want       string // the file after setup; "" when setup must refuse
		servers    []string
	}{
		{name: "a header inside a multi-line string",
			body:    "notes = '''\n[mcp_servers.nexus]\ncommand = \"/fake\"\n'''\n",
			want:    "notes = '''\n[mcp_servers.nexus]\ncommand = \"/fake\"\n'''\n\n[mcp_servers.nexus]\ncommand = \"/opt/nexus\"\nargs = [\"serve\", \"--agent\", \"codex\"]\n",
			servers: nil},
		{name: "a multi-line basic string command",
			body:    "[mcp_servers.nexus]\ncommand = \"\"\"/opt/nexus\"\"\"\nargs = [\"serve\", \"--agent\", \"codex\"]\n",
			want:    "[mcp_servers.nexus]\ncommand = \"\"\"/opt/nexus\"\"\"\nargs = [\"serve\", \"--agent\", \"codex\"]\n",
			servers: nil},
		{name: "a multi-line array with a comment",
			body:    "[mcp_servers.nexus]\ncommand = \"/old\"\nargs = [\n  \"serve\", # run the gateway\n  \"--log-level\", \"debug\",\n]\n",
			want:    "[mcp_servers.nexus]\ncommand = \"/opt/nexus\"\nargs = [\"serve\", \"--log-level\", \"debug\", \"--agent\", \"codex\"]\n",
			servers: []string{"nexus"}}, // /old is not Nexus until setup says so
		{name: "servers as dotted keys",
			body:    "mcp_servers.docs.command = \"npx\"\nmcp_servers.docs.args = [\"-y\", \"docs\"]\n",
			want:    "mcp_servers.docs.command = \"npx\"\nmcp_servers.docs.args = [\"-y\", \"docs\"]\n\n[mcp_servers.nexus]\ncommand = \"/opt/nexus\"\nargs = [\"serve\", \"--agent\", \"codex\"]\n",
			servers: []string{"docs"}},
		{name: "the Nexus server as dotted keys is refused",
			body:    "[mcp_servers]\nnexus.command = \"/old\"\nnexus.args = [\"serve\"]\n",
			servers: []string{"nexus"}},
		{name: "the Nexus server as an inline table is refused",
			body:    "[mcp_servers]\nnexus = { command = \"/old\", args = [\"serve\"] }\n",
			servers: []string{"nexus"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "config.toml")
			if err := os.WriteFile(file, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			list, err := ReadServersAs(file, FormatCodex)
			if err != nil {
				t.Fatal(err)
			}
			if got := originals(list); strings.Join(got, ",") != strings.Join(tc.servers, ",") {
				t.Errorf("servers %v, want %v", got, tc.servers)
			}
			_, err = Setup(file, entry, SetupOptions{Format: FormatCodex})
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), "nothing was changed") {
					t.Errorf("accepted: %v", err)
				}
				assertFile(t, file, []byte(tc.body))
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			assertFile(t, file, []byte(tc.want))
		})
	}
}

// TestReadOnlyFileIsLeftAlone: a file the user made read-only is not replaced,
// and the error says how to go on.
func TestReadOnlyFileIsLeftAlone(t *testing.T) {
	if runtime.GOOS == "windows" || os.Getuid() == 0 {
		t.Skip("needs POSIX permissions and a user other than root")
	}
	file := filepath.Join(t.TempDir(), "mcp.json")
	body := []byte(`{"mcpServers": {}}` + "\n")
	if err := os.WriteFile(file, body, 0o444); err != nil {
		t.Fatal(err)
	}
	_, err := Setup(file, NexusEntry("/opt/nexus", ""), SetupOptions{})
	if err == nil || !strings.Contains(err.Error(), "read-only") || !strings.Contains(err.Error(), "chmod u+w") {
		t.Errorf("setup: %v", err)
	}
	assertFile(t, file, body)
	assertBackups(t, file, 0)
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o444 {
		t.Errorf("mode %v", st.Mode())
	}
}

// TestSymlinkedFileKeepsItsLink: setup edits the file a link points to (often a
// dotfiles repository) and the link stays a link; undo restores the target.
func TestSymlinkedFileKeepsItsLink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "dotfiles", "mcp.json")
	link := filepath.Join(dir, "home", "mcp.json")
	os.MkdirAll(filepath.Dir(target), 0o700)
	os.MkdirAll(filepath.Dir(link), 0o700)
	body := []byte("{\n  \"mcpServers\": {}\n}\n")
	if err := os.WriteFile(target, body, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	res, err := Setup(link, NexusEntry("/opt/nexus", ""), SetupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", st.Mode(), err)
	}
	if data, _ := os.ReadFile(target); !strings.Contains(string(data), "/opt/nexus") {
		t.Errorf("the target was not edited:\n%s", data)
	}
	if res.Backup == "" {
		t.Error("no backup")
	}
	if _, err := Undo(link, false); err != nil {
		t.Fatal(err)
	}
	assertFile(t, target, body)
	if st, _ := os.Lstat(link); st.Mode()&os.ModeSymlink == 0 {
		t.Error("undo replaced the link")
	}
}

// TestFileChangedWhileEditing: a file another program writes between Nexus's
// read and its write keeps the other program's content.
func TestFileChangedWhileEditing(t *testing.T) {
	file := filepath.Join(t.TempDir(), "mcp.json")
	os.WriteFile(file, []byte(`{"mcpServers": {}}`), 0o600)
	f, err := readClientFile(file)
	if err != nil {
		t.Fatal(err)
	}
	theirs := []byte(`{"mcpServers": {"theirs": {"command": "x"}}}`)
	os.WriteFile(file, theirs, 0o600)
	if _, err := f.write([]byte(`{"mcpServers": {"nexus": {}}}`), time.Time{}); err == nil || !strings.Contains(err.Error(), "changed while Nexus was editing it") {
		t.Errorf("write: %v", err)
	}
	assertFile(t, file, theirs)
	assertBackups(t, file, 0)
}

// TestUndoRefusesAChangedFile: undo does not restore over changes made since
// setup, and says where the backup is.
func TestUndoRefusesAChangedFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "mcp.json")
	os.WriteFile(file, []byte(`{"mcpServers": {}}`), 0o600)
	res, err := Setup(file, NexusEntry("/opt/nexus", ""), SetupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	edited := []byte(`{"mcpServers": {"mine": {"command": "x"}}}`)
	os.WriteFile(file, edited, 0o600)
	if _, err := Undo(file, false); err == nil || !strings.Contains(err.Error(), "changed since") || !strings.Contains(err.Error(), res.Backup) {
		t.Errorf("undo: %v", err)
	}
	assertFile(t, file, edited)
	assertBackups(t, file, 1)

	if _, err := Undo(filepath.Join(t.TempDir(), "none.json"), false); err == nil || !strings.Contains(err.Error(), "no backup") {
		t.Errorf("undo without a backup: %v", err)
	}
}

// TestUndoGoesBackOneSetupAtATime: two setups, two undos, the original.
func TestUndoGoesBackOneSetupAtATime(t *testing.T) {
	file := filepath.Join(t.TempDir(), "mcp.json")
	orig := []byte("{\n  \"mcpServers\": {}\n}\n")
	os.WriteFile(file, orig, 0o600)
	if _, err := Setup(file, NexusEntry("/opt/nexus", ""), SetupOptions{Now: time.Unix(10, 0)}); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(file)
	if _, err := Setup(file, NexusEntry("/opt/nexus", "coder"), SetupOptions{Now: time.Unix(10, 0)}); err != nil {
		t.Fatal(err)
	}
	assertBackups(t, file, 2)
	dry, err := Undo(file, true)
	if err != nil || dry.Written || !strings.Contains(dry.Diff, "-") {
		t.Fatalf("dry undo: %+v %v", dry, err)
	}
	if _, err := Undo(file, false); err != nil {
		t.Fatal(err)
	}
	assertFile(t, file, first)
	if _, err := Undo(file, false); err != nil {
		t.Fatal(err)
	}
	assertFile(t, file, orig)
}

// TestNewFileCreatedMeanwhile: a file that did not exist when Nexus read it,
// and that another program made before Nexus wrote, is not overwritten.
func TestNewFileCreatedMeanwhile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "mcp.json")
	f, err := readClientFile(file)
	if err != nil {
		t.Fatal(err)
	}
	theirs := []byte(`{"mcpServers": {"theirs": {"command": "x"}}}`)
	os.WriteFile(file, theirs, 0o600)
	if _, err := f.write([]byte(`{}`), time.Time{}); err == nil || !strings.Contains(err.Error(), "changed while Nexus was editing it") {
		t.Errorf("write: %v", err)
	}
	assertFile(t, file, theirs)
}

// TestDanglingLinkIsKept: a link to a file not made yet gets the file where it
// points, and stays a link.
func TestDanglingLinkIsKept(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "mcp.json")
	if err := os.Symlink("dotfiles-mcp.json", link); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	if _, err := Setup(link, NexusEntry("/opt/nexus", ""), SetupOptions{}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v", err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "dotfiles-mcp.json")); err != nil || !strings.Contains(string(data), "/opt/nexus") {
		t.Errorf("the target: %s %v", data, err)
	}
}
