package config

import (
	"strings"
	"testing"
)

// TestProblemsLocatedAndNamed pins the exact text of each mistake: its file, line
// and column, its key, and the real cause.
func TestProblemsLocatedAndNamed(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string // every problem, in order
	}{
		{"trailing comma", "{\n  \"servers\": {\n    \"a\": {\"command\": \"x\"},\n  }\n}",
			[]string{"f.json:3:26: trailing comma before '}': JSON allows no comma after the last entry; remove it"}},
		{"comment", "{\n  // mine\n  \"servers\": {}\n}",
			[]string{"f.json:2:3: comments are not allowed in JSON; remove it"}},
		{"missing comma", "{\"toolNames\": \"wire\"\n \"servers\": {}}",
			[]string{"f.json:2:2: a comma is missing before this entry"}},
		{"unquoted key", "{servers: {}}", []string{"f.json:1:2: keys take double quotes: write \"key\": value"}},
		{"not an object", "[1]", []string{"f.json:1:1: the file must hold one JSON object ({...})"}},
		{"empty", "", []string{"f.json: the file is empty; write {} at least"}},
		{"duration names its key", "{\"servers\": {\"code\": {\"command\": \"x\",\n  \"timeout\": \"30 seconds\"}}}",
			[]string{`f.json:2:3: servers.code.timeout: "30 seconds" is not a duration (write e.g. 30s, 5m, 12h or 1d)`}},
		{"wrong type names its key", `{"servers": {"code": {"command": "x", "args": "-y"}}}`,
			[]string{`f.json:1:39: servers.code.args: must be a list, not a string`}},
		{"all mistakes, each once", "{\"servres\": {},\n \"toolNames\": \"snake\",\n \"servers\": {\"a\": {\"comand\": \"x\"}, \"b\": {\"command\": \"y\", \"timeout\": \"soon\"}}}",
			[]string{
				`f.json:1:2: servres: unknown key "servres" (did you mean "servers"?); valid keys: ` + strings.Join(topKeys, ", "),
				`f.json:3:20: servers.a.comand: unknown key "comand" (did you mean "command"?); valid keys: ` + strings.Join(serverKeys, ", "),
				`f.json:3:14: servers.a: needs "command" (a local stdio server) or "url" (a remote one)`,
				`f.json:3:58: servers.b.timeout: "soon" is not a duration (write e.g. 30s, 5m, 12h or 1d)`,
				`f.json:2:2: toolNames: write "wire" (default: <server>__<tool>) or "dotted" (<server>.<tool>)`,
			}},
		{"bad ttl", "{\"ttl\": {\"x.*\": \"bogus\"}}",
			[]string{`f.json:1:10: ttl.x.*: ttl "bogus": write a duration such as "30s", "5m", "12h" or "1d", a number of milliseconds such as 30000, or "never"`}},
		{"bad cache mode", "{\"cache\": {\"x.y\": \"sometimes\"}}",
			[]string{`f.json:1:12: cache.x.y: write "never" or "always", not "sometimes"`}},
		{"bad pattern", "{\"ttl\": {\"x\": \"5m\"}}",
			[]string{`f.json:1:10: ttl.x: pattern "x": write "x.*" for a whole server or "server.tool" for one tool`}},
		{"bad semantic", `{"memory": {"semantic": {"a.b": "query"}}}`,
			[]string{`f.json:1:26: memory.semantic.a.b: write a list of argument names, or false`}},
		{"unknown backend", `{"memory": {"backend": "mysql"}}`,
			[]string{`f.json:1:13: memory.backend: write "sqlite" (default) or "postgres", not "mysql"`}},
		{"postgres without dsn", `{"memory": {"backend": "postgres"}}`,
			[]string{`f.json:1:13: memory.backend: the postgres backend needs "dsn", e.g. "${env:NEXUS_PG_DSN}"`}},
		{"bad audit key", `{"audit": {"argument": true}}`,
			[]string{`f.json:1:12: audit.argument: unknown key "argument" (did you mean "arguments"?); valid keys: enabled, arguments, export, maxAge, maxBytes`}},
		{"bad audit age", `{"audit": {"maxAge": "a week"}}`,
			[]string{`f.json:1:12: audit.maxAge: "a week" is not a duration (write e.g. 30s, 5m, 12h or 1d)`}},
		{"tiny audit", `{"audit": {"maxBytes": 10}}`,
			[]string{`f.json:1:12: audit.maxBytes: write a number of bytes of at least 1048576 (default 67108864)`}},
		{"bad tracing endpoint", `{"tracing": {"endpoint": "127.0.0.1:4318"}}`,
			[]string{`f.json:1:14: tracing.endpoint: write the OTLP/HTTP collector's URL, e.g. http://127.0.0.1:4318`}},
		{"bad tracing key", `{"tracing": {"url": "http://x"}}`,
			[]string{`f.json:1:14: tracing.url: unknown key "url"; valid keys: endpoint`}},
		{"bad status key", `{"status": {"pubic": true}}`,
			[]string{`f.json:1:13: status.pubic: unknown key "pubic" (did you mean "public"?); valid keys: public`}},
		{"status.public not a boolean", `{"status": {"public": "yes"}}`,
			[]string{`f.json:1:13: status.public: must be true or false, not a string`}},
		{"an allowed origin with a path", `{"http": {"allowedOrigins": ["https://app.example", "https://app.example/ui"]}}`,
			[]string{`f.json:1:11: http.allowedOrigins[1]: "https://app.example/ui" is not an origin; write scheme://host[:port], e.g. "https://app.example" or "http://localhost:3000"`}},
		{"bad missing grace", `{"reload": {"missingGrace": "a while"}}`,
			[]string{`f.json:1:13: reload.missingGrace: "a while" is not a duration (write e.g. 30s, 5m, 12h or 1d)`}},
		{"bad memory key", `{"memory": {"enabled": true, "maxEntrys": 5}}`,
			[]string{`f.json:1:30: memory.maxEntrys: unknown key "maxEntrys" (did you mean "maxEntries"?); valid keys: enabled, backend, dsn, maxEntries, maxBytes, maxResultBytes, semantic, embedder, thresholds, verifier, rewording, verify, maxFalseHitRate`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.json", []byte(tc.doc))
			var got []string
			for _, p := range Problems(err) {
				got = append(got, p.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

func TestMemoryRulesParsedOnce(t *testing.T) {
	cfg, err := Parse("f.json", []byte(`{"servers": {"a": {"command": "x", "cacheScope": "agent"}},
		"ttl": {"a.*": "1h", "*": "never"}, "cache": {"a.b": "never"}, "memory": {"semantic": {"a.q": ["query"], "a.r": false}}}`))
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.MemoryRules()
	if r.TTL["a.*"].D.Hours() != 1 || !r.TTL["*"].Never || r.Cache["a.b"].String() != "never" || !r.AgentScoped["a"] ||
		len(r.Semantic["a.q"]) != 1 || r.Semantic["a.r"] == nil || len(r.Semantic["a.r"]) != 0 {
		t.Errorf("rules: %+v", r)
	}
	if err := r.Validate(); err != nil {
		t.Errorf("memory refuses what config accepted: %v", err)
	}
}

func TestMemoryRewording(t *testing.T) {
	cfg, err := Parse("f.json", []byte(`{"memory": {"rewording": {"scope": "agent", "window": "30m"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if rw := cfg.MemoryRules().Rewording; rw.Scope != "agent" || rw.Window.Minutes() != 30 {
		t.Errorf("rewording: %+v", rw)
	}
	if _, err := Parse("f.json", []byte(`{"memory": {"rewording": {"scope": "team"}}}`)); err == nil || !strings.Contains(err.Error(), "rewording") {
		t.Errorf("scope team accepted: %v", err)
	}
}

func TestMemoryVerify(t *testing.T) {
	cfg, err := Parse("f.json", []byte(`{"memory": {"verify": {"rate": 0.05, "perMinute": 10}, "maxFalseHitRate": 0.02}}`))
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.MemoryRules(); r.Verify.Rate != 0.05 || r.Verify.PerMinute != 10 || r.MaxFalseHitRate != 0.02 {
		t.Errorf("verify: %+v, maxFalseHitRate %v", r.Verify, r.MaxFalseHitRate)
	}
	if _, err := Parse("f.json", []byte(`{"memory": {"verify": {"rate": 2, "perMinute": 10}}}`)); err == nil {
		t.Error("rate 2 accepted")
	}
}
