package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateDoctorServeAgree: for a valid and an invalid value of every config
// section, `nexus config validate`, `nexus doctor` and `nexus serve` give the same
// verdict, and the two that refuse name the key. (Before, a bad ttl passed
// validate and doctor, and serve dropped every memory rule at run time.) In
// process: what is compared is how the three commands read a config, not the
// process around them.
func TestValidateDoctorServeAgree(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	tests := []struct {
		section string
		good    string
		bad     string
		key     string // what the refusal names
	}{
		{"servers", `{"servers": {"a": {"command": "x", "disabled": true, "timeout": "5s"}}}`, `{"servers": {"a": {"command": "x", "timeout": "soon"}}}`, "servers.a.timeout"},
		{"servers.sessions", `{"servers": {"a": {"command": "x", "disabled": true, "sessions": "client", "maxSessions": 4}}}`, `{"servers": {"a": {"command": "x", "sessions": "perClient"}}}`, "servers.a"},
		{"servers.pin", `{"servers": {"a": {"command": "x", "disabled": true, "pin": "strict", "pins": {"t": "` + hash + `"}}}}`, `{"servers": {"a": {"command": "x", "pin": "hold"}}}`, "servers.a"},
		{"servers.maxSessions", `{"servers": {"a": {"command": "x", "disabled": true, "sessions": "shared"}}}`, `{"servers": {"a": {"command": "x", "sessions": "client", "maxSessions": "many"}}}`, "servers.a.maxSessions"},
		{"mcpServers", `{"mcpServers": {"a": {"command": "x", "disabled": true}}}`, `{"mcpServers": {"a": {"type": "websocket", "url": "ws://127.0.0.1:1"}}}`, "mcpServers.a.type"},
		{"toolNames", `{"toolNames": "dotted"}`, `{"toolNames": "snake"}`, "toolNames"},
		{"maxMessageBytes", `{"maxMessageBytes": 65536}`, `{"maxMessageBytes": 10}`, "maxMessageBytes"},
		{"maxChildMessageBytes", `{"maxChildMessageBytes": 1048576}`, `{"maxChildMessageBytes": "big"}`, "maxChildMessageBytes"},
		{"policy", `{"policy": {"default": {"allow": ["@readonly"]}}}`, `{"policy": {"default": {"allow": "*"}}}`, "policy.default"},
		{"agents", `{"agents": {"ci": {"tokenSha256": "` + hash + `"}}}`, `{"agents": {"ci": {"tokenSha256": "abc"}}}`, "agents.ci.tokenSha256"},
		{"ttl", `{"ttl": {"x.*": "5m"}}`, `{"ttl": {"x.*": "bogus"}}`, "ttl.x.*"},
		{"cache", `{"cache": {"x.y": "never"}}`, `{"cache": {"x.y": "sometimes"}}`, "cache.x.y"},
		{"invalidate", `{"invalidate": {"x.w": ["x.*"]}}`, `{"invalidate": {"x.w": "x.*"}}`, "invalidate"},
		{"memory.backend", `{"memory": {"backend": "sqlite"}}`, `{"memory": {"backend": "mysql"}}`, "memory.backend"},
		{"memory.embedder", `{"memory": {"embedder": {"provider": "ollama", "baseURL": "http://127.0.0.1:1", "model": "m"}}}`, `{"memory": {"embedder": {"provider": "olama", "baseURL": "http://127.0.0.1:1", "model": "m"}}}`, "memory.embedder"},
		{"memory.thresholds", `{"memory": {"thresholds": {"serve": 0.9, "verify": 0.8}}}`, `{"memory": {"thresholds": {"serve": 0.5, "verify": 0.8}}}`, "memory.thresholds"},
		{"memory.verifier", `{"memory": {"verifier": {"baseURL": "http://127.0.0.1:1", "model": "m"}}}`, `{"memory": {"verifier": {"baseURL": "http://127.0.0.1:1"}}}`, "memory.verifier"},
		{"memory.semantic", `{"memory": {"semantic": {"x.y": ["query"]}}}`, `{"memory": {"semantic": {"x.y": "query"}}}`, "memory.semantic.x.y"},
		{"secrets", `{"secrets": {"insecureFileStore": false}}`, `{"secrets": {"insecureFileStore": "yes"}}`, "secrets"},
		{"projectLayers", `{"projectLayers": false}`, `{"projectLayers": "yes"}`, "projectLayers"},
		{"audit", `{"audit": {"arguments": true, "maxAge": "7d", "maxBytes": 1048576}}`, `{"audit": {"maxBytes": 10}}`, "audit.maxBytes"},
		{"tracing", `{"tracing": {"endpoint": "http://127.0.0.1:1"}}`, `{"tracing": {"endpoint": "localhost:4318"}}`, "tracing.endpoint"},
		{"status", `{"status": {"public": true}}`, `{"status": {"public": "yes"}}`, "status.public"},
		{"http", `{"http": {"allowedOrigins": ["http://localhost:3000"]}}`, `{"http": {"allowedOrigins": ["localhost:3000"]}}`, "http.allowedOrigins[0]"},
		{"reload", `{"reload": {"missingGrace": "30s"}}`, `{"reload": {"missingGrace": "soon"}}`, "reload.missingGrace"},
		{"limits", `{"limits": {"maxBatchMessages": 64, "sessionIdleTimeout": "15m"}}`, `{"limits": {"maxBatchMessages": -1}}`, "limits.maxBatchMessages"},
		{"tools", `{"tools": {"mode": "search", "pin": ["x.*"], "budget": 4}}`, `{"tools": "some"}`, "tools"},
		{"agents.tools", `{"agents": {"ci": {"tools": "search"}}}`, `{"agents": {"ci": {"tools": {"mode": "search", "budget": -1}}}}`, "agents.ci.tools"},
		{"names", `{"names": {"maxLength": 48}}`, `{"names": {"maxLength": 4}}`, "names.maxLength"},
		{"servers.tools", `{"servers": {"a": {"command": "x", "disabled": true, "tools": {"t": {"name": "u"}}}}}`, `{"servers": {"a": {"command": "x", "tools": {"t": {"name": "u.v"}}}}}`, "servers.a"},
	}
	for _, tc := range tests {
		t.Run(tc.section, func(t *testing.T) {
			for _, v := range []struct {
				doc   string
				valid bool
			}{{tc.good, true}, {tc.bad, false}} {
				home := t.TempDir()
				inProcessEnv(t, home)
				if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(v.doc), 0o600); err != nil {
					t.Fatal(err)
				}
				verdicts := map[string]string{
					"validate": validateVerdict(tc.key),
					"doctor":   doctorVerdict(tc.key),
					"serve":    serveVerdict(tc.key),
				}
				want := "refused naming the key"
				if v.valid {
					want = "accepted"
				}
				for cmd, got := range verdicts {
					if got != want {
						t.Errorf("%s: %s: %s, want %s", v.doc, cmd, got, want)
					}
				}
			}
		})
	}
}

