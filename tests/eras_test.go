package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// stateKey is the NEXUS_STATE_KEY the replicas of a test share.
const stateKey = "6e657875732d746573742d73746174652d6b65792d33322d62797465732d2121"

// roundRobin is a plain load balancer: each request goes to the next backend, with
// no affinity of any kind, and each backend's share is counted.
type roundRobin struct {
	backends []*url.URL
	next     atomic.Int64
	mu       sync.Mutex
	hits     map[string]int
}

func (rr *roundRobin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target := rr.backends[int(rr.next.Add(1)-1)%len(rr.backends)]
	rr.mu.Lock()
	rr.hits[target.Host]++
	rr.mu.Unlock()
	proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) }, FlushInterval: -1}
	proxy.ServeHTTP(w, r)
}

// modernClient connects mcp-go's client to url, in the era it negotiates: 2026-07-28
// with Nexus.
func modernClient(t *testing.T, url string, opts ...client.ClientOption) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "eras-test", Version: "1"}}}); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestModernClientsNeedNoAffinity: two `nexus serve --http` replicas behind a
// round-robin balancer with no stickiness. A 2026-07-28 client is served by both,
// request by request; a legacy client's session lives in one replica, so without
// affinity its next request reaches the other and is refused, which is why the
// load-balancer section routes legacy sessions by Mcp-Session-Id.
func TestModernClientsNeedNoAffinity(t *testing.T) {
	t.Parallel()
	h := newHome(t, map[string]any{
		"servers": map[string]any{"fx": map[string]any{"command": built.fixture}},
		"policy":  map[string]any{"default": map[string]any{"allow": []string{"*"}}},
	})
	rr := &roundRobin{hits: map[string]int{}}
	for range 2 {
		u, _ := h.serveHTTPEnv([]string{"NEXUS_STATE_KEY=" + stateKey}, "--no-memory")
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		parsed.Path = "" // the balancer passes the path on
		rr.backends = append(rr.backends, parsed)
	}
	lb := httptest.NewServer(rr)
	t.Cleanup(lb.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	c := modernClient(t, lb.URL+"/mcp")
	if v := c.ProtocolVersion(); v != "2026-07-28" {
		t.Fatalf("the client negotiated %s, want 2026-07-28", v)
	}
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(toolNamesOf(tools.Tools), "fx__echo") {
		t.Fatalf("tools/list through the balancer: %s", toolNamesOf(tools.Tools))
	}
	for i := range 6 {
		res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"message": i}}})
		if err != nil || res.IsError {
			t.Fatalf("call %d through the balancer: %v %+v", i, err, res)
		}
	}
	rr.mu.Lock()
	for _, b := range rr.backends {
		if rr.hits[b.Host] < 3 {
			t.Errorf("replica %s served %d requests: the balancer did not spread them", b.Host, rr.hits[b.Host])
		}
	}
	rr.mu.Unlock()

	// A legacy session lives in the replica that answered initialize: the next
	// request (the initialized notification, or a list) reaches the other one.
	tr, err := transport.NewStreamableHTTP(lb.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	legacy := client.NewClient(tr, client.WithLegacyProtocolOnly())
	if err := legacy.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer legacy.Close()
	_, err = legacy.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "legacy", Version: "1"}}})
	if err == nil {
		_, err = legacy.ListTools(ctx, mcp.ListToolsRequest{})
	}
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a legacy session without affinity: want the other replica's 404, got %v", err)
	}
}

// toolNamesOf joins tool names, for messages.
func toolNamesOf(tools []mcp.Tool) string {
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
	}
	return strings.Join(names, " ")
}

// TestTypeScriptClientBothEras: the TypeScript SDK v2's client
// (@modelcontextprotocol/client), pinned to 2026-07-28 and in its legacy mode, on
// both fronts. Behind Nexus is the fixture, a legacy server whose ask tool sends
// its client a sampling, an elicitation or a roots request during the call: the
// modern client gets each as an InputRequiredResult and answers it on its retry,
// the legacy one as a request of its own; either way the call returns what the
// client's handler said.
func TestTypeScriptClientBothEras(t *testing.T) {
	t.Parallel()
	node, _ := peerScript(t, "@modelcontextprotocol/client/package.json")
	h := newHome(t, map[string]any{
		"servers": map[string]any{"fx": map[string]any{"command": built.fixture}},
		"policy":  map[string]any{"default": map[string]any{"allow": []string{"*"}}},
	})
	httpURL, _ := h.serveHTTP("--no-memory")
	fronts := map[string][]string{
		"http":  {httpURL},
		"stdio": {"--", built.nexus, "serve", "--no-memory"},
	}
	for _, front := range []string{"stdio", "http"} {
		for _, era := range []string{"modern", "legacy"} {
			t.Run(front+"/"+era, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, node, append([]string{"testdata/era-client.mjs", era}, fronts[front]...)...)
				cmd.Env = h.env()
				var stderr strings.Builder
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("the client failed: %v\n%s", err, stderr.String())
				}
				var got struct {
					ProtocolVersion string   `json:"protocolVersion"`
					Tools           []string `json:"tools"`
					Echo            string   `json:"echo"`
					Sampling        string   `json:"sampling"`
					Elicitation     string   `json:"elicitation"`
					Roots           string   `json:"roots"`
					Asked           []string `json:"asked"`
					Error           string   `json:"error"`
				}
				if err := json.Unmarshal(out, &got); err != nil || got.Error != "" {
					t.Fatalf("the client said %s (%v)\n%s", out, err, stderr.String())
				}
				want := map[string]string{"modern": "2026-07-28", "legacy": "2025-11-25"}[era]
				if got.ProtocolVersion != want {
					t.Errorf("negotiated %s, want %s", got.ProtocolVersion, want)
				}
				if !slices.Contains(got.Tools, "fx__echo") || got.Echo != "hello" {
					t.Errorf("tools %v, echo %q", got.Tools, got.Echo)
				}
				for what, says := range map[string]string{"sampling": got.Sampling, "elicitation": got.Elicitation, "roots": got.Roots} {
					wantSaid := map[string]string{"sampling": "the model says hi", "elicitation": `"name":"ann"`, "roots": "file:///ts-root"}[what]
					if !strings.Contains(says, wantSaid) {
						t.Errorf("the %s call returned %q, not the client's answer", what, says)
					}
				}
				if !slices.Equal(got.Asked, []string{"sampling", "elicitation", "roots"}) {
					t.Errorf("the client's handlers ran %v, want each once", got.Asked)
				}
			})
		}
	}
}
