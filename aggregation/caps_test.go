package aggregation

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
)

// TestFrontOffersWhatChildrenOffer: the capabilities Nexus declares to a
// client are tools and what its servers declared, no more; a subscription to a
// server that offers none is refused as that server refuses it.
func TestFrontOffersWhatChildrenOffer(t *testing.T) {
	raw := fmt.Sprintf(`{"command": %q, "args": ["-test.run=^$"], "env": {"NEXUS_TEST_CHILD": "raw"}}`, os.Args[0])
	for _, tt := range []struct {
		name    string
		servers string
		want    []string // the capabilities declared
		sub     bool     // resources.subscribe
	}{
		{"tools and logging", `{"r": ` + raw + `}`, []string{"logging", "tools"}, false},
		{"resources without subscriptions", `{"n": ` + eraServer("nosubscribe", filepath.Join(t.TempDir(), "n.log"), "") + `}`, []string{"logging", "resources", "tools"}, false},
		{"two servers", `{"r": ` + raw + `, "e": ` + eraServer("legacy", filepath.Join(t.TempDir(), "e.log"), "") + `}`, []string{"logging", "resources", "tools"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := comebackGateway(t, tt.servers, nil)
			for _, c := range g.kids() {
				waitState(t, c, StateReady)
			}
			c := stdioClient(t, g, "anonymous")
			caps := declaredCaps(t, c)
			var got []string
			for k := range caps {
				got = append(got, k)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("declared %v, want %v", got, tt.want)
			}
			var rs struct {
				Subscribe bool `json:"subscribe"`
			}
			if r, ok := caps["resources"]; ok {
				_ = json.Unmarshal(r, &rs)
			}
			if rs.Subscribe != tt.sub {
				t.Errorf("resources.subscribe is %v, want %v", rs.Subscribe, tt.sub)
			}
			c.notify("notifications/initialized", map[string]any{})
			if tt.name == "resources without subscriptions" {
				m := c.request("resources/subscribe", map[string]any{"uri": "era://note"})
				if m.Error == nil || m.Error.Code != jsonrpc.CodeMethodNotFound {
					t.Errorf("subscribing to a server without subscriptions answered %s %+v, want -32601", m.Result, m.Error)
				}
			}
		})
	}
}

// TestFrontOffersEverythingForAServerStillStarting: a client that initializes
// while a server is still making its first start (initialize waits a second at
// most) is declared what that server might offer, tasks included, whichever
// front it came on; once the server is up, a new client is declared what it
// does offer.
func TestFrontOffersEverythingForAServerStillStarting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	g := comebackGateway(t, `{"e": `+eraServer("gate:"+gate, filepath.Join(dir, "era.log"), "")+`}`, nil)
	declared := func() map[string]json.RawMessage { return declaredCaps(t, stdioClient(t, g, "anonymous")) }
	early := declared()
	for _, k := range []string{"tools", "prompts", "resources", "completions", "logging", "tasks"} {
		if _, ok := early[k]; !ok {
			t.Errorf("a client that came before the server was up was not declared %s: %v", k, early)
		}
	}
	os.Remove(gate)
	waitState(t, g.kids()["e"], StateReady)
	late := declared()
	if _, ok := late["tasks"]; ok {
		t.Errorf("tasks declared once the server, which offers none, is up: %v", late)
	}
}

// TestDeafChildIsToldRootsOnce: a shared child that asked for roots as it
// started but never asks again is told the roots changed before the first
// client's call, and, having not asked, is not told (nor its calls held up)
// again for the next client.
func TestDeafChildIsToldRootsOnce(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "told.log")
	g := comebackGateway(t, fmt.Sprintf(`{"r": {"command": %q, "args": ["-test.run=^$"], "env": {"NEXUS_TEST_CHILD": "raw-roots", "NEXUS_TEST_RAW_LOG": %q}}}`, os.Args[0], log), nil)
	c := g.kids()["r"]
	waitState(t, c, StateReady)
	waitFor(t, "the child to ask for roots as it starts", func() bool {
		cn, _ := c.current()
		return cn != nil && cn.AskedRoots()
	})
	for i := range 2 {
		cl := stdioClient(t, g, "anonymous")
		cl.initializeWith(fmt.Sprint("client", i), map[string]any{"roots": map[string]any{"listChanged": true}})
		if got, isErr := call(t, cl, "r__note", ""); isErr || got != "noted" {
			t.Fatalf("client %d: the call answered %q", i, got)
		}
	}
	b, _ := os.ReadFile(log)
	if n := strings.Count(string(b), "notifications/roots/list_changed"); n != 1 {
		t.Errorf("the child was told the roots changed %d times, want once", n)
	}
}

// declaredCaps initializes c's session, declaring nothing, and returns the
// capabilities the gateway declared to it.
func declaredCaps(t *testing.T, c *testClient) map[string]json.RawMessage {
	t.Helper()
	m := c.request("initialize", map[string]any{"protocolVersion": "2025-11-25", "clientInfo": map[string]any{"name": "t", "version": "1"}, "capabilities": map[string]any{}})
	if m.Error != nil {
		t.Fatal(m.Error)
	}
	var res struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(m.Result, &res); err != nil {
		t.Fatal(err)
	}
	return res.Capabilities
}
