package aggregation

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
)

// GuardAction serves h, a handler that changes state from the console (clearing
// memory, approving a held tool), only to a POST that
//
//   - carries an agent's token or a login session: unlike the pages, status.public
//     is not enough, since the public may look but not act;
//   - comes from this gateway's own origin: the Origin header (or, without one, the
//     Referer) must name the Host the request was sent to, so another site's form
//     cannot post here with the browser's cookie, whatever http.allowedOrigins
//     allows for /mcp;
//   - passes allowedOrigin's Host check (DNS rebinding).
//
// The handler checks the form's CSRF token itself (PageCredential binds it to the
// credential).
func (g *Gateway) GuardAction(h http.Handler) http.Handler {
	front := &httpFront{g: g}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "405 method not allowed", http.StatusMethodNotAllowed)
			return
		}
		_, byToken := front.tokenAgent(r)
		_, byLogin := g.sessionAgent(r)
		if !byToken && !byLogin {
			w.Header().Set("WWW-Authenticate", `Bearer realm="nexus"`)
			http.Error(w, "401 unauthorized: an action needs an agent's token (log in at /login)", http.StatusUnauthorized)
			return
		}
		if !g.allowedOrigin(r) || !sameOrigin(r) {
			http.Error(w, "403 forbidden: an action must come from this gateway's own page (Origin or Referer)", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// sameOrigin reports whether r's Origin, else its Referer, names the host r was
// sent to. A request with neither is refused: browsers send Origin with every
// POST, and a script that sends neither can send the right one.
func sameOrigin(r *http.Request) bool {
	from := r.Header.Get("Origin")
	if from == "" || from == "null" {
		from = r.Header.Get("Referer")
	}
	u, err := url.Parse(from)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}

// PageCredential names the credential r was authenticated with, for a CSRF token
// bound to it: a digest of its bearer token or of its login cookie, "" when it
// has neither (status.public). It never holds the credential itself.
func (g *Gateway) PageCredential(r *http.Request) string {
	front := &httpFront{g: g}
	if _, ok := front.tokenAgent(r); ok {
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		return "bearer:" + TokenHash(token)
	}
	if _, ok := g.sessionAgent(r); ok {
		c, _ := r.Cookie(loginCookie)
		sum := sha256.Sum256([]byte(c.Value))
		return "login:" + hex.EncodeToString(sum[:])
	}
	return ""
}
