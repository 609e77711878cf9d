package catalog

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nexus-mcp/nexus/config"
)

// sampleValue returns a plausible value for v, so every entry can be installed.
func sampleValue(v Value) string {
	switch {
	case v.Name == "url":
		return "https://kg.example.com/mcp"
	case v.List == ListPaths:
		return "/srv/a" + string(filepath.ListSeparator) + "/srv/b"
	case v.List == ListWords:
		return `/opt/kg/bin/code-kg-mcp --stdio "--label=two words"`
	case v.Secret:
		return "s3cr3t-" + strings.ToLower(v.Name)
	default:
		return "/some/" + strings.ToLower(v.Name)
	}
}

func TestBuiltinEntriesInstall(t *testing.T) {
	c, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"code-kg", "doc-kg", "code-kg-sample", "doc-kg-sample", "memory", "filesystem", "github", "fetch", "postgres", "everything", "git"} {
		if _, ok := c.Get(want); !ok {
			t.Errorf("builtin catalog lacks %q", want)
		}
	}
	for _, e := range c.List() {
		t.Run(e.Name, func(t *testing.T) {
			if e.Source != BuiltinSource {
				t.Errorf("Source = %q", e.Source)
			}
			all := map[string]string{}
			for _, v := range e.Values {
				all[v.Name] = sampleValue(v)
			}
			inst, err := e.Install(e.Name, all, "/usr/local/bin/nexus")
			if err != nil {
				t.Fatalf("Install: %v", err)
			}
			raw, _ := json.Marshal(inst.Server)
			for _, secret := range inst.Secrets {
				if strings.Contains(string(raw), secret) {
					t.Errorf("secret %q is in the server entry %s", secret, raw)
				}
			}
			for _, v := range e.Values {
				if !v.Secret {
					continue
				}
				var ref string
				for name, val := range inst.Secrets {
					if val == all[v.Name] {
						ref = name
					}
				}
				if !strings.HasPrefix(ref, e.Name+"/env/") && !strings.HasPrefix(ref, e.Name+"/header/") {
					t.Errorf("secret %s stored as %q (Secrets=%v)", v.Name, ref, inst.Secrets)
				}
				if !strings.Contains(string(raw), jsonText("${keyring:"+ref+"}")) {
					t.Errorf("entry %s lacks the reference to %s", raw, ref)
				}
			}
			// Only required values: must install too.
			req := map[string]string{}
			for _, v := range e.Missing(nil) {
				req[v.Name] = sampleValue(v)
			}
			if _, err := e.Install("x-"+e.Name, req, "/nexus"); err != nil {
				t.Errorf("Install with required values only: %v", err)
			}
			for tool := range inst.Hints.TTL {
				if !strings.HasPrefix(tool, e.Name+".") {
					t.Errorf("TTL hint %q not canonical", tool)
				}
			}
			if _, err := e.Lifetimes(e.Name); err != nil {
				t.Errorf("Lifetimes: %v", err)
			}
		})
	}
}

func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return strings.Trim(string(b), `"`)
}

