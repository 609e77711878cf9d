package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string // all must appear in the error
	}{
		{"unknown top-level key", `{"servres": {}}`, []string{"f.json", `unknown key "servres"`, `did you mean "servers"`}},
		{"unknown server key", `{"servers": {"gh": {"comand": "x"}}}`, []string{"servers.gh", `unknown key "comand"`, `did you mean "command"`}},
		{"a top-level key in a server", `{"servers": {"gh": {"command": "x", "ttl": "5m"}}}`, []string{"servers.gh.ttl", `"ttl" is a top-level key, beside "servers", keyed by tool: "ttl": {"gh.*": ...}`}},
		{"stdio without command", `{"servers": {"gh": {"transport": "stdio"}}}`, []string{"servers.gh", `needs "command"`}},
		{"remote without url", `{"servers": {"gh": {"transport": "sse"}}}`, []string{"servers.gh", `needs "url"`}},
		{"neither command nor url", `{"servers": {"gh": {}}}`, []string{`needs "command"`, `or "url"`}},
		{"bad transport", `{"servers": {"gh": {"transport": "grpc", "command": "x"}}}`, []string{`transport "grpc" is unknown`, "streamable-http"}},
		{"bad server name", `{"servers": {"Git_Hub": {"command": "x"}}}`, []string{"servers.Git_Hub", "lower-case"}},
		{"bad url", `{"servers": {"gh": {"url": "ftp://x"}}}`, []string{"http:// or https://"}},
		{"bad timeout", `{"servers": {"gh": {"command": "x", "timeout": "soon"}}}`, []string{"servers.gh", "30s"}},
		{"name in both sections", `{"servers": {"gh": {"command": "x"}}, "mcpServers": {"gh": {"command": "y"}}}`, []string{"mcpServers.gh", "keep one"}},
		{"malformed JSON", `{"servers": `, []string{"f.json:1:", "ends too early"}},
		{"trailing data", `{} {}`, []string{"trailing data"}},
		{"bad toolNames", `{"toolNames": "snake"}`, []string{"toolNames", `"dotted"`}},
		{"bad policy entry", `{"policy": {"default": {"allow": ["code-kg__kg_regenerate"]}}}`, []string{"code-kg__kg_regenerate", "code-kg.kg_regenerate"}},
		{"unknown policy key", `{"policy": {"defaults": {}}}`, []string{`unknown key "defaults"`, `"default"`}},
		{"token instead of hash", `{"agents": {"coder": {"tokenSha256": "nxs_abc"}}}`, []string{"tokenSha256", "never the token"}},
		{"unknown limit", `{"limits": {"maxBatchMesages": 10}}`, []string{"limits.maxBatchMesages", `did you mean "maxBatchMessages"`}},
		{"zero-sized batch", `{"limits": {"maxBatchMessages": -1}}`, []string{"limits.maxBatchMessages", "at least 1"}},
		{"tiny batch answer", `{"limits": {"maxBatchAnswerBytes": 10}}`, []string{"limits.maxBatchAnswerBytes", "at least 65536"}},
		{"limit of the wrong type", `{"limits": {"maxCallsPerSession": "many"}}`, []string{"limits.maxCallsPerSession", "must be a number"}},
		{"instant idle timeout", `{"limits": {"sessionIdleTimeout": "1ms"}}`, []string{"limits.sessionIdleTimeout", "at least 1s"}},
		{"bad pin mode", `{"servers": {"gh": {"command": "x", "pin": "hold"}}}`, []string{"servers.gh", `"pin"`, `"strict"`, `"warn"`, `"off"`, `"hold"`}},
		{"a pin that is no hash", `{"servers": {"gh": {"command": "x", "pins": {"read": "abc"}}}}`, []string{"servers.gh", `"read"`, "SHA-256", "nexus tools pins"}},
		{"bad sessions", `{"servers": {"gh": {"command": "x", "sessions": "perClient"}}}`, []string{"servers.gh", `"sessions"`, `"client"`, `"perClient"`}},
		{"unknown sessions key", `{"servers": {"gh": {"command": "x", "maxSession": 2}}}`, []string{`unknown key "maxSession"`, `did you mean "maxSessions"`}},
		{"negative maxSessions", `{"servers": {"gh": {"command": "x", "sessions": "client", "maxSessions": -1}}}`, []string{"servers.gh", `"maxSessions"`, "positive"}},
		{"maxSessions of a shared server", `{"servers": {"gh": {"command": "x", "maxSessions": 3}}}`, []string{"servers.gh", `"maxSessions"`, `"sessions": "client"`}},
		{"maxSessions of the wrong type", `{"servers": {"gh": {"command": "x", "sessions": "client", "maxSessions": "many"}}}`, []string{"servers.gh.maxSessions", "must be a number"}},
		{"negative agent share", `{"limits": {"maxSessionsPerAgent": -2}}`, []string{"limits.maxSessionsPerAgent"}},
		{"negative upstream share", `{"servers": {"gh": {"command": "x", "sessions": "client", "maxSessionsPerAgent": -1}}}`, []string{"servers.gh", `"maxSessionsPerAgent"`, "positive"}},
		{"upstream share of a shared server", `{"servers": {"gh": {"command": "x", "maxSessionsPerAgent": 2}}}`, []string{"servers.gh", `"maxSessionsPerAgent"`, `"sessions": "client"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.json", []byte(tc.doc))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestLimits: unset limits are their defaults; set ones are kept; an agent's share
// of sessions is a fair part of the bound, never below the floor.
func TestLimits(t *testing.T) {
	cfg, err := Parse("f.json", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Limits
	if l.BatchMessages() != 256 || l.BatchAnswerBytes() != 64<<20 || l.CallsPerSession() != 64 || l.Sessions() != 1000 ||
		l.IdleTimeout() != time.Hour || l.ChildRequests() != 16 || l.ChildRequestsPerClient() != 8 ||
		l.ChildRequestWait() != 10*time.Minute || l.ChildRequestHold() != 10*time.Second {
		t.Errorf("defaults: %+v", l)
	}
	for _, tc := range []struct{ sessions, agents, want int }{{1000, 0, 1000}, {1000, 1, 500}, {1000, 3, 250}, {1000, 500, 8}} {
		if got := l.SessionsPerAgent(tc.sessions, tc.agents); got != tc.want {
			t.Errorf("share of %d sessions among %d agents: %d, want %d", tc.sessions, tc.agents, got, tc.want)
		}
	}
	cfg, err = Parse("f.json", []byte(`{"limits": {"maxBatchMessages": 10, "maxSessionsPerAgent": 3, "sessionIdleTimeout": "5m", "maxChildRequests": 2,
		"maxChildRequestsPerClient": 1, "childRequestTimeout": "1m", "childRequestTurn": "2s"}}`))
	if err != nil {
		t.Fatal(err)
	}
	l = cfg.Limits
	if l.BatchMessages() != 10 || l.SessionsPerAgent(1000, 1) != 3 || l.IdleTimeout() != 5*time.Minute || l.ChildRequests() != 2 ||
		l.ChildRequestsPerClient() != 1 || l.ChildRequestWait() != time.Minute || l.ChildRequestHold() != 2*time.Second {
		t.Errorf("set limits: %+v", l)
	}
}

func TestParseServers(t *testing.T) {
	cfg, err := Parse("f.json", []byte(`{
		"servers": {"gh": {"command": "npx", "args": ["-y", "gh"], "timeout": "1d", "prefix": ""},
			"shell": {"command": "sh", "sessions": "client", "maxSessions": 3}},
		"mcpServers": {
			"desk": {"command": "node", "args": ["s.js"], "env": {"K": "V"}},
			"remote": {"url": "https://x/mcp"},
			"old": {"url": "https://x/sse", "type": "sse"}
		}}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, transport, prefix string }{
		{"gh", TransportStdio, ""}, {"desk", TransportStdio, "desk"}, {"remote", TransportStreamableHTTP, "remote"}, {"old", TransportSSE, "old"},
	}
	for _, tc := range tests {
		s := cfg.Servers[tc.name]
		if s == nil || s.Transport != tc.transport || s.WirePrefix() != tc.prefix {
			t.Errorf("%s: got %+v, want transport %s prefix %q", tc.name, s, tc.transport, tc.prefix)
		}
	}
	if got := cfg.Servers["gh"].CallTimeout(); got != 24*time.Hour {
		t.Errorf("timeout 1d = %s", got)
	}
	if s := cfg.Servers["shell"]; !s.PerClient() || s.SessionLimit() != 3 {
		t.Errorf("sessions of shell: per client %v, limit %d; want client, 3", s.PerClient(), s.SessionLimit())
	}
	for _, tc := range []struct{ agents, want int }{{0, 3}, {1, 2}, {2, 1}, {5, 1}} {
		if got := cfg.Servers["shell"].SessionShare(tc.agents); got != tc.want {
			t.Errorf("with %d agents, one agent's share of shell's 3 sessions is %d, want %d", tc.agents, got, tc.want)
		}
	}
	if got := cfg.Servers["desk"].CallTimeout(); got != DefaultTimeout {
		t.Errorf("default timeout = %s", got)
	}
	if s := cfg.Servers["desk"]; s.PerClient() || s.SessionLimit() != DefaultMaxUpstreamSessions {
		t.Errorf("sessions of desk: per client %v, limit %d; want shared, %d", s.PerClient(), s.SessionLimit(), DefaultMaxUpstreamSessions)
	}
	if cfg.Servers["desk"].Protocol() != DefaultProtocolVersion {
		t.Errorf("protocol = %s", cfg.Servers["desk"].Protocol())
	}
}

func TestLayers(t *testing.T) {
	dir := t.TempDir()
	team := write(t, dir, "team.json", `{"servers": {"gh": {"command": "npx", "args": ["gh"], "env": {"A": "team"}}, "kg": {"command": "kg"}},
		"policy": {"default": {"allow": ["*"]}}}`)
	personal := write(t, dir, "config.json", `{"servers": {"gh": {"env": {"A": "mine"}}, "kg": {"disabled": true}}}`)
	cfg, err := Load([]string{team, personal}, map[string]bool{personal: true})
	if err != nil {
		t.Fatal(err)
	}
	gh := cfg.Servers["gh"]
	if gh.Command != "npx" || gh.Env["A"] != "mine" || gh.Source != personal {
		t.Errorf("a later layer overrides keys of an earlier one: %+v", gh)
	}
	if len(cfg.EnabledServers()) != 1 || cfg.EnabledServers()[0].Name != "gh" {
		t.Errorf("disabled servers are not enabled: %v", cfg.EnabledServers())
	}
	if cfg.Policy.Default == nil || cfg.Policy.Default.Allow[0] != "*" || cfg.Policy.Sources["policy.default"] != team {
		t.Errorf("policy and its source: %+v", cfg.Policy)
	}
	if _, err := Load([]string{filepath.Join(dir, "missing.json"), personal}, map[string]bool{personal: true}); err == nil {
		t.Error("a missing --config layer must be an error")
	}
	if _, err := Load([]string{filepath.Join(dir, "absent.json")}, map[string]bool{filepath.Join(dir, "absent.json"): true}); err != nil {
		t.Errorf("a missing personal file is fine: %v", err)
	}
}

func TestEditKeepsOtherKeysAndIsAtomic(t *testing.T) {
	dir := t.TempDir()
	p := write(t, dir, "config.json", `{"toolNames": "dotted", "servers": {"a": {"command": "a"}}, "ttl": {"*": "1m"}}`)
	if err := Edit(p, func(d Document) error { return d.SetServer("b", &Server{Command: "b", Args: []string{"x"}}) }); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"toolNames", "servers", "ttl"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("key %s lost: %s", k, data)
		}
	}
	cfg, err := Parse(p, data)
	if err != nil || cfg.Servers["a"] == nil || cfg.Servers["b"] == nil {
		t.Fatalf("after edit: %v %+v", err, cfg)
	}
	// An edit that would make the file invalid writes nothing.
	err = Edit(p, func(d Document) error { return d.SetServer("c", &Server{Transport: TransportStdio}) })
	if err == nil {
		t.Fatal("an invalid edit was accepted")
	}
	after, _ := os.ReadFile(p)
	if string(after) != string(data) {
		t.Error("an invalid edit changed the file")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	found := false
	if err := Edit(p, func(d Document) error { found = d.RemoveServer("a"); return nil }); err != nil || !found {
		t.Fatalf("remove: %v %v", found, err)
	}
}

