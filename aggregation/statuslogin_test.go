package aggregation

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/nexus-mcp/nexus/config"
)

// TestLogin: a browser logs in to the status page with an agent's token in a form
// and gets an HttpOnly, SameSite=Strict session cookie that opens the guarded
// pages, not /mcp; a wrong token opens nothing; the session ends when its token
// is rotated; the form keeps the Host/Origin checks; a browser without a session
// is sent to the form, a script gets the 401.
func TestLogin(t *testing.T) {
	f := newFixture(t)
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("the page")) })
	mux := f.g.HTTPHandler(HTTPOptions{Pages: map[string]http.Handler{"/": page}})
	loopback := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 8765}
	do := func(method, path, body string, header map[string]string, cookie *http.Cookie) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequest(method, "http://127.0.0.1:8765"+path, strings.NewReader(body))
		r.RemoteAddr = "127.0.0.1:5555"
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, loopback))
		for k, v := range header {
			r.Header.Set(k, v)
		}
		if cookie != nil {
			r.AddCookie(cookie)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w
	}
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	login := func(token string) *httptest.ResponseRecorder {
		return do("POST", "/login", url.Values{"token": {token}}.Encode(), form, nil)
	}

	if w := do("GET", "/", "", map[string]string{"Accept": "text/html"}, nil); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/login" {
		t.Errorf("a browser without a session: %d to %q, want 303 to /login", w.Code, w.Header().Get("Location"))
	}
	if w := do("GET", "/", "", nil, nil); w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "/login") {
		t.Errorf("a script without a token: %d %q, want 401 naming /login", w.Code, w.Body)
	}
	if w := do("GET", "/login", "", nil, nil); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `name="token"`) {
		t.Errorf("GET /login: %d %s", w.Code, w.Body)
	}
	if w := login("nope"); w.Code != http.StatusUnauthorized || len(w.Result().Cookies()) != 0 {
		t.Errorf("a wrong token: %d, cookies %v", w.Code, w.Result().Cookies())
	}
	if w := do("POST", "/login", url.Values{"token": {tokens["tester"]}}.Encode(), map[string]string{"Content-Type": form["Content-Type"], "Origin": "http://evil.example"}, nil); w.Code != http.StatusForbidden || len(w.Result().Cookies()) != 0 {
		t.Errorf("a login from a foreign origin: %d, cookies %v", w.Code, w.Result().Cookies())
	}

	w := login(tokens["tester"])
	cookies := w.Result().Cookies()
	if w.Code != http.StatusSeeOther || len(cookies) != 1 {
		t.Fatalf("a good token: %d, cookies %v", w.Code, cookies)
	}
	c := cookies[0]
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || strings.Contains(c.Value, tokens["tester"]) || strings.Contains(w.Body.String(), tokens["tester"]) {
		t.Errorf("the session cookie %+v (body %q): want HttpOnly, SameSite=Strict, Path=/, not the token", c, w.Body)
	}
	session := &http.Cookie{Name: c.Name, Value: c.Value}
	if w := do("GET", "/", "", nil, session); w.Code != http.StatusOK || w.Body.String() != "the page" {
		t.Errorf("the page with the session: %d %q", w.Code, w.Body)
	}
	if w := do("POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}, session); w.Code != http.StatusUnauthorized {
		t.Errorf("/mcp with the session cookie and no token: %d, want 401", w.Code)
	}

	// Rotating the token ends the session.
	cfg := *f.g.Config()
	agents := map[string]config.Agent{}
	for name, a := range cfg.Agents {
		agents[name] = a
	}
	a := agents["tester"]
	a.TokenSHA256 = TokenHash("tok-rotated")
	agents["tester"] = a
	cfg.Agents = agents
	if err := f.g.Reload(&cfg); err != nil {
		t.Fatal(err)
	}
	if w := do("GET", "/", "", nil, session); w.Code != http.StatusUnauthorized {
		t.Errorf("the page with the session of a rotated token: %d, want 401", w.Code)
	}
}
