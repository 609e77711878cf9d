package aggregation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/toolsearch"
)

// searchFixture is a gateway whose agent tester is in search mode, pinning
// good.echo, with a budget of two found tools; evil's tools are denied to it.
func searchFixture(t *testing.T) *fixture {
	t.Helper()
	return searchFixtureWith(t, `{}`)
}

// searchFixtureWith is searchFixture with good's tool overrides.
func searchFixtureWith(t *testing.T, goodTools string) *fixture {
	t.Helper()
	return searchFixtureOpts(t, goodTools, nil)
}

// searchFixtureOpts is searchFixtureWith with an embedder for tool search.
func searchFixtureOpts(t *testing.T, goodTools string, emb toolsearch.Embedder) *fixture {
	t.Helper()
	evil := newTestChild("evil")
	cfgJSON := fmt.Sprintf(`{
		"servers": {
			"good": {"command": %q, "args": ["-test.run=^$"], "env": {"NEXUS_TEST_CHILD": "good"}, "timeout": "5s", "tools": %s},
			"evil": {"transport": "streamable-http", "url": %q, "timeout": "5s"}
		},
		"agents": {"tester": {"tokenSha256": %q, "tools": {"mode": "search", "pin": ["good.echo"], "budget": 2}}},
		"policy": {"agents": {"tester": {"allow": ["*"], "deny": ["evil.*"]}}}
	}`, os.Args[0], goodTools, evil.serveHTTP(t), TokenHash(tokens["tester"]))
	cfg, err := config.Parse("test.json", []byte(cfgJSON))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{
		Redact:         func(b []byte) []byte { return bytes.ReplaceAll(b, []byte(canary), []byte("[redacted]")) },
		RedactText:     func(s string) string { return strings.ReplaceAll(s, canary, "[redacted]") },
		SearchEmbedder: emb,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := serveHTTP(t, g)
	return &fixture{t: t, g: g, evil: evil, url: srv.URL + "/mcp", cfg: cfgJSON}
}

// sessionCallText is a tools/call's text, and whether it was an error.
func sessionCallText(t *testing.T, c *testClient, name string, args any) (string, bool) {
	t.Helper()
	m := c.request("tools/call", map[string]any{"name": name, "arguments": args})
	if m.Error != nil {
		return m.Error.Message, true
	}
	var res struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
	}
	if err := json.Unmarshal(m.Result, &res); err != nil || len(res.Content) == 0 {
		t.Fatalf("%s: %s %v", name, m.Result, err)
	}
	return res.Content[0].Text, res.IsError
}

