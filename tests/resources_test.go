package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// resourceServers is a home whose servers are fixtures serving resources
// (FIXTURE_RESOURCES), one per label, each named after its label and logging to its
// own file: what a server's log holds, only that server received.
type resourceServers struct {
	*home
	logs map[string]string
}

func newResourceServers(t *testing.T, policy map[string]any, labels ...string) *resourceServers {
	t.Helper()
	h := newHome(t, nil)
	rs := &resourceServers{home: h, logs: map[string]string{}}
	servers := map[string]any{}
	for _, l := range labels {
		rs.logs[l] = filepath.Join(h.dir, l+".log")
		servers[l] = map[string]any{"command": built.fixture, "env": map[string]string{"FIXTURE_CALL_LOG": rs.logs[l], "FIXTURE_RESOURCES": l}}
	}
	cfg := map[string]any{"servers": servers}
	if policy != nil {
		cfg["policy"] = policy
	}
	h.writeConfig(cfg)
	return rs
}

// received counts the lines of a server's log equal to line.
func (rs *resourceServers) received(server, line string) int {
	data, _ := os.ReadFile(rs.logs[server])
	n := 0
	for _, l := range strings.Split(string(data), "\n") {
		if l == line {
			n++
		}
	}
	return n
}

// listed returns field of every item of a list method's result.
func listed(t *testing.T, s *session, method, items, field string) []string {
	t.Helper()
	res, rpcErr := s.request(method, map[string]any{})
	if rpcErr != nil {
		t.Fatalf("%s: %+v", method, rpcErr)
	}
	var list map[string][]map[string]any
	if err := json.Unmarshal(res, &list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, it := range list[items] {
		v, _ := it[field].(string)
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// readText reads uri and returns its first content's uri and text.
func readText(t *testing.T, s *session, uri string) (gotURI, text string) {
	t.Helper()
	res, rpcErr := s.request("resources/read", map[string]any{"uri": uri})
	if rpcErr != nil {
		t.Fatalf("resources/read %s: %d %s", uri, rpcErr.Code, rpcErr.Message)
	}
	var r struct {
		Contents []struct {
			URI  string `json:"uri"`
			Text string `json:"text"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(res, &r); err != nil || len(r.Contents) == 0 {
		t.Fatalf("resources/read %s: %s", uri, res)
	}
	return r.Contents[0].URI, r.Contents[0].Text
}

// TestSharedResourceURIsAreNamespaced: a URI two servers list (a plain one and an MCP
// App's ui:// page) is listed once per server, namespaced, and each namespaced form is
// read from its own server only; a URI one server lists keeps its name; the bare
// shared URI is refused with both candidates, not guessed.
func TestSharedResourceURIsAreNamespaced(t *testing.T) {
	t.Parallel()
	rs := newResourceServers(t, nil, "alpha", "beta")
	s := rs.serveStdio("--no-memory")
	want := []string{"alpha://own", "beta://own", "shared://nexus/alpha/shared://doc", "shared://nexus/beta/shared://doc",
		"ui://nexus/alpha/ui://app/main.html", "ui://nexus/beta/ui://app/main.html"}
	if got := listed(t, s, "resources/list", "resources", "uri"); !slices.Equal(got, want) {
		t.Fatalf("resources/list:\n got %q\nwant %q", got, want)
	}
	for _, tc := range []struct{ uri, text string }{
		{"shared://doc", "doc of "},
		{"ui://app/main.html", "<html>app of "},
	} {
		for _, owner := range []string{"alpha", "beta"} {
			other := map[string]string{"alpha": "beta", "beta": "alpha"}[owner]
			ns := strings.SplitN(tc.uri, ":", 2)[0] + "://nexus/" + owner + "/" + tc.uri
			before, otherBefore := rs.received(owner, "read:"+tc.uri), rs.received(other, "read:"+tc.uri)
			gotURI, text := readText(t, s, ns)
			if text != tc.text+owner && !strings.HasPrefix(text, tc.text+owner) {
				t.Errorf("reading %s gave %q: not %s's", ns, text, owner)
			}
			if gotURI != ns {
				t.Errorf("reading %s: the contents name %q, not the URI the client knows", ns, gotURI)
			}
			if rs.received(owner, "read:"+tc.uri) != before+1 || rs.received(other, "read:"+tc.uri) != otherBefore {
				t.Errorf("reading %s: %s's log should show one read of %s and %s's none", ns, owner, tc.uri, other)
			}
		}
		m := s.requestMsg("resources/read", map[string]any{"uri": tc.uri})
		if m.Error == nil || m.Error.Code != -32602 || !strings.Contains(m.Error.Message, "://nexus/alpha/") || !strings.Contains(m.Error.Message, "://nexus/beta/") {
			t.Errorf("reading the bare shared %s: want -32602 naming both candidates, got %s", tc.uri, m.raw)
		}
	}
	if _, text := readText(t, s, "beta://own"); text != "own of beta" {
		t.Errorf("a URI only one server lists: %q", text)
	}
}

// TestSharedTemplatesAreListedPerOwner: three servers with the same template list it
// three times, namespaced; each expansion is read from its own server.
func TestSharedTemplatesAreListedPerOwner(t *testing.T) {
	t.Parallel()
	servers := []string{"alpha", "beta", "gamma"}
	rs := newResourceServers(t, nil, servers...)
	s := rs.serveStdio("--no-memory")
	var want []string
	for _, srv := range servers {
		want = append(want, "shared://nexus/"+srv+"/shared://item/{id}")
	}
	if got := listed(t, s, "resources/templates/list", "resourceTemplates", "uriTemplate"); !slices.Equal(got, want) {
		t.Fatalf("resources/templates/list:\n got %q\nwant %q", got, want)
	}
	for _, owner := range servers {
		t.Run(owner, func(t *testing.T) {
			uri := strings.Replace("shared://nexus/"+owner+"/shared://item/{id}", "{id}", "7", 1)
			if _, text := readText(t, s, uri); text != "item 7 of "+owner {
				t.Errorf("reading %s gave %q", uri, text)
			}
			for _, srv := range servers {
				if n, wantN := rs.received(srv, "read:shared://item/7"), map[bool]int{true: 1}[srv == owner]; n != wantN {
					t.Errorf("%s's log shows %d reads of shared://item/7, want %d", srv, n, wantN)
				}
			}
			// The next subtest's owner must start from an empty count.
			for _, srv := range servers {
				_ = os.Remove(rs.logs[srv])
			}
		})
	}
	m := s.requestMsg("resources/read", map[string]any{"uri": "shared://item/7"})
	if m.Error == nil || m.Error.Code != -32602 || strings.Count(m.Error.Message, "://nexus/") != 3 {
		t.Errorf("reading a bare URI three templates match: want -32602 naming the three, got %s", m.raw)
	}
}

// TestSharedResourceSubscription: a subscription by namespaced URI reaches only its
// owner, and the owner's updates carry the URI the client subscribed with; another
// server's update of the same URI does not reach the session.
func TestSharedResourceSubscription(t *testing.T) {
	t.Parallel()
	rs := newResourceServers(t, nil, "alpha", "beta")
	s := rs.serveStdio("--no-memory")
	ns := "shared://nexus/beta/shared://doc"
	if _, rpcErr := s.request("resources/subscribe", map[string]any{"uri": ns}); rpcErr != nil {
		t.Fatalf("subscribe: %+v", rpcErr)
	}
	if rs.received("beta", "subscribe:shared://doc") != 1 || rs.received("alpha", "subscribe:shared://doc") != 0 {
		t.Fatal("the subscription should reach beta only")
	}
	s.call("alpha__touch", map[string]any{"uri": "shared://doc"})
	s.call("beta__touch", map[string]any{"uri": "shared://doc"})
	n := s.waitNote("notifications/resources/updated", 10*time.Second, nil)
	if got := uriOfParams(n.Params); got != ns {
		t.Errorf("the update carries %q, want %q (and alpha's update must not arrive)", got, ns)
	}
	if _, rpcErr := s.request("resources/unsubscribe", map[string]any{"uri": ns}); rpcErr != nil {
		t.Fatalf("unsubscribe: %+v", rpcErr)
	}
	eventually(t, 5*time.Second, "beta is asked to unsubscribe", func() bool { return rs.received("beta", "unsubscribe:shared://doc") == 1 })
	s.mu.Lock()
	for _, n := range s.notes {
		if n.Method == "notifications/resources/updated" {
			t.Errorf("an update the session should not get: %s", n.raw)
		}
	}
	s.notes = nil
	s.mu.Unlock()

	// A URI one server lists answers to its own name and to its namespaced form; a
	// session subscribed under both is told under both, and the child is asked once.
	own, nsOwn := "beta://own", "beta://nexus/beta/beta://own"
	for _, u := range []string{own, nsOwn} {
		if _, rpcErr := s.request("resources/subscribe", map[string]any{"uri": u}); rpcErr != nil {
			t.Fatalf("subscribe %s: %+v", u, rpcErr)
		}
	}
	if n := rs.received("beta", "subscribe:"+own); n != 1 {
		t.Errorf("beta was asked to subscribe %d times, want once", n)
	}
	s.call("beta__touch", map[string]any{"uri": own})
	got := map[string]bool{}
	for range 2 {
		got[uriOfParams(s.waitNote("notifications/resources/updated", 10*time.Second, nil).Params)] = true
	}
	if !got[own] || !got[nsOwn] {
		t.Errorf("updates under %v, want both %s and %s", got, own, nsOwn)
	}
	if _, rpcErr := s.request("resources/unsubscribe", map[string]any{"uri": own}); rpcErr != nil {
		t.Fatal(rpcErr)
	}
	if rs.received("beta", "unsubscribe:"+own) != 0 {
		t.Error("beta was asked to unsubscribe while the session still holds the namespaced subscription")
	}
	s.call("beta__touch", map[string]any{"uri": own})
	if u := uriOfParams(s.waitNote("notifications/resources/updated", 10*time.Second, nil).Params); u != nsOwn {
		t.Errorf("after unsubscribing %s, the update carries %q, want %q", own, u, nsOwn)
	}
}

func uriOfParams(params json.RawMessage) string {
	var p struct {
		URI string `json:"uri"`
	}
	_ = json.Unmarshal(params, &p)
	return p.URI
}

// TestMCPAppThroughNexus: an MCP App's tool names its ui:// page; alone, the page
// keeps its URI; with a second server serving the same page, the tool's listing and
// its result name the server's namespaced page, which reads that server's page.
func TestMCPAppThroughNexus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, agent string
		servers     []string
		page        string
	}{
		{"alone", "anyone", []string{"alpha"}, "ui://app/main.html"},
		{"two apps", "anyone", []string{"alpha", "beta"}, "ui://nexus/alpha/ui://app/main.html"},
		// An agent that may use alpha only sees it as if connected to alpha alone.
		{"two apps, an agent that sees one", "alpha-only", []string{"alpha", "beta"}, "ui://app/main.html"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := newResourceServers(t, map[string]any{
				"default": map[string]any{"allow": []string{"@readonly"}},
				"agents":  map[string]any{"alpha-only": map[string]any{"allow": []string{"alpha.*"}}},
			}, tc.servers...)
			s := rs.serveStdio("--agent", tc.agent, "--no-memory")
			var tool struct {
				Meta struct {
					UI struct {
						ResourceURI string `json:"resourceUri"`
					} `json:"ui"`
				} `json:"_meta"`
			}
			if err := json.Unmarshal(s.tools()["alpha__get-weather"], &tool); err != nil || tool.Meta.UI.ResourceURI != tc.page {
				t.Fatalf("alpha__get-weather's _meta.ui.resourceUri is %q, want %q (%v)", tool.Meta.UI.ResourceURI, tc.page, err)
			}
			res, rpcErr := s.request("tools/call", map[string]any{"name": "alpha__get-weather", "arguments": map[string]any{}})
			if rpcErr != nil {
				t.Fatal(rpcErr)
			}
			var r struct {
				Content []struct {
					Type, URI string
				} `json:"content"`
			}
			_ = json.Unmarshal(res, &r)
			if len(r.Content) != 2 || r.Content[1].Type != "resource_link" || r.Content[1].URI != tc.page {
				t.Errorf("the result's link should name %s: %s", tc.page, res)
			}
			if _, text := readText(t, s, tc.page); text != "<html>app of alpha</html>" {
				t.Errorf("reading %s gave %q", tc.page, text)
			}
			if rs.received("alpha", "read:ui://app/main.html") != 1 {
				t.Error("alpha's log should show the page read")
			}
		})
	}
}

// TestBareToolNames: an MCP App calls its server's tools by their own names. Such a
// name is accepted when exactly one server the agent sees has the tool, and policy
// decides on the full name; several owners are an error listing them; a name no
// server has is an unknown tool.
func TestBareToolNames(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	logs := map[string]string{"alpha": filepath.Join(h.dir, "alpha.log"), "beta": filepath.Join(h.dir, "beta.log")}
	h.writeConfig(map[string]any{
		"servers": map[string]any{
			// Only alpha is an app (get-weather); both have echo.
			"alpha": map[string]any{"command": built.fixture, "env": map[string]string{"FIXTURE_CALL_LOG": logs["alpha"], "FIXTURE_RESOURCES": "alpha"}},
			"beta":  map[string]any{"command": built.fixture, "env": map[string]string{"FIXTURE_CALL_LOG": logs["beta"]}},
		},
		"policy": map[string]any{
			"default": map[string]any{"allow": []string{"@readonly"}},
			"agents": map[string]any{
				"no-weather": map[string]any{"allow": []string{"@readonly"}, "deny": []string{"alpha.get-weather"}},
				"beta-less":  map[string]any{"allow": []string{"@readonly"}, "deny": []string{"beta.*"}},
			},
		},
	})
	calls := func(server, tool string) int {
		data, _ := os.ReadFile(logs[server])
		return strings.Count("\n"+string(data), "\n"+tool+"\n")
	}
	for _, tc := range []struct {
		name, agent, tool string
		reaches           string // the server whose log must show the call
		errCode           int    // a JSON-RPC error, or 0
		errHas            []string
		refused           string // a refusal's text must hold this
	}{
		{name: "unique", agent: "anyone", tool: "get-weather", reaches: "alpha"},
		// Bare names are judged by the tools the agent may call (issues 36, 38): a
		// tool it may not call is no answer to one, and is not named.
		{name: "unique but denied by its full name", agent: "no-weather", tool: "get-weather", errCode: -32602, errHas: []string{`unknown tool "get-weather" (`}},
		{name: "ambiguous", agent: "anyone", tool: "echo", errCode: -32602, errHas: []string{"ambiguous", `"alpha__echo"`, `"beta__echo"`}},
		{name: "unique among the servers the agent sees", agent: "beta-less", tool: "echo", reaches: "alpha"},
		{name: "unknown", agent: "anyone", tool: "no-such-tool", errCode: -32602, errHas: []string{"unknown tool"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := h.serveStdio("--agent", tc.agent, "--no-memory")
			before := map[string]int{"alpha": calls("alpha", tc.tool), "beta": calls("beta", tc.tool)}
			m := s.requestMsg("tools/call", map[string]any{"name": tc.tool, "arguments": map[string]any{"message": "hi"}})
			if tc.errCode != 0 {
				if m.Error == nil || m.Error.Code != tc.errCode {
					t.Fatalf("want JSON-RPC error %d, got %s", tc.errCode, m.raw)
				}
				for _, want := range tc.errHas {
					if !strings.Contains(m.Error.Message, want) {
						t.Errorf("the error %q does not say %s", m.Error.Message, want)
					}
				}
			} else if m.Error != nil {
				t.Fatalf("JSON-RPC error: %s", m.raw)
			}
			var r callResult
			_ = json.Unmarshal(m.Result, &r)
			if tc.refused != "" && (!r.IsError || !strings.Contains(r.text(), tc.refused)) {
				t.Errorf("want a refusal naming %s, got %s", tc.refused, m.raw)
			}
			if tc.reaches != "" && r.IsError {
				t.Errorf("the call failed: %s", m.raw)
			}
			for _, srv := range []string{"alpha", "beta"} {
				want := before[srv]
				if srv == tc.reaches {
					want++
				}
				if got := calls(srv, tc.tool); got != want {
					t.Errorf("%s received %s %d times, want %d", srv, tc.tool, got-before[srv], want-before[srv])
				}
			}
		})
	}
	// policy explain accepts the names a call accepts, and decides the full name.
	out, stderr, _ := h.nexus("policy", "explain", "--agent", "no-weather", "get-weather")
	if !strings.Contains(out+stderr, "alpha.get-weather") || strings.HasPrefix(out, "allowed:") {
		t.Errorf("nexus policy explain --agent no-weather get-weather:\n%s%s", out, stderr)
	}
}

// TestTwoServerEverythings: two instances of a real third-party server list the same
// resources and templates; through Nexus each is listed once per instance,
// namespaced, and reads the same contents a direct session reads, under the URI the
// client asked for.
func TestTwoServerEverythings(t *testing.T) {
	t.Parallel()
	node, script := everythingServer(t)
	server := map[string]any{"command": node, "args": []string{script, "stdio"}}
	h := newHome(t, map[string]any{"servers": map[string]any{"one": server, "two": server},
		"policy": map[string]any{"default": map[string]any{"allow": []string{"*"}}}})
	d := startSession(t, h.env(), node, script, "stdio")
	s := h.serveStdioReady([]string{"one", "two"}, "--no-memory") // see TestServerEverythingThroughNexus
	for _, list := range []struct{ method, field, key string }{
		{"resources/list", "resources", "uri"},
		{"resources/templates/list", "resourceTemplates", "uriTemplate"},
	} {
		direct, through := listKeys(t, d, list.method, list.field, list.key), listKeys(t, s, list.method, list.field, list.key)
		if len(direct) == 0 || len(through) != 2*len(direct) {
			t.Fatalf("%s: %d direct, %d through nexus: want twice as many", list.method, len(direct), len(through))
		}
		for _, k := range direct {
			for _, srv := range []string{"one", "two"} {
				if ns := strings.SplitN(k, ":", 2)[0] + "://nexus/" + srv + "/" + k; !contains(through, ns) {
					t.Errorf("%s: %q missing through nexus", list.method, ns)
				}
			}
		}
	}
	uri := listKeys(t, d, "resources/list", "resources", "uri")[0]
	ns := strings.SplitN(uri, ":", 2)[0] + "://nexus/two/" + uri
	rd, rt := d.requestMsg("resources/read", map[string]any{"uri": uri}), s.requestMsg("resources/read", map[string]any{"uri": ns})
	var direct, through any
	_ = json.Unmarshal(rd.Result, &direct)
	_ = json.Unmarshal([]byte(strings.ReplaceAll(string(rt.Result), `"uri":"`+ns+`"`, `"uri":"`+uri+`"`)), &through)
	if rt.Error != nil || !strings.Contains(string(rt.Result), `"uri":"`+ns+`"`) || !reflect.DeepEqual(direct, through) {
		t.Errorf("resources/read %s: direct %s, through %s", ns, rd.raw, rt.raw)
	}
	if m := s.requestMsg("resources/read", map[string]any{"uri": uri}); m.Error == nil || m.Error.Code != -32602 {
		t.Errorf("the bare shared %s: want -32602 naming the two, got %s", uri, m.raw)
	}
	// A completion of a namespaced template is the owner's completion of its own.
	tmpl := listKeys(t, d, "resources/templates/list", "resourceTemplates", "uriTemplate")[0]
	arg := map[string]any{"name": "resourceId", "value": "1"}
	cd := d.requestMsg("completion/complete", map[string]any{"ref": map[string]any{"type": "ref/resource", "uri": tmpl}, "argument": arg})
	ct := s.requestMsg("completion/complete", map[string]any{"ref": map[string]any{"type": "ref/resource", "uri": strings.SplitN(tmpl, ":", 2)[0] + "://nexus/one/" + tmpl}, "argument": arg})
	if ct.Error != nil || cd.Error != nil || compactJSON(t, cd.Result) != compactJSON(t, ct.Result) {
		t.Errorf("completion/complete of %s: direct %s, through %s", tmpl, cd.raw, ct.raw)
	}
}
