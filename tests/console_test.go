package tests

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/audit"
)

// TestConsoleInChromium loads the console in headless Chromium against a
// gateway that served real traffic, and checks what a person would: the plots
// have points, the totals are /metrics' numbers, the canary secret the child
// holds is nowhere on the page. It takes screenshots at desktop and phone
// widths (into NEXUS_CONSOLE_SCREENSHOTS when set: docs/img is made so). Then
// it clears memory and approves a held tool from the console's forms: each
// works with the token, the page's CSRF token and the gateway's origin, and
// is refused without the token, from another origin, or without the CSRF token.
func TestConsoleInChromium(t *testing.T) {
	browser := chromium(t)
	h := newHome(t, nil)
	token := "nxs_console_test_token"
	h.writeConfig(map[string]any{
		"servers": map[string]any{"fx": h.fixtureServer(map[string]any{"timeout": "2s", "pin": "strict",
			"env": map[string]string{"FIXTURE_CALL_LOG": h.log, "FX_API_KEY": observeSecret}})},
		"agents": map[string]any{"coder": map[string]any{"tokenSha256": polTokenHash(token)}},
		"policy": map[string]any{"agents": map[string]any{"coder": map[string]any{"allow": []string{"*"}, "deny": []string{"fx.lookup"}}}},
		"status": map[string]any{"public": true},
	})
	s := h.startServe("listening on", "--http", "127.0.0.1:0")
	c, err := httpClient(t, s.base+"/mcp", token)
	if err != nil {
		t.Fatalf("initialize: %v\n%s", err, s.stderr)
	}
	ctx := context.Background()
	scriptedSession(t, c)
	for _, fail := range []bool{false, true} { // the canary in an answer and an error
		if _, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fx__getenv",
			Arguments: map[string]any{"name": "FX_API_KEY", "fail": fail}}}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if _, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"message": observeSecret}}}); err != nil {
			t.Fatal(err)
		}
	}

	_, metrics := get(t, s.base+"/metrics", token)
	dom := dumpDOM(t, browser, s.base+"/")
	if strings.Contains(dom, observeSecret) {
		t.Errorf("the canary secret is on the console")
	}
	number := func(id string) float64 {
		m := regexp.MustCompile(`id="` + id + `">([0-9.]+)<`).FindStringSubmatch(dom)
		if m == nil {
			t.Fatalf("the console has no #%s", id)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	errors := sumMetric(metrics, "nexus_calls_total", "outcome", "tool_error", "rpc_error", "timeout")
	hits := sumMetric(metrics, "nexus_memory_lookups_total", "result", "hit", "semantic_hit")
	for _, c := range []struct {
		id   string
		want float64
	}{
		{"total-calls", sumMetric(metrics, "nexus_calls_total", "")},
		{"total-errors", errors},
		{"total-refused", sumMetric(metrics, "nexus_calls_total", "outcome", "refused")},
		{"total-hits", hits},
		{"mem-hits", hits},
	} {
		if got := number(c.id); got != c.want || got == 0 {
			t.Errorf("#%s is %v, /metrics says %v", c.id, got, c.want)
		}
	}
	if day := number("day-calls"); day != sumMetric(metrics, "nexus_calls_total", "") {
		t.Errorf("the day's plot counts %v calls, /metrics %v", day, sumMetric(metrics, "nexus_calls_total", ""))
	}
	for _, plot := range []string{"plot-calls", "plot-latency", "plot-errors", "plot-day"} {
		svg := regexp.MustCompile(`(?s)<svg[^>]*id="` + plot + `".*?</svg>`).FindString(dom)
		if !regexp.MustCompile(`<circle class="pt s\d"[^>]*data-v="[1-9]`).MatchString(svg) {
			t.Errorf("%s has no point above zero:\n%s", plot, svg)
		}
	}
	if !strings.Contains(dom, `<summary><strong>fx</strong>: 12 of 13 tools</summary>`) {
		t.Errorf("the agent's tools are not grouped by server")
	}

	dir := os.Getenv("NEXUS_CONSOLE_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	for _, shot := range []struct{ name, size string }{{"console-desktop.png", "1280,1500"}, {"console-phone.png", "390,1700"}} {
		path, _ := filepath.Abs(filepath.Join(dir, shot.name))
		screenshot(t, browser, s.base+"/", path, shot.size)
		if st, err := os.Stat(path); err != nil || st.Size() < 10_000 {
			t.Errorf("screenshot %s: %v", path, err)
		}
	}

	// The actions: a held tool to approve.
	if _, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fx__add_tool"}}); err != nil {
		t.Fatal(err)
	}
	var page string
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(page, `class="inline approve"`) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		_, page = get(t, s.base+"/", token)
	}
	csrf := regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`).FindStringSubmatch(page)
	if csrf == nil || !strings.Contains(page, "late_tool") {
		t.Fatalf("the console offers no approval with a CSRF token:\n%s", page)
	}
	post := func(path, bearer, origin string, form url.Values) int {
		req, _ := http.NewRequest(http.MethodPost, s.base+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, path := range []string{"/console/tools/approve", "/console/memory/clear"} {
		form := url.Values{"csrf": {csrf[1]}, "server": {"fx"}}
		for _, bad := range []struct {
			why, bearer, origin string
			form                url.Values
			code                int
		}{
			{"without the token", "", s.base, form, http.StatusUnauthorized},
			{"from another origin", token, "http://attacker.example", form, http.StatusForbidden},
			{"without the CSRF token", token, s.base, url.Values{"server": {"fx"}}, http.StatusForbidden},
		} {
			if code := post(path, bad.bearer, bad.origin, bad.form); code != bad.code {
				t.Errorf("POST %s %s: %d, want %d", path, bad.why, code, bad.code)
			}
		}
		if strings.Contains(path, "approve") {
			if _, page = get(t, s.base+"/", token); !strings.Contains(page, "held until approved") {
				t.Fatal("a refused approval approved the tool")
			}
		}
		if code := post(path, token, s.base, form); code != http.StatusSeeOther {
			t.Errorf("POST %s with the token, the CSRF token and the origin: %d", path, code)
		}
	}
	// A browser: logged in with the token, it has a cookie, no bearer header; the
	// page it reads carries its own CSRF token, and the bearer's is not it.
	jar := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := jar.PostForm(s.base+"/login", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		cookie = c
	}
	if cookie == nil {
		t.Fatalf("no login cookie: %d", res.StatusCode)
	}
	browserPost := func(csrf string) int {
		req, _ := http.NewRequest(http.MethodPost, s.base+"/console/memory/clear", strings.NewReader(url.Values{"csrf": {csrf}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", s.base)
		req.AddCookie(cookie)
		res, err := jar.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	req, _ := http.NewRequest(http.MethodGet, s.base+"/", nil)
	req.AddCookie(cookie)
	res, err = jar.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	loginCSRF := regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`).FindStringSubmatch(string(body))
	if loginCSRF == nil || loginCSRF[1] == csrf[1] {
		t.Fatalf("the logged-in page's CSRF token: %v (the bearer's %s)", loginCSRF, csrf[1])
	}
	if code := browserPost(csrf[1]); code != http.StatusForbidden {
		t.Errorf("a login posting the bearer's CSRF token: %d, want 403", code)
	}
	if code := browserPost(loginCSRF[1]); code != http.StatusSeeOther {
		t.Errorf("a login posting its own CSRF token: %d, want 303", code)
	}

	_, metrics = get(t, s.base+"/metrics", token)
	if v := metricValue(metrics, "nexus_memory_entries", nil); v != 0 {
		t.Errorf("memory holds %v entries after the console cleared it", v)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fx__late_tool"}})
		if err == nil && !res.IsError {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the approved tool is not callable: %v %+v", err, res)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sumMetric adds the samples of name whose label has one of values (every
// sample when label is "").
func sumMetric(text, name, label string, values ...string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		if label != "" {
			match := false
			for _, v := range values {
				match = match || strings.Contains(rest, label+`="`+v+`"`)
			}
			if !match {
				continue
			}
		}
		f := strings.Fields(rest)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		sum += v
	}
	return sum
}

// screenshot saves url as rendered by headless Chromium in a window of size
// ("W,H") to the PNG at path.
func screenshot(t *testing.T, browser, url, path, size string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--hide-scrollbars", "--force-device-scale-factor=1", "--user-data-dir="+t.TempDir(),
		"--window-size="+size, "--screenshot="+path, url)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot %s: %v\n%s", url, err, out)
	}
}