// found is what nexus__find_tools returned for task, by wire name.
func found(t *testing.T, c *testClient, task string) []string {
	t.Helper()
	m := c.request("tools/call", map[string]any{"name": findToolsName, "arguments": map[string]any{"task": task, "limit": 20}})
	if m.Error != nil {
		t.Fatalf("find %q: %v", task, m.Error)
	}
	var res struct {
		Structured struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(m.Result, &res); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tool := range res.Structured.Tools {
		if len(tool.InputSchema) == 0 {
			t.Errorf("found %s without its input schema", tool.Name)
		}
		out = append(out, tool.Name)
	}
	return out
}

// TestSearchMode: a search-mode agent lists its pin and the two search tools,
// finds only what it may call, calls through nexus__call_tool and directly with
// the same policy, and its budget grows its own list with list_changed.
func TestSearchMode(t *testing.T) {
	t.Parallel()
	for _, front := range fronts {
		t.Run(front, func(t *testing.T) {
			f := searchFixture(t)
			c := f.client(front, "tester")
			listed := names(t, c.request("tools/list", nil), "tools", "name")
			if want := []string{"good__echo", findToolsName, callToolName}; !slices.Equal(listed, want) {
				t.Fatalf("tools/list %v, want %v", listed, want)
			}
			// good__echo's description holds the canary: redacted, it can be
			// neither shown nor found.
			if got := found(t, c, "5ecret v4lue 0xDEADBEEF"); len(got) != 0 {
				t.Errorf("the redacted secret found %v", got)
			}
			if strings.Contains(c.received(), canary) {
				t.Error("the canary reached the client")
			}
			got := found(t, c, "log a line")
			if len(got) == 0 || got[0] != "good__log" {
				t.Errorf("find 'log a line': %v, want good__log first", got)
			}
			for _, task := range []string{"echo text", "log a line", "waits until released", "progress"} {
				for _, name := range found(t, c, task) {
					if strings.HasPrefix(name, "evil__") {
						t.Errorf("find %q returned %s, which tester may not call", task, name)
					}
				}
			}
			if text, isErr := sessionCallText(t, c, callToolName, map[string]any{"name": "good__echo", "arguments": map[string]any{"text": "hi"}}); isErr || text != "good:hi" {
				t.Errorf("call_tool good__echo: %q (error %v)", text, isErr)
			}
			before := f.evil.count("tools/call")
			for _, name := range []string{"evil__echo", "evil.echo"} {
				if text, isErr := sessionCallText(t, c, callToolName, map[string]any{"name": name, "arguments": map[string]any{"text": "hi"}}); !isErr || !strings.Contains(text, "may not call") {
					t.Errorf("call_tool %s: %q, want a refusal", name, text)
				}
			}
			if text, isErr := sessionCallText(t, c, "evil__echo", map[string]any{"text": "hi"}); !isErr || !strings.Contains(text, "may not call") {
				t.Errorf("direct evil__echo: %q, want a refusal", text)
			}
			if f.evil.count("tools/call") != before {
				t.Error("a refused call reached evil")
			}
			if text, isErr := sessionCallText(t, c, "good__log", nil); isErr || text != "logged" {
				t.Errorf("a direct call of a permitted tool not listed: %q (error %v)", text, isErr)
			}
			for _, bad := range []map[string]any{{}, {"name": callToolName}, {"name": findToolsName}} {
				if _, isErr := sessionCallText(t, c, callToolName, bad); !isErr {
					t.Errorf("call_tool %v: no error", bad)
				}
			}
			if _, isErr := sessionCallText(t, c, findToolsName, map[string]any{"task": "x", "limit": 500}); !isErr {
				t.Error("find with limit 500: no error")
			}
			// The budget: found tools join this session's list, two at most.
			if !c.waitNote("notifications/tools/list_changed", nil) {
				t.Fatal("no list_changed after tools were found with a budget")
			}
			listed = names(t, c.request("tools/list", nil), "tools", "name")
			if len(listed) != 5 || !slices.Contains(listed, findToolsName) || !slices.Contains(listed, "good__echo") {
				t.Errorf("tools/list after finding: %v, want the pin, the search tools and two found", listed)
			}
			for _, name := range listed {
				if strings.HasPrefix(name, "evil__") {
					t.Errorf("%s was added to tester's list", name)
				}
			}
			// Another session of the agent keeps the short list.
			if other := names(t, f.client(front, "tester").request("tools/list", nil), "tools", "name"); len(other) != 3 {
				t.Errorf("a new session lists %v", other)
			}
		})
	}
}

// TestSearchModeCost: the view knows what listing everything would cost.
func TestSearchModeCost(t *testing.T) {
	t.Parallel()
	f := searchFixture(t)
	v := f.g.view("tester")
	if v.search == nil || v.allTools == 0 || v.allBytes <= len(v.tools) {
		t.Fatalf("view: search %v, %d tools in %d bytes, listed %d bytes", v.search != nil, v.allTools, v.allBytes, len(v.tools))
	}
	if anon := f.g.view("anonymous"); anon.search != nil || anon.allBytes != len(anon.tools) {
		t.Errorf("an agent in the default mode: search %v", anon.search != nil)
	}
	for _, tc := range []struct {
		agent, mode string
	}{{"tester", config.ToolsSearch}, {"anonymous", config.ToolsAll}} {
		c := f.g.ManifestCost(tc.agent)
		if c.Mode != tc.mode || c.Tools == 0 || c.SearchBytes == 0 || c.SearchBytes >= c.AllBytes {
			t.Errorf("%s: %+v", tc.agent, c)
		}
		if want := map[string]int{config.ToolsSearch: c.SearchBytes, config.ToolsAll: c.AllBytes}[tc.mode]; c.ListedBytes != want {
			t.Errorf("%s lists %d bytes, want %d", tc.agent, c.ListedBytes, want)
		}
	}
	if EstimateTokens(4) != 1 || EstimateTokens(5) != 2 || EstimateTokens(0) != 0 {
		t.Error("EstimateTokens is bytes/4, rounded up")
	}
}

// TestRenamedToolRoutes: a tool the operator renamed is listed, found, decided
// and called by its new name, and the child is still called by its own.
func TestRenamedToolRoutes(t *testing.T) {
	t.Parallel()
	f := searchFixtureWith(t, `{"echo": {"name": "say", "description": "Says text back, aloud"}, "log": {"name": "journal"}}`)
	c := f.client(frontStdio, "tester")
	if listed := names(t, c.request("tools/list", nil), "tools", "name"); slices.Contains(listed, "good__echo") {
		t.Errorf("the pin names good.echo, which is now good.say: %v", listed)
	}
	if got := found(t, c, "say text aloud"); len(got) == 0 || got[0] != "good__say" {
		t.Errorf("find: %v, want good__say", got)
	}
	for _, name := range []string{"good__say", "good.say"} {
		if text, isErr := sessionCallText(t, c, callToolName, map[string]any{"name": name, "arguments": map[string]any{"text": "hi"}}); isErr || text != "good:hi" {
			t.Errorf("%s: %q (error %v)", name, text, isErr)
		}
	}
	if text, isErr := sessionCallText(t, c, "good__echo", map[string]any{"text": "hi"}); !isErr || !strings.Contains(text, "unknown tool") {
		t.Errorf("the old name: %q (error %v), want an unknown tool", text, isErr)
	}
	if tl := f.g.Tools(); !slices.ContainsFunc(tl, func(t *Tool) bool { return t.Canonical == "good.journal" && t.Name == "log" }) {
		t.Error("good.journal should call the child's log")
	}
}

// paraphrases is an embedder that knows one paraphrase no word table has: it
// puts "jot something down" next to the log tool, and everything else apart.
type paraphrases struct{}

func (paraphrases) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, s := range texts {
		if s == "jot something down" || strings.Contains(s, "Logs a line") {
			out[i] = []float32{1, 0}
		} else {
			out[i] = []float32{0, 1}
		}
	}
	return out, nil
}

// TestSearchBlendsTheEmbedder: with an embedder, a task that shares no word with
// a tool finds it.
func TestSearchBlendsTheEmbedder(t *testing.T) {
	t.Parallel()
	c := searchFixtureOpts(t, `{}`, paraphrases{}).client(frontStdio, "tester")
	if got := found(t, c, "jot something down"); len(got) == 0 || got[0] != "good__log" {
		t.Errorf("find with the embedder: %v, want good__log first", got)
	}
}