// TestEditKeepsTheUsersLayout: `nexus add` and `nexus remove` change the one entry
// they name; the rest of a hand-written file, its key order and spacing included,
// is byte for byte as it was.
func TestEditKeepsTheUsersLayout(t *testing.T) {
	dir := t.TempDir()
	orig := `{
    "toolNames": "dotted",
    "servers": {
        "zeta": {"command": "z"},
        "alpha": {"command": "a"}
    },
    "ttl": {"*": "1m"}
}
`
	p := write(t, dir, "config.json", orig)
	if err := Edit(p, func(d Document) error { return d.SetServer("mid", &Server{Command: "m"}) }); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	want := `{
    "toolNames": "dotted",
    "servers": {
        "zeta": {"command": "z"},
        "alpha": {"command": "a"},
        "mid": {
            "command": "m"
        }
    },
    "ttl": {"*": "1m"}
}
`
	if string(data) != want {
		t.Errorf("after add:\n%s\nwant:\n%s", data, want)
	}
	if err := Edit(p, func(d Document) error { d.RemoveServer("mid"); return nil }); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(p); string(data) != orig {
		t.Errorf("add then remove did not give the file back:\n%s", data)
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"30s", 30 * time.Second, true}, {"5m", 5 * time.Minute, true}, {"1d", 24 * time.Hour, true},
		{"1d12h", 36 * time.Hour, true}, {"d", 0, false}, {"x1d", 0, false}, {"soon", 0, false},
	}
	for _, tc := range tests {
		got, err := ParseDuration(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseDuration(%q) = %s, %v", tc.in, got, err)
		}
	}
	var d Duration
	if err := json.Unmarshal([]byte(`1500`), &d); err != nil || d.D != 1500*time.Millisecond {
		t.Errorf("milliseconds: %s %v", d.D, err)
	}
}

