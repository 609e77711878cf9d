package tests

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/internal/skips"
)

// chromium finds a headless browser, or skips the test saying why (fails where
// NEXUS_REQUIRE_CHROMIUM=1: CI installs it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("NEXUS_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("NEXUS_REQUIRE_CHROMIUM=1 but no chromium is installed (apt-get install chromium)")
	}
	skips.Need(t, "Chromium", "apt-get install chromium", "the status page is checked in headless Chromium, which is not installed (apt-get install chromium); NEXUS_REQUIRE_CHROMIUM=1 makes this a failure")
	return ""
}

// dumpDOM loads url in headless Chromium and returns the DOM it rendered.
func dumpDOM(t *testing.T, browser, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir="+t.TempDir(), "--dump-dom", url)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("chromium --dump-dom %s: %v\n%s", url, err, stderr)
	}
	return string(out)
}

// TestStatusPageInChromium: the page a browser on this machine renders shows the
// servers and their state, their tools, each agent's policy and what it may call,
// memory's hit rate and the latest refusal with its rule. A browser sends no
// bearer token: the config makes the page public.
func TestStatusPageInChromium(t *testing.T) {
	browser := chromium(t)
	h, token := observedHome(t, map[string]any{"status": map[string]any{"public": true}})
	s := h.startServe("listening on", "--http", "127.0.0.1:0")
	c, err := httpClient(t, s.base+"/mcp", token)
	if err != nil {
		t.Fatalf("initialize: %v\n%s", err, s.stderr)
	}
	ctx := context.Background()
	for _, name := range []string{"fx__echo", "fx__echo", "fx__lookup"} {
		if _, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: map[string]any{"message": "x", "q": "x"}}}); err != nil {
			t.Fatal(err)
		}
	}

	dom := dumpDOM(t, browser, s.base+"/")
	text := regexp.MustCompile(`<[^>]+>`).ReplaceAllString(dom, " ")
	text = strings.Join(strings.Fields(text), " ")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`<tr class="server" data-server="fx">`),
		regexp.MustCompile(`fx stdio: \S*fixture ready 2025-11-25 \(session\) it answered initialize: .* 0 shared - .*echo.*lookup`),
		regexp.MustCompile(`coder policy policy\.agents\.coder ; tools: all ; refused tools: 1 fx : 12 of 13 tools .*fx\.lookup deny "fx\.lookup"`), // all but fx.lookup
		regexp.MustCompile(`Hit rate 50\.0% ?: 1 hits \(0 semantic\), 1 misses`),
		regexp.MustCompile(`ago coder tools/call fx\.lookup deny "fx\.lookup" policy\.agents\.coder in \S+config\.json`),
	} {
		subject := text
		if strings.HasPrefix(want.String(), "<") {
			subject = dom
		}
		if !want.MatchString(subject) {
			t.Errorf("the rendered page lacks %s:\n%s", want, text)
		}
	}
	// The home has an agent token: anonymous clients are refused, and not listed.
	if strings.Contains(dom, `data-agent="anonymous"`) {
		t.Errorf("the page lists the anonymous agent though a token exists:\n%s", text)
	}
}

// TestStatusPageRefusesRemoteStrangers: served on every interface, the page and
// the metrics are refused to a client on another address without a token, and
// served with one.
func TestStatusPageRefusesRemoteStrangers(t *testing.T) {
	t.Parallel()
	ip := nonLoopbackIP()
	if ip == "" {
		t.Skip("this machine has no address but loopback; aggregation's TestGuard covers remote clients")
	}
	h, token := observedHome(t, nil)
	s := h.startServe("listening on", "--http", "0.0.0.0:0")
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.base, "http://"))
	remote := "http://" + net.JoinHostPort(ip, port)
	for _, page := range []string{"/", "/metrics"} {
		if code, body := get(t, remote+page, ""); code != http.StatusUnauthorized || strings.Contains(body, "fx.echo") || strings.Contains(body, "nexus_calls_total") {
			t.Errorf("GET %s from %s without a token: %d\n%s", page, ip, code, body)
		}
		if code, body := get(t, remote+page, token); code != http.StatusOK {
			t.Errorf("GET %s from %s with a token: %d\n%s", page, ip, code, body)
		}
	}
}

// nonLoopbackIP is an IPv4 address of this machine that is not loopback, or "".
func nonLoopbackIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}
