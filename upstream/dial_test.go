package upstream

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/oauth"
)

func TestDialStdioEnvironment(t *testing.T) {
	t.Setenv("GATEWAY_ONLY_TOKEN", "not for children")
	t.Setenv("HOME", "/home/someone")
	t.Setenv("DB_PASSWORD_SOURCE", "hunter2")
	d := &Dialer{
		Resolve: func(v string) (string, error) {
			if v == "${env:DB_PASSWORD_SOURCE}" {
				return "hunter2", nil
			}
			return v, nil
		},
		MaxMessage: func() int64 { return 4096 },
	}
	s := &config.Server{Name: "db", Transport: config.TransportStdio, Command: "db-server", Args: []string{"--ro"}, Cwd: "/srv",
		Env: map[string]string{"DB_PASSWORD": "${env:DB_PASSWORD_SOURCE}", "MODE": "read"}}
	tr, err := d.Dial(s, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := tr.(*Process)
	if !ok || tr.Remote() {
		t.Fatalf("a stdio server's transport is %T (remote %v), want a local *Process", tr, tr.Remote())
	}
	env := slices.Sorted(slices.Values(p.cmd.Env))
	want := []string{"DB_PASSWORD=hunter2", "HOME=/home/someone", "MODE=read"}
	for _, kv := range want {
		if !slices.Contains(env, kv) {
			t.Errorf("the child's environment lacks %s: %v", kv, env)
		}
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "GATEWAY_ONLY_TOKEN=") || strings.HasPrefix(kv, "DB_PASSWORD_SOURCE=") {
			t.Errorf("the gateway's own %s reached the child", kv)
		}
	}
	if p.cmd.Dir != "/srv" || !slices.Equal(p.cmd.Args, []string{"db-server", "--ro"}) || p.maxMessage != 4096 {
		t.Errorf("the process is %v in %q bounded at %d, want db-server --ro in /srv at 4096", p.cmd.Args, p.cmd.Dir, p.maxMessage)
	}
}

func TestDialRefuses(t *testing.T) {
	refuse := func(string) (string, error) { return "", errors.New("no such secret") }
	tests := []struct {
		name string
		s    config.Server
		want string
	}{
		{"unknown transport", config.Server{Name: "x", Transport: "carrier-pigeon"}, `unknown transport "carrier-pigeon"`},
		{"stdio env", config.Server{Name: "x", Transport: config.TransportStdio, Command: "x", Env: map[string]string{"TOKEN": "${secret:x}"}}, "TOKEN of server x: no such secret"},
		{"sse headers", config.Server{Name: "y", Transport: config.TransportSSE, URL: "http://127.0.0.1:1/sse", Headers: map[string]string{"Authorization": "${secret:y}"}}, "Authorization of server y: no such secret"},
		{"http headers", config.Server{Name: "z", Transport: config.TransportStreamableHTTP, URL: "http://127.0.0.1:1/mcp", Headers: map[string]string{"X-Key": "${secret:z}"}}, "X-Key of server z: no such secret"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &Dialer{Resolve: refuse}
			tr, err := d.Dial(&tc.s, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || tr != nil {
				t.Errorf("Dial = %v, %v; want no transport and an error saying %q", tr, err, tc.want)
			}
		})
	}
}

func TestDialRemoteIsRemote(t *testing.T) {
	for _, kind := range []string{config.TransportSSE, config.TransportStreamableHTTP} {
		d := &Dialer{Local: LocalTransport()}
		tr, err := d.Dial(&config.Server{Name: "r", Transport: kind, URL: "http://127.0.0.1:1/mcp"}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if !tr.Remote() {
			t.Errorf("%s: a remote server's transport says it is local", kind)
		}
	}
}

// TestDialerClient checks which HTTP transport a remote server's requests take:
// the local one (short-lived idle connections) for a server on this machine or
// over plain http, whatever the client had for an https server elsewhere, and
// an OAuth transport keeps its token with the local transport under it.
func TestDialerClient(t *testing.T) {
	local := LocalTransport()
	own := &http.Transport{}
	authorized := &oauth.Transport{}
	tests := []struct {
		name   string
		url    string
		client *http.Client
		want   func(http.RoundTripper) bool
	}{
		{"loopback", "http://127.0.0.1:8080/mcp", nil, func(rt http.RoundTripper) bool { return rt == local }},
		{"localhost over https", "https://localhost/mcp", nil, func(rt http.RoundTripper) bool { return rt == local }},
		{"plain http elsewhere", "http://mcp.internal:9000/mcp", nil, func(rt http.RoundTripper) bool { return rt == local }},
		{"https elsewhere", "https://mcp.example.com/mcp", nil, func(rt http.RoundTripper) bool { return rt == nil }},
		{"a transport of its own", "http://127.0.0.1:8080/mcp", &http.Client{Transport: own}, func(rt http.RoundTripper) bool { return rt == own }},
		{"oauth", "http://127.0.0.1:8080/mcp", &http.Client{Transport: authorized}, func(rt http.RoundTripper) bool {
			o, ok := rt.(*oauth.Transport)
			return ok && o != authorized && o.Base == local
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &Dialer{Local: local, HTTPClient: func(*config.Server) *http.Client { return tc.client }}
			hc := d.client(&config.Server{Name: "r", URL: tc.url})
			if !tc.want(hc.Transport) {
				t.Errorf("the client's transport is %T %p", hc.Transport, hc.Transport)
			}
			if hc.CheckRedirect == nil {
				t.Error("the client follows redirects by Go's policy, which resends the server's headers to other origins")
			}
		})
	}
	if authorized.Base != nil {
		t.Error("the OAuth transport given was changed: it is shared by every connection")
	}
}
