package clients

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFormatVariants: the shapes a client's older or newer versions write are
// read and written as that version expects.
func TestFormatVariants(t *testing.T) {
	entry := NexusEntry("/opt/nexus", "")
	for _, tc := range []struct {
		name, file, body string
		format           Format
		// servers read from the file, as command + args
		servers map[string]string
		// after setup, the file holds each of these, and none of absent
		after, absent []string
	}{
		{name: "Zed before 0.194: command as an object", file: "settings.json", format: FormatZed,
			body:    `{"context_servers": {"pg": {"command": {"path": "npx", "args": ["-y", "pg"], "env": {}}, "settings": {}}}}`,
			servers: map[string]string{"pg": "npx -y pg"},
			after:   []string{`"nexus": {`, `"command": "/opt/nexus"`}},
		{name: "opencode 2: servers under mcp.servers, no enabled", file: "opencode.json", format: FormatOpencode,
			body:    `{"mcp": {"servers": {"fs": {"type": "local", "command": ["npx", "-y", "fs"]}}}}`,
			servers: map[string]string{"fs": "npx -y fs"},
			after:   []string{`"servers": {`, `"nexus": {`, `"type": "local"`, `"/opt/nexus",`},
			absent:  []string{`"enabled"`}},
		{name: "opencode 1: servers under mcp, enabled", file: "opencode.json", format: FormatOpencode,
			body:    `{"mcp": {"fs": {"type": "local", "command": ["npx", "-y", "fs"], "enabled": true}}}`,
			servers: map[string]string{"fs": "npx -y fs"},
			after:   []string{`"enabled": true`, `"/opt/nexus",`}},
		{name: "a new Continue file gets the keys Continue requires", file: "config.yaml", format: FormatContinue,
			after: []string{"name: Local Config\nversion: 1.0.0\nschema: v1\nmcpServers:\n  - name: nexus\n    command: /opt/nexus\n"}},
		{name: "a new Goose file", file: "config.yaml", format: FormatGoose,
			after: []string{"extensions:\n  nexus:\n    enabled: true\n", "    type: stdio\n    cmd: /opt/nexus\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), tc.file)
			if tc.body != "" {
				if err := os.WriteFile(file, []byte(tc.body), 0o600); err != nil {
					t.Fatal(err)
				}
				list, err := ReadServersAs(file, tc.format)
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]string{}
				for _, s := range list {
					if s.Err != nil {
						t.Fatalf("%s: %v", s.Original, s.Err)
					}
					got[s.Original] = strings.Join(append([]string{s.Server.Command}, s.Server.Args...), " ")
				}
				for name, want := range tc.servers {
					if got[name] != want {
						t.Errorf("%s runs %q, want %q", name, got[name], want)
					}
				}
			}
			if _, err := Setup(file, entry, SetupOptions{Format: tc.format}); err != nil {
				t.Fatal(err)
			}
			data, _ := os.ReadFile(file)
			for _, want := range tc.after {
				if !strings.Contains(string(data), want) {
					t.Errorf("the file lacks %q:\n%s", want, data)
				}
			}
			for _, no := range tc.absent {
				if strings.Contains(string(data), no) {
					t.Errorf("the file has %q:\n%s", no, data)
				}
			}
			if _, found, err := FindNexus(file, tc.format); !found || err != nil {
				t.Errorf("no Nexus entry found: %v", err)
			}
		})
	}
}

// TestDetectFormat: a client file given by its path is read in the format its
// name and keys say.
func TestDetectFormat(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		body string
		want Format
	}{
		"a.toml":          {"[mcp_servers.x]\ncommand = \"y\"\n", FormatCodex},
		"goose.yaml":      {"extensions:\n  x:\n    cmd: y\n", FormatGoose},
		"continue.yaml":   {"name: c\nmcpServers:\n  - name: x\n", FormatContinue},
		"zed.json":        {`{"context_servers": {}}`, FormatZed},
		"opencode.json":   {`{"$schema": "https://opencode.ai/config.json", "mcp": {}}`, FormatOpencode},
		"vscode.json":     {`{"servers": {}}`, FormatVSCode},
		"mcpservers.json": {`{"mcpServers": {}}`, FormatMCPServers},
	} {
		file := filepath.Join(dir, name)
		os.WriteFile(file, []byte(tc.body), 0o600)
		if got, err := DetectFormat(file); err != nil || got != tc.want {
			t.Errorf("%s: %q %v, want %q", name, got, err, tc.want)
		}
	}
}

