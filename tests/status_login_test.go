package tests

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
)

// TestStatusPageLoginInABrowser is issue 38's point 9: a browser, which cannot
// send a bearer header, is sent from the status page to /login; the form takes
// an agent's token and the session cookie it sets opens the status page, as the
// real binary serves it.
func TestStatusPageLoginInABrowser(t *testing.T) {
	t.Parallel()
	const token = "tok-status-login"
	h := newHome(t, map[string]any{
		"servers": map[string]any{},
		"agents":  map[string]any{"coder": map[string]any{"tokenSha256": polTokenHash(token)}},
	})
	s := h.startServe("listening on", "--http", "127.0.0.1:0")
	defer s.stop(t)
	if !strings.Contains(s.stderr.String(), "/login with an agent's token") {
		t.Errorf("serve does not say where to log in:\n%s", s.stderr)
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Jar: jar}
	get := func() *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", s.base+"/", nil)
		req.Header.Set("Accept", "text/html")
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := get(); resp.Request.URL.Path != "/login" || resp.StatusCode != http.StatusOK {
		t.Errorf("a browser without a session: ended at %s with %d, want the login form", resp.Request.URL, resp.StatusCode)
	}
	resp, err := browser.PostForm(s.base+"/login", url.Values{"token": {"wrong"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d, want 401", resp.StatusCode)
	}
	resp, err = browser.PostForm(s.base+"/login", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/" {
		t.Errorf("a good token: ended at %s with %d, want the status page", resp.Request.URL, resp.StatusCode)
	}
	if resp := get(); resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/" {
		t.Errorf("the status page with the session: ended at %s with %d", resp.Request.URL, resp.StatusCode)
	}
	if strings.Contains(s.stderr.String(), token) {
		t.Errorf("the token reached the log:\n%s", s.stderr)
	}
}