func TestInstallShapes(t *testing.T) {
	c, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string) *Entry {
		e, ok := c.Get(name)
		if !ok {
			t.Fatalf("no %s", name)
		}
		return e
	}

	inst, err := get("doc-kg").Install("docs", map[string]string{"url": "https://d.example/mcp", "token": "tok"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if s := inst.Server; s.Transport != config.TransportStreamableHTTP || s.URL != "https://d.example/mcp" ||
		s.Headers["Authorization"] != "Bearer ${keyring:docs/header/Authorization}" || inst.Secrets["docs/header/Authorization"] != "tok" {
		t.Errorf("doc-kg: %+v %v", s, inst.Secrets)
	}
	if !slices.Contains(inst.Hints.Allow, "docs.*") || inst.Hints.SemanticFields["docs.doc_kg_search"][0] != "query" {
		t.Errorf("doc-kg hints: %+v", inst.Hints)
	}

	inst, err = get("code-kg").Install("code-kg", map[string]string{"command": `"/opt/my kg/run" serve --stdio`}, "")
	if err != nil {
		t.Fatal(err)
	}
	if s := inst.Server; s.Command != "/opt/my kg/run" || !slices.Equal(s.Args, []string{"serve", "--stdio"}) || s.Env != nil {
		t.Errorf("code-kg: %+v", s)
	}
	if a := inst.Hints.Annotations["kg_regenerate"]; a.ReadOnlyHint == nil || *a.ReadOnlyHint {
		t.Errorf("kg_regenerate annotation: %+v", a)
	}
	if !slices.Contains(inst.Hints.Mutating, "code-kg.kg_regenerate_submit") || slices.Contains(inst.Hints.Allow, "code-kg.kg_regenerate") {
		t.Errorf("code-kg policy hints: %+v", inst.Hints)
	}

	inst, err = get("code-kg-sample").Install("code-kg-sample", nil, "/bin/nexus")
	if err != nil {
		t.Fatal(err)
	}
	if s := inst.Server; s.Command != "/bin/nexus" || !slices.Equal(s.Args, []string{"sample-server", "code-kg"}) {
		t.Errorf("code-kg-sample: %+v", s)
	}
	if _, err := get("code-kg-sample").Install("s", nil, ""); err == nil {
		t.Error("a {{nexus}} entry installed without the executable path")
	}

	paths := "/a" + string(filepath.ListSeparator) + "/b c"
	inst, err = get("filesystem").Install("fs", map[string]string{"paths": paths}, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"-y", "@modelcontextprotocol/server-filesystem", "/a", "/b c"}; !slices.Equal(inst.Server.Args, want) {
		t.Errorf("filesystem args %q, want %q", inst.Server.Args, want)
	}

	// An optional value left out drops the argument that uses it.
	inst, err = get("git").Install("git", nil, "")
	if err != nil || !slices.Equal(inst.Server.Args, []string{"mcp-server-git"}) {
		t.Errorf("git without repository: %v %+v", err, inst)
	}
	inst, err = get("git").Install("git", map[string]string{"repository": "/r"}, "")
	if err != nil || !slices.Equal(inst.Server.Args, []string{"mcp-server-git", "--repository=/r"}) {
		t.Errorf("git with repository: %v %+v", err, inst)
	}

	pg := get("postgres")
	inst, err = pg.Install("pg", map[string]string{"DATABASE_URL": "postgresql://app@db/app", "PGPASSWORD": "hunter2"}, "")
	if err != nil || inst.Server.Env["PGPASSWORD"] != "${keyring:pg/env/PGPASSWORD}" || inst.Secrets["pg/env/PGPASSWORD"] != "hunter2" {
		t.Errorf("postgres: %v %+v", err, inst)
	}
	if _, err := pg.Install("pg", map[string]string{"DATABASE_URL": "postgresql://app:hunter2@db/app"}, ""); err == nil || !strings.Contains(err.Error(), "password") {
		t.Errorf("a password in a plain value: %v", err)
	}

	// A secret given as a reference is kept as written and not stored.
	inst, err = get("github").Install("gh", map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "${env:GH_TOKEN}"}, "")
	if err != nil || inst.Server.Env["GITHUB_PERSONAL_ACCESS_TOKEN"] != "${env:GH_TOKEN}" || len(inst.Secrets) != 0 {
		t.Errorf("github with env reference: %v %+v", err, inst)
	}
}