func TestMergeRules(t *testing.T) {
	dir := t.TempDir()
	team := write(t, dir, "team.json", `{
		"servers": {"kg": {"command": "kg", "annotations": {"a": {"readOnlyHint": true}}, "pins": {"a": "`+strings.Repeat("a", 64)+`"}}},
		"policy": {"default": {"allow": ["@readonly"], "deny": ["kg.wipe"]}, "agents": {"ci": {"allow": ["*"], "deny": ["kg.drop"]}}},
		"ttl": {"*": "1m", "kg.*": "5m"}}`)
	personal := write(t, dir, "config.json", `{
		"servers": {"kg": {"annotations": {"b": {"readOnlyHint": false}}, "pins": {"b": "`+strings.Repeat("b", 64)+`"}}},
		"policy": {"default": {"allow": ["*"]}, "agents": {"ci": {"deny": ["kg.other"]}, "me": {"deny": ["kg.x"]}}},
		"ttl": {"*": "2m"}}`)
	cfg, err := LoadLayers([]Layer{{Path: team, Shared: true}, {Path: personal, Optional: true}})
	if err != nil {
		t.Fatal(err)
	}
	def := cfg.Policy.Default
	if strings.Join(def.Allow, ",") != "*" || strings.Join(def.Deny, ",") != "kg.wipe" {
		t.Errorf("default: allow from the most specific layer, deny accumulated: %+v", def)
	}
	ci := cfg.Policy.Agents["ci"]
	if strings.Join(ci.Allow, ",") != "*" || strings.Join(ci.Deny, ",") != "kg.drop,kg.other" {
		t.Errorf("agent ci: %+v", ci)
	}
	if me := cfg.Policy.Agents["me"]; strings.Join(me.Allow, ",") != "*" || strings.Join(me.Deny, ",") != "kg.x" {
		t.Errorf("an agent with only denies gets the default's allow: %+v", me)
	}
	if ann := cfg.Servers["kg"].Annotations; len(ann) != 2 {
		t.Errorf("annotations merge by tool: %+v", ann)
	}
	if pins := cfg.Servers["kg"].Pins; len(pins) != 2 {
		t.Errorf("pins merge by tool, so a team's pins stay beside one's own: %+v", pins)
	}
	if mode := cfg.Servers["kg"].PinMode(); mode != PinWarn {
		t.Errorf("a hand-written server's pin mode is %q, want %q", mode, PinWarn)
	}
	if string(cfg.TTL["*"]) != `"2m"` || string(cfg.TTL["kg.*"]) != `"5m"` {
		t.Errorf("ttl merges by key: %s %s", cfg.TTL["*"], cfg.TTL["kg.*"])
	}
}

