package status

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/aggregation"
	"github.com/nexus-mcp/nexus/audit"
	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/telemetry"
)

const canary = "canary-7c1e5f"

// TestConsolePlotsAndTrail: the plots have a point per minute and the totals
// add the timeline up; the trail view is filtered by the query; nothing of the
// canary reaches the page, whatever field it was in.
func TestConsolePlotsAndTrail(t *testing.T) {
	tl := telemetry.NewTimeline()
	for _, c := range []aggregation.Call{
		{Method: "tools/call", Outcome: aggregation.OutcomeOK, Duration: 3 * time.Millisecond},
		{Method: "tools/call", Outcome: aggregation.OutcomeOK, Duration: time.Millisecond, Memory: "hit"},
		{Method: "tools/call", Outcome: aggregation.OutcomeToolError, Duration: 9 * time.Millisecond},
		{Method: "tools/call", Outcome: aggregation.OutcomeRefused},
	} {
		tl.Observe(&c)
	}
	recent := audit.NewRecent(10)
	for _, r := range []audit.Record{
		{Time: time.Now(), Agent: "coder", Method: "tools/call", Tool: "fx.echo", Outcome: "ok", Rule: `allow "*"`, Client: canary},
		{Time: time.Now(), Agent: "coder", Method: "tools/call", Tool: "fx." + canary, Refused: true, Outcome: "refused", Rule: `deny "fx.lookup"`},
	} {
		recent.Add(r.Entry())
	}
	src := Sources{Gateway: gateway(t), Timeline: tl.Points, Day: tl.Hours, Recent: recent.List,
		Redact: func(s string) string { return strings.ReplaceAll(s, canary, "[redacted:FX]") }}
	body := get(t, Handler(src), "/?decision=denied", nil)
	for _, want := range []string{`id="plot-calls" data-points="120"`, `id="plot-latency" data-points="2"`, `<span class="n" id="total-calls">4</span>`,
		`<span class="n" id="total-errors">1</span>`, `<span class="n" id="total-hits">1</span>`, `id="plot-day" data-points="48"`, `<span id="day-calls">4</span>`, `id="trail-table"`, `fx.[redacted:FX]`} {
		if !strings.Contains(body, want) {
			t.Errorf("the console lacks %q", want)
		}
	}
	if strings.Contains(body, "fx.echo") {
		t.Error("the filter decision=denied let an allowed call through")
	}
	if strings.Contains(body, canary) {
		t.Error("the canary is on the console")
	}
	if n := len(regexp.MustCompile(`<circle class="pt s1"[^>]*data-v="[1-9]`).FindAllString(body, -1)); n < 2 {
		t.Errorf("%d non-zero points in the plots", n)
	}
}

// TestConsoleGroupsByServer: an agent's tools are grouped by server, collapsed
// with "N of M tools", each with its rule.
func TestConsoleGroupsByServer(t *testing.T) {
	var b strings.Builder
	err := page().Execute(&b, view{Agents: []agent{{Name: "coder", Groups: []group{{Server: "code-kg", Allowed: 12, Total: 14,
		Tools: []decided{{Name: "code-kg.search", Allowed: true, Rule: `allow "@readonly"`}, {Name: "code-kg.rm", Rule: "no allow rule matches"}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<summary><strong>code-kg</strong>: 12 of 14 tools</summary>`,
		`<li class="allowed"><code>code-kg.search</code> <small>allow &#34;@readonly&#34;</small></li>`,
		`<li class="denied"><code>code-kg.rm</code> <small>no allow rule matches</small></li>`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the console lacks %q:\n%s", want, b.String())
		}
	}
}

// TestClearMemoryNeedsCSRF: the action needs the CSRF token of the credential
// that read the page: none, or another credential's, is refused and clears
// nothing; the right one clears and redirects to the console.
func TestClearMemoryNeedsCSRF(t *testing.T) {
	cfg, err := config.Parse("test.json", []byte(`{"servers": {}, "agents": {"coder": {"tokenSha256": "`+aggregation.TokenHash("tok-a")+`"},
		"other": {"tokenSha256": "`+aggregation.TokenHash("tok-b")+`"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := aggregation.New(cfg, aggregation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cleared := 0
	src := Sources{Gateway: g, ClearMemory: func(context.Context) (int64, error) { cleared++; return 3, nil }}
	h := g.GuardAction(Actions(src)[ClearMemoryPath])
	tokenOf := func(bearer string) string {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", "Bearer "+bearer)
		return csrfToken(g.PageCredential(r))
	}
	post := func(bearer, csrf, origin string) int {
		r := httptest.NewRequest(http.MethodPost, ClearMemoryPath, strings.NewReader(url.Values{"csrf": {csrf}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if bearer != "" {
			r.Header.Set("Authorization", "Bearer "+bearer)
		}
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	self := "http://example.com" // httptest's Host
	for _, c := range []struct {
		name, bearer, csrf, origin string
		code                       int
	}{
		{"no token", "", tokenOf("tok-a"), self, http.StatusUnauthorized},
		{"no csrf", "tok-a", "", self, http.StatusForbidden},
		{"another login's csrf", "tok-a", tokenOf("tok-b"), self, http.StatusForbidden},
		{"another origin", "tok-a", tokenOf("tok-a"), "http://evil.example", http.StatusForbidden},
		{"no origin", "tok-a", tokenOf("tok-a"), "", http.StatusForbidden},
	} {
		if code := post(c.bearer, c.csrf, c.origin); code != c.code || cleared != 0 {
			t.Errorf("%s: %d (cleared %d), want %d", c.name, code, cleared, c.code)
		}
	}
	if code := post("tok-a", tokenOf("tok-a"), self); code != http.StatusSeeOther || cleared != 1 {
		t.Errorf("with the token, its csrf and the same origin: %d, cleared %d", code, cleared)
	}
}

func get(t *testing.T, h http.Handler, path string, header http.Header) string {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
	}
	return w.Body.String()
}

func TestShortDurations(t *testing.T) {
	for d, want := range map[time.Duration]string{565685 * time.Nanosecond: "566µs", 2317047500 * time.Nanosecond: "2.32s",
		12345 * time.Microsecond: "12.3ms", 45 * time.Second: "45s"} {
		if got := short(d); got != want {
			t.Errorf("short(%v) = %s, want %s", d, got, want)
		}
	}
}
