package aggregation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/nexus-mcp/nexus/upstream"
)

// eraServer is the config entry of a stdio era child of kind, logging to log.
func eraServer(kind, log, extra string) string {
	return fmt.Sprintf(`{"command": %q, "args": ["-test.run=^$"], "env": {%q: %q, "NEXUS_TEST_ERA_LOG": %q}, "timeout": "20s"%s}`,
		os.Args[0], eraChildEnv, kind, log, extra)
}

// shortProbe makes a silent child's probe end sooner than upstream.DiscoverWait.
func shortProbe(kids map[string]*child) {
	for _, c := range kids {
		c.probeWait = time.Second
	}
}

func statusOf(t *testing.T, g *Gateway, name string) Status {
	t.Helper()
	for _, s := range g.Servers() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no server %s", name)
	return Status{}
}

func toolNames(g *Gateway) []string {
	var names []string
	for _, tl := range g.Tools() {
		names = append(names, tl.Wire)
	}
	return names
}

// TestChildEras: Nexus offers each kind of stdio child initialize, speaks the
// modern era only to a child that refuses it, lists its tools, calls one in
// that era and says the era, and why, in its status. A dual-era child keeps a
// session: its SDK refuses its own requests to the client on a modern one.
func TestChildEras(t *testing.T) {
	for _, tt := range []struct{ kind, era, protocol, why string }{
		{"dual", "legacy", "2025-11-25 (session)", upstream.EraAnswered},
		{"modern", "modern", "2026-07-28 (stateless)", upstream.EraModernOnly},
		{"legacy", "legacy", "2025-11-25 (session)", upstream.EraAnswered},
		{"silent", "legacy", "2025-11-25 (session)", upstream.EraAnswered},
	} {
		t.Run(tt.kind, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "era.log")
			var tune func(map[string]*child)
			if tt.kind == "silent" {
				tune = shortProbe // the others answer in time, however slow the machine
			}
			g := comebackGateway(t, `{"e": `+eraServer(tt.kind, log, "")+`}`, tune)
			waitState(t, g.kids()["e"], StateReady)
			waitFor(t, "e__echo in the manifest", func() bool { return slices.Contains(toolNames(g), "e__echo") })
			if got := callText(t, g, "e__echo", `{"text":"hi"}`); !strings.Contains(got, tt.era+":hi") {
				t.Errorf("the call answered %s, not in the %s era", got, tt.era)
			}
			if st := statusOf(t, g, "e"); st.Protocol != tt.protocol || st.ProtocolWhy != tt.why {
				t.Errorf("status says protocol %q (%s), not %q (%s)", st.Protocol, st.ProtocolWhy, tt.protocol, tt.why)
			}
			for pid, methods := range eraLog(log) {
				if len(methods) == 0 || methods[0] != "initialize" {
					t.Errorf("process %s was not offered initialize first: %v", pid, methods)
				}
				if probed := slices.Contains(methods, "server/discover"); probed != (tt.era == "modern") {
					t.Errorf("process %s of a %s child: server/discover asked %v: %v", pid, tt.era, probed, methods)
				}
			}
		})
	}
}

