package aggregation

import (
	"crypto/rand"
	"html/template"
	"net/http"
	"strings"
	"sync"
	"time"
)

// A browser cannot send a bearer token, so the status page has a login: /login
// takes an agent's token in a form and answers with a session cookie that opens
// the read-only pages (Guard) for loginTTL. The cookie never opens /mcp, which
// takes the bearer token alone. The token is never stored, logged or echoed: it is
// hashed and looked up, as a bearer token is (a lookup by SHA-256 tells a timing
// observer nothing about the token). A session holds the hash of the token it was
// opened with and ends as soon as that token is rotated or removed.
const (
	loginPath   = "/login"
	loginCookie = "nexus_status"
	loginTTL    = 12 * time.Hour
	// maxLogins bounds the sessions kept; past it the oldest is dropped.
	maxLogins = 1000
	// maxLoginForm bounds a login form's body.
	maxLoginForm = 4 << 10
)

// logins are the status page's browser sessions, by the SHA-256 of their cookie.
type logins struct {
	mu   sync.Mutex
	byID map[string]login
}

type login struct {
	tokenHash string // of the token the session was opened with
	agent     string
	expires   time.Time
}

// open starts a session for the agent of tokenHash and returns its cookie value.
func (l *logins) open(tokenHash, agent string, now time.Time) string {
	id := rand.Text() + rand.Text() // 52 base32 characters: 260 random bits
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byID == nil {
		l.byID = map[string]login{}
	}
	var oldest string
	for k, s := range l.byID {
		if !now.Before(s.expires) {
			delete(l.byID, k)
		} else if oldest == "" || s.expires.Before(l.byID[oldest].expires) {
			oldest = k
		}
	}
	if len(l.byID) >= maxLogins {
		delete(l.byID, oldest)
	}
	l.byID[TokenHash(id)] = login{tokenHash: tokenHash, agent: agent, expires: now.Add(loginTTL)}
	return id
}

// agent is the agent of the session whose cookie value is id, while it has not
// expired and its token is still that agent's (tokens: hash -> agent).
func (l *logins) agent(id string, tokens map[string]string, now time.Time) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := TokenHash(id)
	s, ok := l.byID[key]
	if !ok {
		return "", false
	}
	if !now.Before(s.expires) || tokens[s.tokenHash] != s.agent {
		delete(l.byID, key)
		return "", false
	}
	return s.agent, true
}

// sessionAgent is the agent of r's status page session cookie, if any.
func (g *Gateway) sessionAgent(r *http.Request) (string, bool) {
	c, err := r.Cookie(loginCookie)
	if err != nil || c.Value == "" {
		return "", false
	}
	return g.logins.agent(c.Value, *g.tokens.Load(), time.Now())
}

// wantsPage reports whether r comes from a browser navigating to a page, which a
// 401 would leave at a dead end: it is sent to the login form instead.
func wantsPage(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.Contains(r.Header.Get("Accept"), "text/html")
}

var loginForm = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Nexus: log in</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: system-ui, sans-serif; max-width: 32rem; margin: 4rem auto">
<h1>Nexus status</h1>
{{if .}}<p role="alert">{{.}}</p>{{end}}
<form method="post" action="/login">
<p><label for="token">An agent's token (<code>nexus agent add NAME</code> prints one)</label></p>
<p><input id="token" name="token" type="password" autocomplete="current-password" required autofocus size="40"></p>
<p><button type="submit">Log in</button></p>
</form>
<p>The session lasts 12 hours, opens this page and the metrics only, and ends when the token is rotated or removed.</p>
</body></html>
`))

// LoginPage is /login: a form that takes an agent's token and, when it is one,
// sets the session cookie and sends the browser to the status page. The Host and
// Origin checks of /mcp apply.
func (g *Gateway) LoginPage() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.allowedOrigin(r) {
			http.Error(w, "403 forbidden: the Host or Origin of this request is not this gateway's (DNS rebinding protection)", http.StatusForbidden)
			return
		}
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			h.Set("Content-Type", "text/html; charset=utf-8")
			_ = loginForm.Execute(w, "")
		case http.MethodPost:
			g.login(w, r)
		default:
			h.Set("Allow", "GET, HEAD, POST")
			http.Error(w, "405 method not allowed", http.StatusMethodNotAllowed)
		}
	})
}

// login checks the form's token and opens a session for its agent.
func (g *Gateway) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginForm)
	token := strings.TrimSpace(r.PostFormValue("token"))
	hash := TokenHash(token)
	agent, ok := (*g.tokens.Load())[hash]
	if token == "" || !ok {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		_ = loginForm.Execute(w, "That is not the token of an agent of this gateway.")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: loginCookie, Value: g.logins.open(hash, agent, time.Now()), Path: "/",
		MaxAge: int(loginTTL / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil,
	})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}
