package aggregation

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"github.com/nexus-mcp/nexus/config"
)

// TestHeadersFollowNoRedirectElsewhere: a remote server whose endpoint answers
// 307 with another origin (here the real server, on another port) does not get
// its configured headers resent there: the connection fails, and the other origin
// never sees the secret.
func TestHeadersFollowNoRedirectElsewhere(t *testing.T) {
	t.Parallel()
	child := newTestChild("web")
	var mu sync.Mutex
	var leaked []string
	real := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if k := r.Header.Get("X-Api-Key"); k != "" {
			leaked = append(leaked, r.Method+" "+r.URL.Path+" "+k)
		}
		mu.Unlock()
		server.NewStreamableHTTPServer(child.srv).ServeHTTP(w, r)
	}))
	t.Cleanup(real.Close)
	moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, real.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(moved.Close)
	cfg, err := config.Parse("test.json", []byte(fmt.Sprintf(`{"servers": {"web": {"url": %q, "headers": {"X-Api-Key": "key-that-stays-home"}}},
		"policy": {"agents": {"anonymous": {"allow": ["*"]}}}}`, moved.URL+"/mcp")))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{OneAttempt: true})
	if err != nil {
		t.Fatal(err)
	}
	startGateway(t, g)
	web := g.kids()["web"]
	waitState(t, web, StateFailed)
	if st := web.status(); !strings.Contains(st.Error, "another origin") {
		t.Errorf("the server's error is %q, want one naming the refused redirect", st.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) != 0 {
		t.Errorf("the other origin got the header: %q", leaked)
	}
}
