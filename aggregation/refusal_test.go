package aggregation

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nexus-mcp/nexus/config"
)

// TestRefusalsNameNoFileToRemoteAgents: a refusal over HTTP names the agent, the
// tool, the rule and where in the config it lives, never the path of the file
// that holds it; on stdio, the client of this machine's user, it names the file.
func TestRefusalsNameNoFileToRemoteAgents(t *testing.T) {
	t.Parallel()
	const file = "/home/alice/private-layout/nexus/config.json"
	url := newTestChild("web").serveHTTP(t)
	cfg, err := config.Parse(file, []byte(fmt.Sprintf(`{
		"servers": {"web": {"url": %q, "timeout": "20s"}},
		"agents": {"other": {"tokenSha256": %q}},
		"policy": {"default": {"allow": ["*"]}, "agents": {"other": {"allow": ["*"], "deny": ["web.echo"]}}}}`, url, TokenHash(tokens["other"]))))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := serveHTTP(t, g)
	for _, tc := range []struct {
		front    string
		client   func() *testClient
		wantFile bool
	}{
		{frontHTTP, func() *testClient { return httpClient(t, srv.URL+"/mcp", tokens["other"]) }, false},
		{frontStdio, func() *testClient { return stdioClient(t, g, "other") }, true},
	} {
		t.Run(tc.front, func(t *testing.T) {
			c := tc.client()
			c.initialize("test")
			got, isErr := call(t, c, "web__echo", "hi")
			if !isErr || !strings.Contains(got, `agent "other" may not call "web.echo"`) || !strings.Contains(got, "policy.agents.other") || !strings.Contains(got, "web.echo") {
				t.Fatalf("the refusal: %q (error %v), want one that names the agent, the tool and the rule", got, isErr)
			}
			if strings.Contains(got, file) != tc.wantFile {
				t.Errorf("the refusal %q names the file: %v, want %v", got, !tc.wantFile, tc.wantFile)
			}
		})
	}
}