// TestYAMLEntryInTheUsersLayout: a Nexus entry that already says what setup
// would write, in a layout of the user's, is left alone.
func TestYAMLEntryInTheUsersLayout(t *testing.T) {
	body := "extensions:\n  nexus: {enabled: true, name: nexus, timeout: 300, type: stdio, cmd: /opt/nexus, args: [serve]}\n"
	file := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(file, []byte(body), 0o600)
	res, err := Setup(file, NexusEntry("/opt/nexus", ""), SetupOptions{Format: FormatGoose})
	if err != nil || res.Changed {
		t.Errorf("setup: %+v %v", res, err)
	}
	assertFile(t, file, []byte(body))
}

// TestGooseBuiltinsAreNotServers: Goose's own extensions are not offered for
// import or a move, and stay in the file.
func TestGooseBuiltinsAreNotServers(t *testing.T) {
	body := "extensions:\n  developer:\n    enabled: true\n    name: developer\n    type: builtin\n  todo:\n    type: platform\n  fetch:\n    cmd: uvx\n    args: [mcp-server-fetch]\n    type: stdio\n"
	file := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(file, []byte(body), 0o600)
	list, err := ReadServersAs(file, FormatGoose)
	if err != nil || len(list) != 1 || list[0].Original != "fetch" || list[0].Err != nil {
		t.Fatalf("servers: %+v %v", list, err)
	}
	if _, err := Setup(file, NexusEntry("/opt/nexus", ""), SetupOptions{Format: FormatGoose, Move: []string{"fetch"}}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(file)
	if !strings.Contains(string(data), "  developer:\n") || !strings.Contains(string(data), "  todo:\n") || strings.Contains(string(data), "fetch") {
		t.Errorf("after the move:\n%s", data)
	}
}

// TestCRLFFilesStayCRLF: in a file whose lines end in CRLF, the lines setup adds
// do too, and setup again changes nothing.
func TestCRLFFilesStayCRLF(t *testing.T) {
	entry := NexusEntry("/opt/nexus", "")
	entry.Env = map[string]string{"PATH": "/bin"}
	for name, tc := range map[string]struct {
		body   string
		format Format
	}{
		"mcp.json":      {"{\r\n  \"mcpServers\": {\r\n    \"x\": {\"command\": \"y\"}\r\n  }\r\n}\r\n", FormatMCPServers},
		"config.toml":   {"model = \"o3\"\r\n\r\n[mcp_servers.x]\r\ncommand = \"y\"\r\n", FormatCodex},
		"goose.yaml":    {"extensions:\r\n  x:\r\n    cmd: y\r\n    type: stdio\r\n", FormatGoose},
		"continue.yaml": {"name: a\r\nmcpServers:\r\n  - name: x\r\n    command: y\r\n", FormatContinue},
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), name)
			os.WriteFile(file, []byte(tc.body), 0o600)
			if _, err := Setup(file, entry, SetupOptions{Format: tc.format}); err != nil {
				t.Fatal(err)
			}
			data, _ := os.ReadFile(file)
			if bare := strings.Count(string(data), "\n") - strings.Count(string(data), "\r\n"); bare != 0 || !strings.Contains(string(data), "/opt/nexus") {
				t.Errorf("%d lines end in LF alone:\n%q", bare, data)
			}
			if res, err := Setup(file, entry, SetupOptions{Format: tc.format}); err != nil || res.Changed {
				t.Errorf("setup again: %+v %v", res, err)
			}
		})
	}
}

// TestCodexRemoteServer: a Codex server reached by url keeps its headers, and
// its bearer_token_env_var becomes a header that reads the same variable.
func TestCodexRemoteServer(t *testing.T) {
	file := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(file, []byte("[mcp_servers.docs]\nurl = \"https://docs.example.com/mcp\"\nbearer_token_env_var = \"DOCS_TOKEN\"\nhttp_headers = { \"X-Team\" = \"platform\" }\n"), 0o600)
	list, err := ReadServersAs(file, FormatCodex)
	if err != nil || len(list) != 1 || list[0].Err != nil {
		t.Fatalf("%+v %v", list, err)
	}
	s := list[0].Server
	if s.URL != "https://docs.example.com/mcp" || s.Headers["Authorization"] != "Bearer ${env:DOCS_TOKEN}" || s.Headers["X-Team"] != "platform" {
		t.Errorf("server: %+v", s)
	}
}
