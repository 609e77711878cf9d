package aggregation

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/config"
)

// TestUpstreamShare: one agent cannot take all of a "client" server's upstream
// sessions. An agent at its share (maxSessionsPerAgent 1) that opens another
// client session has its own idle upstream ended to make room, so its many
// sessions hold one upstream and another agent still gets one; a server at
// maxSessions ends the least recently used idle upstream for a newcomer; only
// when every candidate is busy is the request refused, with the setting's name.
func TestUpstreamShare(t *testing.T) {
	t.Parallel()
	web := newTestChild("web")
	url := web.serveHTTP(t)
	cfg, err := config.Parse("test.json", []byte(fmt.Sprintf(`{
		"servers": {"web": {"url": %q, "timeout": "20s", "sessions": "client", "maxSessions": 2, "maxSessionsPerAgent": 1}},
		"agents": {"tester": {"tokenSha256": %q}, "other": {"tokenSha256": %q}, "third": {"tokenSha256": %q}},
		"policy": {"default": {"allow": ["*"]}}}`, url, TokenHash(tokens["tester"]), TokenHash(tokens["other"]), TokenHash("tok-third"))))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := serveHTTP(t, g)
	f := &sessionsFixture{t: t, g: g, url: srv.URL + "/mcp"}
	open := func(token string) *testClient {
		c := httpClient(t, f.url, token)
		c.initialize("test")
		return c
	}
	served := func(who string, c *testClient) {
		t.Helper()
		if got, isErr := call(t, c, "web__echo", who); isErr || !strings.Contains(got, who) {
			t.Fatalf("%s: %q (error %v), want it served", who, got, isErr)
		}
	}

	// The attack: one agent opens many sessions and calls once in each.
	var others []*testClient
	for i := range 4 {
		c := open(tokens["other"])
		served(fmt.Sprintf("other-%d", i), c)
		others = append(others, c)
		if n := f.upstreamSessions("web"); n != 1 {
			t.Fatalf("after other's session %d: %d upstream sessions, want 1 (its share)", i, n)
		}
	}
	tester := open(tokens["tester"])
	served("tester", tester)
	if n := f.upstreamSessions("web"); n != 2 {
		t.Fatalf("%d upstream sessions, want 2", n)
	}

	// The server is full, every upstream idle: a third agent ends the least
	// recently used (other's), and other's next call opens one afresh, ending
	// the least recently used again (tester's).
	third := open("tok-third")
	served("third", third)
	served("other-again", others[0])
	if n := f.upstreamSessions("web"); n != 2 {
		t.Fatalf("%d upstream sessions, want 2", n)
	}

	// Busy upstreams are never ended: with other's in a call and third's too,
	// tester is refused, naming the setting, and so is another session of other.
	release, entered := web.holdWaits(2)
	done := make(chan string, 2)
	for _, c := range []*testClient{others[0], third} {
		go func() {
			m := c.requestWithin("tools/call", map[string]any{"name": "web__wait", "arguments": map[string]any{}}, 30*time.Second)
			done <- string(m.Result)
		}()
		select {
		case <-entered:
		case <-time.After(20 * time.Second):
			t.Fatal("the wait call did not reach the child")
		}
	}
	if got, isErr := call(t, tester, "web__echo", "tester"); !isErr || !strings.Contains(got, "servers.web.maxSessions") {
		t.Errorf("tester with every upstream busy: %q (error %v), want a refusal naming servers.web.maxSessions", got, isErr)
	}
	if got, isErr := call(t, others[1], "web__echo", "other"); !isErr || !strings.Contains(got, "servers.web.maxSessionsPerAgent") || !strings.Contains(got, "agent other") {
		t.Errorf("other's second session with its upstream busy: %q (error %v), want a refusal naming servers.web.maxSessionsPerAgent", got, isErr)
	}
	close(release)
	for range 2 {
		if got := <-done; !strings.Contains(got, "released") {
			t.Errorf("a wait call: %s", got)
		}
	}
	served("tester-after", tester)
}