// TestChildHTTPEras: the same over streamable HTTP, against mcp-go servers that
// serve both eras, only the modern one, only the legacy one. mcp-go answers
// initialize whatever versions it is given, so the modern-only server's
// refusal of it is the test's, as a server of that era answers.
func TestChildHTTPEras(t *testing.T) {
	for _, tt := range []struct {
		name     string
		versions []string
		era      string
		protocol string
	}{
		{"dual", nil, "legacy", "2025-11-25 (session)"},
		{"modern", []string{"2026-07-28"}, "modern", "2026-07-28 (stateless)"},
		{"legacy", []string{"2025-11-25"}, "legacy", "2025-11-25 (session)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := newEraServer(tt.name)
			h := server.NewStreamableHTTPServer(srv, server.WithStreamableHTTPProtocolVersions(tt.versions...))
			var mu sync.Mutex
			var bad []string // what a modern request may not be
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				if tt.name == "modern" && bytes.Contains(body, []byte(`"method":"initialize"`)) {
					var req struct {
						ID json.RawMessage `json:"id"`
					}
					_ = json.Unmarshal(body, &req)
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32022,"message":"unsupported protocol version","data":{"supported":["2026-07-28"]}}}`, req.ID)
					return
				}
				mu.Lock()
				switch {
				case r.Method == http.MethodGet && r.Header.Get("Mcp-Session-Id") == "":
					// mcp-go's transport opens its stream once any answer to
					// initialize arrives, a refusal too; Nexus then connects
					// afresh in the era found.
				case r.Method != http.MethodPost:
					bad = append(bad, r.Method)
				case r.Header.Get("Mcp-Method") == "" && r.Header.Get("Mcp-Protocol-Version") != "":
					bad = append(bad, "a POST without Mcp-Method")
				case r.Header.Get("Mcp-Session-Id") != "" && r.Header.Get("Mcp-Protocol-Version") == "2026-07-28":
					bad = append(bad, "a modern POST with a session")
				}
				mu.Unlock()
				h.ServeHTTP(w, r)
			}))
			t.Cleanup(ts.Close)
			g := comebackGateway(t, fmt.Sprintf(`{"e": {"transport": "streamable-http", "url": %q, "timeout": "20s"}}`, ts.URL+"/mcp"), nil)
			waitState(t, g.kids()["e"], StateReady)
			if got := callText(t, g, "e__echo", `{"text":"hi"}`); !strings.Contains(got, tt.era+":hi") {
				t.Errorf("the call answered %s, not in the %s era", got, tt.era)
			}
			if got := statusOf(t, g, "e").Protocol; got != tt.protocol {
				t.Errorf("status says protocol %q, not %q", got, tt.protocol)
			}
			if got := callText(t, g, "e__grow", `{}`); !strings.Contains(got, "grew") {
				t.Fatalf("grow answered %s", got)
			}
			waitFor(t, "the grown tool in the manifest", func() bool { return slices.Contains(toolNames(g), "e__grown") })
			mu.Lock()
			defer mu.Unlock()
			if tt.era == "modern" && len(bad) > 0 {
				t.Errorf("a modern child was sent %v", bad)
			}
		})
	}
}

// TestModernListChanged: a modern stdio child's tools/list_changed, which it
// sends on the subscriptions/listen stream Nexus opened, reaches the manifest.
func TestModernListChanged(t *testing.T) {
	log := filepath.Join(t.TempDir(), "era.log")
	g := comebackGateway(t, `{"e": `+eraServer("modern", log, "")+`}`, nil)
	waitState(t, g.kids()["e"], StateReady)
	if got := callText(t, g, "e__grow", `{}`); !strings.Contains(got, "grew") {
		t.Fatalf("grow answered %s", got)
	}
	waitFor(t, "the grown tool in the manifest", func() bool { return slices.Contains(toolNames(g), "e__grown") })
	var listened bool
	for _, methods := range eraLog(log) {
		listened = listened || slices.Contains(methods, "subscriptions/listen")
	}
	if !listened {
		t.Error("Nexus never opened a subscriptions/listen stream")
	}
}

// TestSessionConnectionsDoNotProbe: the connections of client sessions to a
// "client" server reuse the era the child's own connection found: a legacy
// child's are never sent server/discover, a modern child's never initialize.
func TestSessionConnectionsDoNotProbe(t *testing.T) {
	for _, tt := range []struct{ kind, era, never string }{
		{"legacy", "legacy", "server/discover"},
		{"modern", "modern", "initialize"},
	} {
		t.Run(tt.kind, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "era.log")
			g := comebackGateway(t, `{"e": `+eraServer(tt.kind, log, `, "sessions": "client"`)+`}`, nil)
			waitState(t, g.kids()["e"], StateReady)
			first := eraLog(log)
			if len(first) != 1 {
				t.Fatalf("%d processes before any client: %v", len(first), first)
			}
			c := stdioClient(t, g, "anonymous")
			c.initializeWith("test", map[string]any{})
			if got, isErr := call(t, c, "e__echo", "hi"); isErr || got != tt.era+":hi" {
				t.Fatalf("the session's call answered %q (error %v)", got, isErr)
			}
			all := eraLog(log)
			if len(all) != 2 {
				t.Fatalf("%d processes, not the child's own and the session's: %v", len(all), all)
			}
			for pid, methods := range all {
				if _, own := first[pid]; own {
					continue
				}
				if slices.Contains(methods, tt.never) {
					t.Errorf("the session's process was sent %s: %v", tt.never, methods)
				}
			}
		})
	}
}

// TestSessionLevelReachesItsModernChild: a client session's own connection to
// a modern child asks it, in every request's _meta, for the logging level that
// session set; the child's own connection, which no session's level reaches
// ("sessions": "client"), asks for none.
func TestSessionLevelReachesItsModernChild(t *testing.T) {
	g := comebackGateway(t, `{"e": `+eraServer("modern", filepath.Join(t.TempDir(), "era.log"), `, "sessions": "client"`)+`}`, nil)
	waitState(t, g.kids()["e"], StateReady)
	c := stdioClient(t, g, "anonymous")
	c.initializeWith("test", map[string]any{})
	if m := c.request("logging/setLevel", map[string]any{"level": "debug"}); m.Error != nil {
		t.Fatalf("logging/setLevel: %v", m.Error)
	}
	if got, isErr := call(t, c, "e__echo", "hi"); isErr || got != "modern:hi" {
		t.Fatalf("e__echo answered %q (error %v)", got, isErr)
	}
	g.sessions.mu.Lock()
	var s *session
	for _, each := range g.sessions.m {
		s = each
	}
	g.sessions.mu.Unlock()
	own, _ := g.kids()["e"].current()
	mine := g.kids()["e"].openConn(s)
	if s == nil || own == nil || mine == nil || mine == own {
		t.Fatalf("no session's connection beside the child's own (session %v, own %v, the session's %v)", s, own, mine)
	}
	if got := mine.ModernMeta(mine.Version()).LogLevel; got != "debug" {
		t.Errorf("the session's connection asks for level %q, want its session's debug", got)
	}
	if got := own.ModernMeta(own.Version()).LogLevel; got != "" {
		t.Errorf("the child's own connection asks for level %q, want none", got)
	}
}

// TestPinnedEraRefusesTheOther: servers.X.protocolVersion pins the era; a child
// of the other era fails to start with an error that says so.
func TestPinnedEraRefusesTheOther(t *testing.T) {
	for _, tt := range []struct{ kind, pin, want string }{
		{"modern", "2025-11-25", "servers.e.protocolVersion is 2025-11-25"},
		{"legacy", "2026-07-28", "does not speak protocol 2026-07-28, which servers.e.protocolVersion requires"},
	} {
		t.Run(tt.pin, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "era.log")
			g := comebackGateway(t, `{"e": `+eraServer(tt.kind, log, fmt.Sprintf(`, "protocolVersion": %q`, tt.pin))+`}`, nil)
			waitFor(t, "the first attempt to fail", func() bool { return statusOf(t, g, "e").Error != "" })
			if got := statusOf(t, g, "e").Error; !strings.Contains(got, tt.want) {
				t.Errorf("the error says %q, not %q", got, tt.want)
			}
			for pid, methods := range eraLog(log) {
				if tt.pin == "2025-11-25" && slices.Contains(methods, "server/discover") {
					t.Errorf("process %s of a child pinned legacy was probed: %v", pid, methods)
				}
				if tt.pin == "2026-07-28" && slices.Contains(methods, "initialize") {
					t.Errorf("process %s of a child pinned modern was sent initialize: %v", pid, methods)
				}
			}
		})
	}
}

// TestModernResourceSubscription: a client's resources/subscribe reaches a
// modern child as a subscriptions/listen stream naming the resource, the
// child's update reaches the client, and an unsubscribe takes the resource out
// of the stream.
func TestModernResourceSubscription(t *testing.T) {
	log := filepath.Join(t.TempDir(), "era.log")
	g := comebackGateway(t, `{"e": `+eraServer("modern", log, "")+`}`, nil)
	waitState(t, g.kids()["e"], StateReady)
	c := stdioClient(t, g, "anonymous")
	c.initializeWith("test", map[string]any{})
	if m := c.request("resources/subscribe", map[string]any{"uri": "era://note"}); m.Error != nil {
		t.Fatalf("resources/subscribe: %v", m.Error)
	}
	if got, _ := call(t, c, "e__touch", ""); got != "told 1" {
		t.Fatalf("touch answered %q: the child does not see the subscription", got)
	}
	if !c.waitNote("notifications/resources/updated", func(m wireMsg) bool { return strings.Contains(string(m.Params), "era://note") }) {
		t.Fatal("the update never reached the subscribed client")
	}
	if m := c.request("resources/unsubscribe", map[string]any{"uri": "era://note"}); m.Error != nil {
		t.Fatalf("resources/unsubscribe: %v", m.Error)
	}
	waitFor(t, "the stream without the resource", func() bool {
		got, _ := call(t, c, "e__touch", "")
		return got == "told 0"
	})
	for _, methods := range eraLog(log) {
		if slices.Contains(methods, "resources/subscribe") || slices.Contains(methods, "resources/unsubscribe") {
			t.Errorf("a modern child was sent a legacy subscription request: %v", methods)
		}
	}
}

// TestRememberedEraIsProbedAgain: a restart offers the era the last process
// was found to speak; when the server has changed era and refuses it, the same
// process is asked server/discover, and the era it then speaks is remembered.
func TestRememberedEraIsProbedAgain(t *testing.T) {
	dir := t.TempDir()
	log, kind := filepath.Join(dir, "era.log"), filepath.Join(dir, "kind")
	if err := os.WriteFile(kind, []byte("legacy"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := comebackGateway(t, `{"e": `+eraServer("file:"+kind, log, "")+`}`, nil)
	waitState(t, g.kids()["e"], StateReady)
	if got := statusOf(t, g, "e").Protocol; got != "2025-11-25 (session)" {
		t.Fatalf("first protocol %q", got)
	}
	if err := os.WriteFile(kind, []byte("modern"), 0o600); err != nil {
		t.Fatal(err)
	}
	callText(t, g, "e__exit", `{}`)
	waitFor(t, "the server back as a modern one", func() bool {
		s := statusOf(t, g, "e")
		return s.State == StateReady && s.Protocol == "2026-07-28 (stateless)"
	})
	starts := eraLog(log)
	if len(starts) != 2 {
		t.Fatalf("%d processes, want the legacy one and its restart: %v", len(starts), starts)
	}
	var asked bool
	for _, m := range starts {
		if len(m) >= 2 && m[0] == "initialize" && m[1] == "server/discover" {
			asked = true // the restart: initialize, refused, then discover
		}
	}
	if !asked {
		t.Errorf("the processes were asked %v: want the restart offered initialize, then server/discover", starts)
	}
}