// TestAuditFollow: `nexus audit --json --follow` prints the records already
// kept, then each new one as the gateway writes it, one JSON object a line.
func TestAuditFollow(t *testing.T) {
	t.Parallel()
	h, token := observedHome(t, nil)
	s := h.startServe("listening on", "--http", "127.0.0.1:0")
	c, err := httpClient(t, s.base+"/mcp", token)
	if err != nil {
		t.Fatalf("initialize: %v\n%s", err, s.stderr)
	}
	refuse := func() {
		if res, err := c.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fx__lookup"}}); err != nil || !res.IsError {
			t.Fatalf("lookup: want a refusal: %v %+v", err, res)
		}
	}
	refuse()
	// The first record is written within the writer's 200ms.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if out, _, _ := h.nexus("audit", "--json"); strings.Count(out, "\n") == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first refusal was never written")
		}
	}
	cmd := exec.Command(built.nexus, "audit", "--json", "--follow")
	cmd.Env = h.env()
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() audit.Entry {
		select {
		case l := <-lines:
			return entries(t, l)[0]
		case <-time.After(15 * time.Second):
			t.Fatal("no line from nexus audit --follow")
		}
		return audit.Entry{}
	}
	first := next()
	refuse()
	second := next()
	if first.Decision != "denied" || second.Decision != "denied" || second.Time <= first.Time || second.Tool != "fx.lookup" {
		t.Errorf("followed %+v then %+v", first, second)
	}
}
