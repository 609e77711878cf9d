package aggregation

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nexus-mcp/nexus/config"
)

// TestOriginIsTheFrontsOwn: over real HTTP on 127.0.0.1, a browser request is
// served only from the front's own origin, or from one http.allowedOrigins lists;
// a page of another port of this machine (another local app, a dev server) is
// refused, though its host is a loopback one.
func TestOriginIsTheFrontsOwn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	u, err := url.Parse(f.url)
	if err != nil {
		t.Fatal(err)
	}
	own := "http://" + u.Host
	tests := []struct {
		name    string
		allowed []string
		origin  string
		want    int
	}{
		{"no Origin (not a browser)", nil, "", http.StatusOK},
		{"the front's own origin", nil, own, http.StatusOK},
		{"another port of this machine", nil, "http://127.0.0.1:3000", http.StatusForbidden},
		{"localhost on another port", nil, "http://localhost:3000", http.StatusForbidden},
		{"the front's host and port over https", nil, "https://" + u.Host, http.StatusForbidden},
		{"a foreign site", nil, "http://evil.example", http.StatusForbidden},
		{"another port, configured", []string{"http://localhost:3000"}, "http://localhost:3000", http.StatusOK},
		{"a configured site", []string{"https://app.example/"}, "https://app.example", http.StatusOK},
		{"a site not configured", []string{"https://app.example"}, "https://evil.example", http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := *f.g.Config()
			cfg.HTTP.AllowedOrigins = tt.allowed
			if err := f.g.Reload(&cfg); err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodPost, f.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+tokens["tester"])
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("Origin %q: status %d, want %d", tt.origin, resp.StatusCode, tt.want)
			}
		})
	}
}

// TestCheckText: arguments that are not valid text are refused naming the field;
// valid ones, escaped or not, pass.
func TestCheckText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args string
		want string // "" when valid
	}{
		{`{"message":"héllo \u00e9 \ud83d\ude00 \"q\" \\"}`, ""},
		{`{"n":1,"b":true,"x":null,"l":[1,"two",{"k":"v"}]}`, ""},
		{"{\"message\":\"bad \xff byte\"}", "arguments.message: invalid UTF-8"},
		{"{\"items\":[\"ok\",{\"name\":\"\xc3\"}]}", "arguments.items[1].name: invalid UTF-8"},
		{`{"a b":{"c":"\ud800 alone"}}`, `arguments["a b"].c: a lone surrogate escape (\uD800)`},
		{`{"s":"\udc00\ud800"}`, `arguments.s: a lone surrogate escape (\uDC00)`},
		{"{\"k\xfe\":1}", "arguments (a key): invalid UTF-8"},
		{"{\"x\":\"y\"", ""},  // cut short: not this check's to refuse, and it must end
		{"{\"x\" 1 \xff", ""}, // not JSON at all
	}
	for _, tt := range tests {
		err := checkText([]byte(tt.args))
		switch {
		case tt.want == "" && err != nil && utf8.ValidString(tt.args):
			t.Errorf("%q: %v, want it accepted", tt.args, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%q: %v, want %q", tt.args, err, tt.want)
		}
	}
}

// TestSkippedToolNameRedactedBeforeCut: a tool refused for its name is logged with
// the name cut at 80 bytes; a secret straddling the cut is redacted first, so no
// part of it reaches the log.
func TestSkippedToolNameRedactedBeforeCut(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-0123456789abcdef"
	cfg, err := config.Parse("test.json", []byte(`{"servers": {"fx": {"command": "fx"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	g, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(&logged, nil)),
		RedactText: func(s string) string { return strings.ReplaceAll(s, secret, "[redacted:k]") }})
	if err != nil {
		t.Fatal(err)
	}
	name := "\x01" + strings.Repeat("n", 80-len(secret)) + secret // the secret ends past byte 80
	raw, _ := json.Marshal(map[string]any{"name": name})
	c := g.newChild(cfg.Servers["fx"])
	if tools := c.toolsFrom([]json.RawMessage{raw}); len(tools) != 0 {
		t.Fatalf("the tool was served: %v", tools)
	}
	if !strings.Contains(logged.String(), "skipping a tool") || strings.Contains(logged.String(), secret[:8]) {
		t.Errorf("the log holds part of the secret, or nothing:\n%s", logged.String())
	}
}

// TestReconfigureWhileConnecting: a reload that comes while a connection is
// listed, before its listing is the child's, is not lost: the tools are made
// as the listing becomes the child's, under the entry of then.
func TestReconfigureWhileConnecting(t *testing.T) {
	t.Parallel()
	entry := func(prefix string) *config.Server {
		cfg, err := config.Parse("test.json", []byte(`{"servers": {"fx": {"command": "fx", "prefix": "`+prefix+`"}}}`))
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Servers["fx"]
	}
	raw := json.RawMessage(`{"name": "echo", "inputSchema": {"type": "object"}}`)
	tests := []struct {
		name   string
		reload bool // a reload between the listing made and set
		want   string
	}{
		{name: "no reload meanwhile", want: "old__echo"},
		{name: "a reload meanwhile", reload: true, want: "new__echo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse("test.json", []byte(`{"servers": {"fx": {"command": "fx"}}}`))
			if err != nil {
				t.Fatal(err)
			}
			g, err := New(cfg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			c := g.newChild(entry("old"))
			// What the supervisee's Connect hands the child's Life.
			l := listing{raws: []json.RawMessage{raw}}
			if tt.reload {
				c.reconfigure(entry("new"))
			}
			c.life.Set(nil, l, StateIdle, nil, time.Time{})
			_, tools := c.current()
			var names []string
			for _, tool := range tools {
				names = append(names, tool.Wire)
			}
			if len(names) != 1 || names[0] != tt.want {
				t.Fatalf("tools %q, want one named %s", names, tt.want)
			}
			if known := c.knownTool(tt.want); known == nil {
				t.Errorf("%s is not among the tools known", tt.want)
			}
		})
	}
}