func TestLockedSettings(t *testing.T) {
	dir := t.TempDir()
	team := write(t, dir, "team.json", `{"locked": ["policy.default", "servers.kg", "ttl"],
		"servers": {"kg": {"command": "kg"}}, "policy": {"default": {"allow": ["@readonly"]}}, "ttl": {"*": "1m"}}`)
	tests := []struct {
		name, personal string
		ok             bool
	}{
		{"adding a deny tightens: allowed", `{"policy": {"default": {"deny": ["kg.x"]}}}`, true},
		{"another server: allowed", `{"servers": {"other": {"command": "o"}}}`, true},
		{"loosening the policy", `{"policy": {"default": {"allow": ["*"]}}}`, false},
		{"changing the locked server", `{"servers": {"kg": {"env": {"A": "1"}}}}`, false},
		{"changing a locked ttl", `{"ttl": {"*": "1h"}}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := write(t, t.TempDir(), "config.json", tc.personal)
			_, err := LoadLayers([]Layer{{Path: team, Shared: true}, {Path: p}})
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v", err)
			}
			if err != nil && (!strings.Contains(err.Error(), "locked by") || !strings.Contains(err.Error(), team)) {
				t.Errorf("the error should name the lock and its layer: %v", err)
			}
		})
	}
}

func TestSharedLayerRefusesLiteralSecrets(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		doc  string
		want string // "" means accepted
	}{
		{`{"servers": {"gh": {"command": "x",
  "env": {"GITHUB_TOKEN": "ghp_abcdefghijklmnop"}}}}`, ".json:2:"},
		{`{"servers": {"d": {"url": "https://x/mcp", "headers": {"Authorization": "Bearer abc.def"}}}}`, "${keyring:d/header/Authorization}"},
		{`{"servers": {"p": {"command": "x", "args": ["postgres://u:pw@h/db"]}}}`, "credential"},
		{`{"servers": {"gh": {"command": "x", "env": {"GITHUB_TOKEN": "${env:GITHUB_TOKEN}", "MODE": "fast"}}}}`, ""},
		{`{"memory": {"backend": "postgres", "dsn": "postgres://nexus:pw@db/nexus"}}`, "memory.dsn"},
		{`{"memory": {"backend": "postgres", "dsn": "host=db user=nexus password=pw"}}`, "${env:NEXUS_PG_DSN}"},
		{`{"memory": {"backend": "postgres", "dsn": "postgres://db/nexus?password=pw"}}`, "database password"},
		{`{"memory": {"backend": "postgres", "dsn": "${env:NEXUS_PG_DSN}"}}`, ""},
		{`{"memory": {"backend": "postgres", "dsn": "postgres://nexus:${keyring:memory/pg}@db/nexus"}}`, ""},
		{`{"memory": {"backend": "postgres", "dsn": "postgres://nexus@db/nexus"}}`, ""},
	}
	for i, tc := range tests {
		p := write(t, dir, "team"+string(rune('a'+i))+".json", tc.doc)
		_, err := LoadLayers([]Layer{{Path: p, Shared: true}})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.doc, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error with %q", tc.doc, err, tc.want)
		}
		// The same content in the personal layer is the user's own business.
		if _, err := LoadLayers([]Layer{{Path: p}}); err != nil {
			t.Errorf("personal layer refused: %v", err)
		}
	}
}

// TestOAuthKeys: "auth" and "oauth" are accepted on remote servers, and every
// mistake in them is refused with the key it is in.
func TestOAuthKeys(t *testing.T) {
	tests := []struct {
		name, server string
		want         string // "" means accepted
	}{
		{"401 only", `{"url": "https://x/mcp"}`, ""},
		{"required", `{"url": "https://x/mcp", "auth": "oauth"}`, ""},
		{"pre-registered", `{"url": "https://x/mcp", "auth": "oauth", "oauth": {"clientId": "nexus", "clientSecret": "${keyring:x/oauth/clientSecret}", "tokenEndpointAuthMethod": "client_secret_post", "scopes": ["read", "write"]}}`, ""},
		{"metadata document", `{"url": "https://x/mcp", "oauth": {"clientMetadataUrl": "https://nexus.example/client.json"}}`, ""},
		{"unknown auth", `{"url": "https://x/mcp", "auth": "basic"}`, `"auth" is "oauth" or absent`},
		{"stdio", `{"command": "x", "auth": "oauth"}`, "for remote servers"},
		{"literal secret", `{"url": "https://x/mcp", "oauth": {"clientId": "a", "clientSecret": "s3cr3t-value"}}`, "must be a reference"},
		{"secret without id", `{"url": "https://x/mcp", "oauth": {"clientSecret": "${keyring:x/s}"}}`, `needs "oauth.clientId"`},
		{"unknown method", `{"url": "https://x/mcp", "oauth": {"tokenEndpointAuthMethod": "private_key_jwt"}}`, "private_key_jwt"},
		{"method without secret", `{"url": "https://x/mcp", "oauth": {"clientId": "a", "tokenEndpointAuthMethod": "client_secret_basic"}}`, `needs "oauth.clientSecret"`},
		{"http metadata URL", `{"url": "https://x/mcp", "oauth": {"clientMetadataUrl": "http://nexus.example/client.json"}}`, "https URL with a path"},
		{"scope with a space", `{"url": "https://x/mcp", "oauth": {"scopes": ["read write"]}}`, "one word"},
		{"unknown oauth key", `{"url": "https://x/mcp", "oauth": {"client": "a"}}`, `unknown field "client"`},
		{"allowed addresses", `{"url": "https://x/mcp", "oauth": {"allowAddresses": ["10.0.0.0/8", "192.168.1.7", "fd00::/8"]}}`, ""},
		{"an allowed address that is none", `{"url": "https://x/mcp", "oauth": {"allowAddresses": ["auth.corp"]}}`, `"oauth.allowAddresses" holds "auth.corp"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("f.json", []byte(`{"servers": {"x": `+tc.server+`}}`))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "":
				if cfg.Servers["x"] == nil {
					t.Fatal("the server is missing")
				}
			case err == nil || !strings.Contains(err.Error(), tc.want):
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			case !strings.Contains(err.Error(), "servers.x"):
				t.Errorf("the error %q does not name servers.x", err)
			}
		})
	}
}

func TestLaunch(t *testing.T) {
	for _, tc := range []struct {
		name string
		srv  Server
		want string
	}{
		{"a command", Server{Command: "npx", Args: []string{"-y", "@scope/server", "/my notes"}, Env: map[string]string{"TOKEN": "${keyring:x}", "A": "1"}},
			`command: npx -y @scope/server "/my notes"; env: A, TOKEN`},
		{"a URL", Server{URL: "https://kg.example/mcp", Headers: map[string]string{"Authorization": "Bearer s3cret"}},
			"url: https://kg.example/mcp; headers: Authorization"},
		{"a URL with a password", Server{URL: "https://me:s3cret@kg.example/mcp"}, "url: https://me:xxxxx@kg.example/mcp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.srv.Launch(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