// verdict words, so a mismatch reads plainly.
func verdict(ok bool, named bool, detail string) string {
	switch {
	case ok:
		return "accepted"
	case named:
		return "refused naming the key"
	}
	return "refused without naming the key: " + detail
}

func validateVerdict(key string) string {
	out, stderr, code := runIn("", "config", "validate")
	return verdict(code == 0, strings.Contains(out+stderr, key), out+stderr)
}

func doctorVerdict(key string) string {
	out, stderr, _ := runIn("", "doctor", "--json")
	var rep struct {
		Checks []struct{ Area, Name, Status, Detail string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		return "no JSON report: " + err.Error() + stderr
	}
	var failed []string
	for _, ch := range rep.Checks {
		if ch.Status == "fail" && strings.HasPrefix(ch.Area, "config") {
			failed = append(failed, ch.Name+": "+ch.Detail)
		}
	}
	all := strings.Join(failed, "; ")
	return verdict(len(failed) == 0, strings.Contains(all, key), all)
}

// serveVerdict runs `nexus serve` with one initialize request on its stdin: a
// config it accepts answers it (and the end of stdin stops it); one it refuses
// ends with an error before answering.
func serveVerdict(key string) string {
	out, stderr, code := runIn(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n", "serve")
	answered := strings.Contains(out, `"id":1,"result"`)
	return verdict(code == 0 && answered, code != 0 && !answered && strings.Contains(stderr, key), stderr+out)
}
