package aggregation

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/nexus-mcp/nexus/config"
)

// startFailure starts a gateway of the one server entry, as a one-shot command
// does, and returns the error its status shows once its attempt is over.
func startFailure(t *testing.T, entry string) string {
	t.Helper()
	cfg, err := config.Parse("test.json", []byte(`{"servers": {"s": `+entry+`}}`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{OneAttempt: true})
	if err != nil {
		t.Fatal(err)
	}
	startGateway(t, g)
	<-g.Settled()
	return g.Servers()[0].Error
}

// TestStartFailureSaysHowItExited: a server that exits as it starts is
// reported with its exit status and the error line of its stderr, where a
// person reads why it is down (its status, a call's "not running", doctor).
func TestStartFailureSaysHowItExited(t *testing.T) {
	t.Parallel()
	got := startFailure(t, fmt.Sprintf(`{"command": %q, "args": ["-test.run=^$"], "env": {"NEXUS_TEST_CHILD": "exits"}}`, os.Args[0]))
	for _, want := range []string{"the server exited: exit status 3", "its stderr says: Error: FOO_TOKEN is not set"} {
		if !strings.Contains(got, want) {
			t.Errorf("status error %q lacks %q", got, want)
		}
	}
}

// TestRemoteStartFailureSaysWhy: a remote server whose URL is wrong (nothing
// listens there, or a web server that is no MCP server answers) is reported as
// such, in one line, with what to check.
func TestRemoteStartFailureSaysWhy(t *testing.T) {
	t.Parallel()
	page := func(status int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(status)
			fmt.Fprintln(w, "<!DOCTYPE html>\n<html>\n<body><h1>Error</h1>\n<p>Nothing for you here.</p></body>\n</html>")
		}
	}
	tests := []struct {
		name      string
		transport string // "" for streamable HTTP
		// serve answers at the server's URL; nil: nothing listens there.
		serve http.HandlerFunc
		want  []string
	}{
		{name: "nothing listens", want: []string{"nothing answers at URL: start the server, or fix servers.s.url", "connection refused"}},
		{name: "a web page with an error status", serve: page(http.StatusNotImplemented),
			want: []string{"URL answered HTTP 501 with a web page, not MCP: is it the server's MCP endpoint? fix servers.s.url"}},
		{name: "not found, in either era", serve: page(http.StatusNotFound),
			want: []string{"URL refused the first request of both protocol eras", "fix servers.s.url", `set servers.s.transport to "sse"`}},
		{name: "an SSE stream refused", transport: "sse", serve: page(http.StatusNotFound),
			want: []string{"URL answered HTTP 404 to the SSE stream's request: is it the server's SSE endpoint? fix servers.s.url"}},
		{name: "nothing listens for an SSE server", transport: "sse",
			want: []string{"nothing answers at URL: start the server, or fix servers.s.url", "connection refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var url string
			if tt.serve == nil {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				url = "http://" + ln.Addr().String() + "/mcp"
				ln.Close() // nothing listens there now
			} else {
				srv := httptest.NewServer(tt.serve)
				t.Cleanup(srv.Close)
				url = srv.URL + "/mcp"
			}
			transport := ""
			if tt.transport != "" {
				transport = fmt.Sprintf(`, "transport": %q`, tt.transport)
			}
			got := startFailure(t, fmt.Sprintf(`{"url": %q%s}`, url, transport))
			for _, want := range tt.want {
				if !strings.Contains(got, strings.ReplaceAll(want, "URL", url)) {
					t.Errorf("status error %q lacks %q", got, want)
				}
			}
			if strings.Contains(got, "\n") || strings.Contains(got, "<html") {
				t.Errorf("status error %q holds the page", got)
			}
		})
	}
}