func TestMissing(t *testing.T) {
	c, _ := Builtin()
	e, _ := c.Get("slack")
	missing := e.Missing(map[string]string{"SLACK_TEAM_ID": "T1"})
	if len(missing) != 1 || missing[0].Name != "SLACK_BOT_TOKEN" {
		t.Fatalf("Missing = %+v", missing)
	}
	_, err := e.Install("slack", map[string]string{"SLACK_TEAM_ID": ""}, "")
	var me *MissingError
	if !errors.As(err, &me) || len(me.Values) != 2 {
		t.Fatalf("Install error = %v", err)
	}
	for _, want := range []string{"SLACK_BOT_TOKEN: the bot user OAuth token (secret; e.g. xoxb-...)", "SLACK_TEAM_ID: the workspace", "--value NAME=VALUE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := e.Install("slack", map[string]string{"SLACK_BOT_TOKN": "x"}, ""); err == nil || !strings.Contains(err.Error(), "takes no value \"SLACK_BOT_TOKN\"") {
		t.Errorf("unknown value: %v", err)
	}
	doc, _ := c.Get("doc-kg")
	if _, err := doc.Install("doc-kg", map[string]string{"url": "ftp://x", "token": "t"}, ""); err == nil || !strings.Contains(err.Error(), "http") {
		t.Errorf("bad url: %v", err)
	}
	if _, err := doc.Install("Doc_KG", map[string]string{"url": "https://x", "token": "t"}, ""); err == nil {
		t.Error("invalid server name accepted")
	}
}

func write(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadLayering(t *testing.T) {
	dir := t.TempDir()
	team := write(t, dir, "team.json", `{"servers": {
		"github": {"description": "team GitHub Enterprise", "transport": "streamable-http", "url": "https://ghe.example/mcp",
			"headers": {"Authorization": "Bearer {{token}}"},
			"values": [{"name": "token", "description": "GHE token", "required": true, "secret": true}]},
		"wiki": {"description": "team wiki", "transport": "stdio", "command": "wiki-mcp"}}}`)
	personal := write(t, dir, "personal.json", `{"servers": {"wiki": {"description": "my wiki", "transport": "stdio", "command": "my-wiki-mcp"}}}`)
	c, err := Load(team, filepath.Join(dir, "absent.json"), personal)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Files, []string{team, personal}) {
		t.Errorf("Files = %v", c.Files)
	}
	gh, _ := c.Get("github")
	if gh.Source != team || gh.URL != "https://ghe.example/mcp" || len(gh.Args) != 0 {
		t.Errorf("github override: %+v", gh)
	}
	wiki, _ := c.Get("wiki")
	if wiki.Command != "my-wiki-mcp" || wiki.Source != personal {
		t.Errorf("wiki: %+v", wiki)
	}
	if _, ok := c.Get("memory"); !ok {
		t.Error("builtin entries lost")
	}
	if got := LayerFiles([]string{"/t/a.json", "/t/b.json", "/home/.nexus/config.json"}); !slices.Equal(got, []string{filepath.Join("/t", "catalog.json"), filepath.Join("/home/.nexus", "catalog.json")}) {
		t.Errorf("LayerFiles = %v", got)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name, doc, want string
	}{
		{"not json", `{`, "must be a JSON object"},
		{"top key", `{"server": {}}`, `unknown key "server" (did you mean "servers"?)`},
		{"entry key", `{"servers": {"x": {"description": "d", "transport": "stdio", "commnd": "x"}}}`, `servers.x.commnd: unknown key "commnd" (did you mean "command"?)`},
		{"value key", `{"servers": {"x": {"description": "d", "transport": "stdio", "command": "{{a}}", "values": [{"name": "a", "description": "d", "requird": true}]}}}`, `servers.x.values[0].requird: unknown key`},
		{"policy key", `{"servers": {"x": {"description": "d", "transport": "stdio", "command": "x", "policy": {"readonly": []}}}}`, `servers.x.policy.readonly: unknown key "readonly" (did you mean "readOnly"?)`},
		{"type", `{"servers": {"x": {"description": "d", "transport": "stdio", "command": "x", "args": "a"}}}`, `servers.x.args: cannot unmarshal string`},
		{"placeholder", `{"servers": {"x": {"description": "d", "transport": "stdio", "command": "x", "args": ["{{path}}"]}}}`, `servers.x.args[0]: unknown placeholder {{path}}`},
		{"unused", `{"servers": {"x": {"description": "d", "transport": "stdio", "command": "x", "values": [{"name": "a", "description": "d"}]}}}`, `"a" is never used`},
		{"secret default", `{"servers": {"x": {"description": "d", "transport": "stdio", "command": "x", "env": {"A": "{{a}}"}, "values": [{"name": "a", "description": "d", "secret": true, "default": "x"}]}}}`, `values[0].default: a secret value cannot have a default`},
		{"name", `{"servers": {"X_Y": {"description": "d", "transport": "stdio", "command": "x"}}}`, `servers.X_Y: an entry name`},
		{"transport", `{"servers": {"x": {"description": "d", "transport": "http", "url": "https://x"}}}`, `servers.x.transport: "http"`},
		{"ttl", `{"servers": {"x": {"description": "d", "transport": "stdio", "command": "x", "ttl": {"t": "soon"}}}}`, `servers.x.ttl.t:`},
		{"optional url", `{"servers": {"x": {"description": "d", "transport": "sse", "url": "{{u}}", "values": [{"name": "u", "description": "d"}]}}}`, `must be required or have a default`},
		{"secret command", `{"servers": {"x": {"description": "d", "transport": "stdio", "command": "{{c}}", "values": [{"name": "c", "description": "d", "required": true, "secret": true}]}}}`, `may only be used in env or headers`},
		{"secret arg", `{"servers": {"x": {"description": "d", "transport": "stdio", "command": "x", "args": ["--t={{c}}"], "values": [{"name": "c", "description": "d", "required": true, "secret": true}]}}}`, `servers.x.args[0]: the secret {{c}} may only be used in env or headers`},
		{"malformed", `{"servers": {"x": {"description": "d", "transport": "stdio", "command": "x", "args": ["{{a}"]}}}`, `malformed placeholder`},
		{"allow mutating", `{"servers": {"x": {"description": "d", "transport": "stdio", "command": "x", "policy": {"mutating": ["w"], "allow": ["w"]}}}}`, `servers.x.policy.allow: "w" is mutating`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := write(t, dir, "c.json", tt.doc)
			_, err := Load(p)
			var ce *config.Error
			if !errors.As(err, &ce) || ce.File != p {
				t.Fatalf("error %v does not name the file", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q lacks %q", err, tt.want)
			}
		})
	}
}

