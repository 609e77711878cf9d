package tests

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestConsoleCommandOfAStdioGateway is a desktop client's setup: the client
// starts `nexus serve` over stdio and calls a tool through it; later the user
// runs `nexus console` and reads that gateway's console in a browser. Through
// the command, the console keeps its rules: without a token the page sends the
// browser to /login; logged in with an agent's token it shows the server and
// the call; clearing memory is refused without the login, from another origin
// and without the page's CSRF token, and works with all three (the next call
// reaches the child again). Once the gateway exits, the running command says
// so and ends, and `nexus console` says no gateway is running.
func TestConsoleCommandOfAStdioGateway(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	token := "nxs_console_cmd_token"
	h.writeConfig(map[string]any{
		"servers": map[string]any{"fx": h.fixtureServer(map[string]any{"timeout": "5s"})},
		"agents":  map[string]any{"coder": map[string]any{"tokenSha256": polTokenHash(token)}},
		"policy":  map[string]any{"agents": map[string]any{"coder": map[string]any{"allow": []string{"fx.*"}}}},
	})
	s := h.serveStdioReady([]string{"fx"}, "--agent", "coder")
	args := map[string]any{"message": "through the gateway"}
	if r := s.call("fx__echo", args); r.IsError || r.cacheStatus() == "hit" {
		t.Fatalf("the first call: %+v", r)
	}
	if st := s.call("fx__echo", args).cacheStatus(); st != "hit" {
		t.Fatalf("the second call was not answered from memory: %q", st)
	}

	out, stderr, code := h.nexus("console", "--list", "--json")
	var listed []struct {
		PID   int    `json:"pid"`
		Front string `json:"front"`
		Agent string `json:"agent"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1 ||
		listed[0].PID != s.cmd.Process.Pid || listed[0].Front != "stdio" || listed[0].Agent != "coder" {
		t.Fatalf("nexus console --list --json: %d %s %s", code, out, stderr)
	}

	// nexus console, as the user runs it.
	console := exec.Command(built.nexus, "console", "--addr", "127.0.0.1:0", "--json")
	console.Env = h.env()
	consoleErr := &lockedBuffer{}
	console.Stderr = consoleErr
	pipe, err := console.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := console.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{}) // closed once console has exited, with waitErr
	var waitErr error
	lines := make(chan string, 1)
	go func() {
		rd := bufio.NewReader(pipe)
		line, _ := rd.ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, rd)
		waitErr = console.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			console.Process.Kill()
			<-exited
		}
	})
	var first struct {
		URL     string `json:"url"`
		Gateway struct {
			PID int `json:"pid"`
		} `json:"gateway"`
	}
	select {
	case line := <-lines:
		if err := json.Unmarshal([]byte(line), &first); err != nil || first.Gateway.PID != s.cmd.Process.Pid ||
			!strings.HasPrefix(first.URL, "http://127.0.0.1:") {
			t.Fatalf("nexus console printed %q (%v)\n%s", line, err, consoleErr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("nexus console printed no URL:\n%s", consoleErr)
	}
	base := strings.TrimSuffix(first.URL, "/")

	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path string, cookie *http.Cookie, header map[string]string, form url.Values) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(form.Encode()))
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		if cookie != nil {
			req.AddCookie(cookie)
		}
		res, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	read := func(res *http.Response) string {
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}

	// Without a token: the browser is sent to the login, anything else refused.
	res := do("GET", "/", nil, map[string]string{"Accept": "text/html"}, nil)
	if body := read(res); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login" || strings.Contains(body, "fx") {
		t.Errorf("the page without a token: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	if res := do("GET", "/", nil, nil, nil); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("the page without a token, not a browser: %d, want 401", res.StatusCode)
	}
	if res := do("POST", "/login", nil, nil, url.Values{"token": {"nxs_not_a_token"}}); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("a login with a wrong token: %d, want 401", res.StatusCode)
	}

	// Logged in with the agent's token.
	res = do("POST", "/login", nil, nil, url.Values{"token": {token}})
	read(res)
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		cookie = c
	}
	if res.StatusCode != http.StatusSeeOther || cookie == nil {
		t.Fatalf("the login: %d, cookie %v\n%s", res.StatusCode, cookie, consoleErr)
	}
	res = do("GET", "/", cookie, map[string]string{"Accept": "text/html"}, nil)
	page := read(res)
	if res.StatusCode != http.StatusOK || !strings.Contains(page, `data-server="fx"`) {
		t.Fatalf("the logged-in page: %d\n%s", res.StatusCode, page)
	}
	calls := regexp.MustCompile(`id="total-calls">([0-9]+)<`).FindStringSubmatch(page)
	if calls == nil {
		t.Fatalf("the console counts no calls:\n%s", page)
	}
	if n, _ := strconv.Atoi(calls[1]); n != 2 {
		t.Errorf("the console counts %d calls, the client made 2", n)
	}
	csrf := regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`).FindStringSubmatch(page)
	if csrf == nil {
		t.Fatalf("the console offers no action with a CSRF token:\n%s", page)
	}

	// Clearing memory: refused without each of the three, done with all.
	clear := "/console/memory/clear"
	form := url.Values{"csrf": {csrf[1]}}
	for _, bad := range []struct {
		why    string
		cookie *http.Cookie
		origin string
		form   url.Values
		code   int
	}{
		{"without the login", nil, base, form, http.StatusUnauthorized},
		{"from another origin", cookie, "http://127.0.0.1:9", form, http.StatusForbidden},
		{"from a page with no origin", cookie, "", form, http.StatusForbidden},
		{"without the CSRF token", cookie, base, url.Values{}, http.StatusForbidden},
	} {
		header := map[string]string{}
		if bad.origin != "" {
			header["Origin"] = bad.origin
		}
		if res := do("POST", clear, bad.cookie, header, bad.form); res.StatusCode != bad.code {
			t.Errorf("clearing memory %s: %d, want %d: %s", bad.why, res.StatusCode, bad.code, read(res))
		}
	}
	if st := s.call("fx__echo", args).cacheStatus(); st != "hit" {
		t.Fatalf("a refused clear emptied memory: %q", st)
	}
	if res := do("POST", clear, cookie, map[string]string{"Origin": base}, form); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("clearing memory with the login, the origin and the CSRF token: %d: %s", res.StatusCode, read(res))
	}
	if st := s.call("fx__echo", args).cacheStatus(); st == "hit" {
		t.Error("memory still answers after the console cleared it")
	}

	// The gateway exits: the running console says so and ends; a new one finds
	// no gateway.
	s.close()
	select {
	case <-exited:
		if err := waitErr; err == nil || !strings.Contains(consoleErr.String(), "has stopped") {
			t.Errorf("nexus console after its gateway stopped: %v\n%s", err, consoleErr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("nexus console still runs after its gateway stopped:\n%s", consoleErr)
	}
	if out, stderr, code := h.nexus("console"); code == 0 || !strings.Contains(stderr, "no gateway is running") || !strings.Contains(stderr, "nexus serve") {
		t.Errorf("nexus console with no gateway: %d\n%s%s", code, out, stderr)
	}
}
