package status

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/aggregation"
	"github.com/nexus-mcp/nexus/audit"
	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/memory/memorytest"
	"github.com/nexus-mcp/nexus/memory/sqlite"
)

func gateway(t *testing.T) *aggregation.Gateway {
	t.Helper()
	cfg, err := config.Parse("test.json", []byte(`{"servers": {}, "agents": {"coder": {}},
		"policy": {"agents": {"coder": {"allow": ["*"]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := aggregation.New(cfg, aggregation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestPageEscapesWhatItShows: names, rules and files come from configs and
// children; the page shows them as text, never as markup.
func TestPageEscapesWhatItShows(t *testing.T) {
	refusals := func(context.Context, int) ([]audit.Record, error) {
		return []audit.Record{{Time: time.Now(), Agent: "coder", Method: "tools/call", Tool: "fx.<script>alert(1)</script>",
			Rule: `deny "fx.*"`, Origin: "policy.agents.coder", Source: "/etc/<b>nexus</b>.json"}}, nil
	}
	h := Handler(Sources{Gateway: gateway(t), Refusals: refusals})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	body := w.Body.String()
	if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", w.Code, w.Header().Get("Content-Type"))
	}
	for _, bad := range []string{"<script>alert", "<b>nexus</b>"} {
		if strings.Contains(body, bad) {
			t.Errorf("the page carries %q unescaped", bad)
		}
	}
	for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", `data-agent="coder"`, `data-agent="anonymous"`, "memory is off", "No server is configured."} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q:\n%s", want, body)
		}
	}
}

func TestPageNotFoundElsewhere(t *testing.T) {
	h := Handler(Sources{Gateway: gateway(t)})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/favicon.ico", nil))
	if w.Code != http.StatusNotFound {
		t.Errorf("GET /favicon.ico: %d, want 404", w.Code)
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if !strings.Contains(w.Body.String(), "the audit trail is off") {
		t.Errorf("without a trail the page should say so:\n%s", w.Body)
	}
}

// TestPageShowsManifestCost: each agent's row says its toolset and what its
// manifest costs, in estimated tokens.
func TestPageShowsManifestCost(t *testing.T) {
	cfg, err := config.Parse("test.json", []byte(`{"servers": {}, "agents": {"coder": {"tools": "search"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := aggregation.New(cfg, aggregation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	Handler(Sources{Gateway: g}).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	body := w.Body.String()
	search := aggregation.EstimateTokens(g.ManifestCost("coder").SearchBytes)
	for _, want := range []string{"Manifest (tokens, est. bytes/4)", `<span class="mode">search</span>`, `<span class="mode">all</span>`,
		"search mode " + strconv.Itoa(search)} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q:\n%s", want, body)
		}
	}
}

// TestPageListsAnonymousOnlyWithoutTokens: once an agent has a token, HTTP
// clients without one are refused, so the anonymous agent is not listed.
func TestPageListsAnonymousOnlyWithoutTokens(t *testing.T) {
	cfg, err := config.Parse("test.json", []byte(`{"servers": {}, "agents": {"coder": {"tokenSha256": "`+strings.Repeat("ab", 32)+`"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := aggregation.New(cfg, aggregation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	Handler(Sources{Gateway: g}).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if body := w.Body.String(); strings.Contains(body, `data-agent="anonymous"`) || !strings.Contains(body, `data-agent="coder"`) {
		t.Errorf("with a token, the page lists:\n%s", body)
	}
}

// TestPageShowsVerification: memory's verification figures are on the page,
// per tool, with the interval and whether similarity hits stopped.
func TestPageShowsVerification(t *testing.T) {
	m := memorytest.OpenMemory(t, memory.Options{Backend: sqlite.File(filepath.Join(t.TempDir(), "memory.db"))})
	cfg, err := config.Parse("test.json", []byte(`{"servers": {}}`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := aggregation.New(cfg, aggregation.Options{Memory: m})
	if err != nil {
		t.Fatal(err)
	}
	// After New, which gives memory the config's rules.
	m.SetSettings(memory.Settings{TTL: map[string]memory.TTL{"*": {Never: true}},
		Verify: memory.Verify{Rate: 1, PerMinute: 10}, MaxFalseHitRate: 0.1})
	c := &memorytest.Child{} // a paraphrase's own answer differs: the similarity hit is refuted
	memorytest.Do(t, m, "", memorytest.SearchTool(), memorytest.SearchArgs("postgres connection pool settings", 10), c)
	memorytest.DoVerified(t, m, "", memorytest.SearchTool(), memorytest.SearchArgs("the postgres connection pool settings", 10), c)
	memorytest.WaitFor(t, "the verification", func() bool { return len(m.Measured()) == 1 && m.Measured()[0].SemanticChecks == 1 })
	w := httptest.NewRecorder()
	Handler(Sources{Gateway: g}).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	body := w.Body.String()
	for _, want := range []string{`id="verified"`, "doc-kg.doc_kg_search", "1 of 1 (21-100%)", "stopped: over memory.maxFalseHitRate", "rewrites not trusted: article"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

// TestPageShowsPins: a server's held tools, and those listed without approval
// (pin: warn), are on the page with the command that shows the change.
func TestPageShowsPins(t *testing.T) {
	var b strings.Builder
	err := page().Execute(&b, view{Servers: []server{
		{Status: aggregation.Status{Name: "files", State: aggregation.StateReady, Held: []string{"read_file", "save_file"}}},
		{Status: aggregation.Status{Name: "web", State: aggregation.StateReady, Unapproved: []string{"search"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"held until approved: <code>read_file</code>, <code>save_file</code> (<code>nexus tools diff files</code>)",
		"listed without approval (pin: warn): <code>search</code> (<code>nexus tools diff web</code>)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}