func TestSplitWords(t *testing.T) {
	for in, want := range map[string][]string{
		`a b  c`:                 {"a", "b", "c"},
		`"a b" 'c d' e\ f`:       {"a b", "c d", "e f"},
		`C:\Tools\kg.exe --x ""`: {`C:\Tools\kg.exe`, "--x", ""},
		`'it''s'`:                {"its"},
	} {
		got, err := splitWords(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("splitWords(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := splitWords(`"open`); err == nil {
		t.Error("unclosed quote accepted")
	}
}

func TestCheckPaths(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	sep := string(filepath.ListSeparator)
	tests := []struct {
		name, paths string
		bad         string // the path named in the error; "" for none
	}{
		{"one that exists", dir, ""},
		{"one that does not", missing, missing},
		{"the second does not", dir + sep + missing, missing},
		{"empty parts are skipped", sep + dir + sep, ""},
		{"a reference is left for the start", "${env:NOTES}", ""},
	}
	cat, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	fs, ok := cat.Get("filesystem")
	if !ok {
		t.Fatal("no filesystem entry")
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := fs.CheckPaths(map[string]string{"paths": tc.paths})
			switch {
			case tc.bad == "" && err != nil:
				t.Errorf("CheckPaths(%q): %v", tc.paths, err)
			case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad+" does not exist")):
				t.Errorf("CheckPaths(%q) = %v, want an error naming %s", tc.paths, err, tc.bad)
			}
		})
	}
}
