package status

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"github.com/nexus-mcp/nexus/audit"
)

// Paths of the console's actions.
const (
	ClearMemoryPath = "/console/memory/clear"
	ApprovePath     = "/console/tools/approve"
)

// trailRows bounds the trail view.
const trailRows = 200

// csrfKey binds CSRF tokens to this process: a token is the HMAC of the
// credential the page was read with, so it is worth nothing to another
// credential, and nothing after a restart.
var csrfKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}()

// csrfToken is credential's token; "" for none.
func csrfToken(credential string) string {
	if credential == "" {
		return ""
	}
	m := hmac.New(sha256.New, csrfKey)
	m.Write([]byte("nexus console\x00" + credential))
	return hex.EncodeToString(m.Sum(nil))
}

// filter reads the trail view's filter from the query and selects the entries.
func (v *view) filter(r *http.Request, src Sources) {
	if src.Recent == nil {
		return
	}
	q := r.URL.Query()
	v.TrailOn = true
	v.Match = audit.Match{Agent: q.Get("agent"), Tool: q.Get("tool"), Decision: q.Get("decision"), Outcome: q.Get("outcome")}
	if !slices.Contains([]string{"", audit.Allowed, audit.Denied}, v.Match.Decision) {
		v.Match.Decision = ""
	}
	v.Trail = src.Recent(v.Match, trailRows)
}

// actions offers the forms a credential may use, with its CSRF token.
func (v *view) actions(r *http.Request, src Sources) {
	v.CSRF = csrfToken(src.Gateway.PageCredential(r))
	v.CanClear = v.CSRF != "" && src.ClearMemory != nil && v.Memory.On
	v.CanApprove = v.CSRF != "" && src.Approve != nil
	switch r.URL.Query().Get("done") {
	case "cleared":
		v.Done = "Memory was cleared."
	case "approved":
		v.Done = "The held tools were approved; the server lists them at its next listing."
	}
}

// Actions are the console's state-changing handlers, by path. Serve them behind
// aggregation.Gateway.GuardAction (a token or a login, POST, same origin); each
// also checks the form's CSRF token against the request's credential, then
// redirects to the console.
func Actions(src Sources) map[string]http.Handler {
	out := map[string]http.Handler{}
	if src.ClearMemory != nil {
		out[ClearMemoryPath] = action(src, func(r *http.Request) (string, error) {
			_, err := src.ClearMemory(r.Context())
			return "cleared", err
		})
	}
	if src.Approve != nil {
		out[ApprovePath] = action(src, func(r *http.Request) (string, error) {
			server := r.PostFormValue("server")
			if server == "" {
				return "", fmt.Errorf("name a server")
			}
			_, err := src.Approve(r.Context(), server)
			return "approved", err
		})
	}
	return out
}

func action(src Sources, do func(*http.Request) (string, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
		want := csrfToken(src.Gateway.PageCredential(r))
		got := r.PostFormValue("csrf")
		if want == "" || !hmac.Equal([]byte(got), []byte(want)) {
			http.Error(w, "403 forbidden: the form's CSRF token is missing or not this login's: reload the console and try again", http.StatusForbidden)
			return
		}
		done, err := do(r)
		if err != nil {
			msg := err.Error()
			if src.Redact != nil {
				msg = src.Redact(msg)
			}
			http.Error(w, "the action failed: "+msg, http.StatusBadRequest)
			return
		}
		http.Redirect(w, r, "/?done="+url.QueryEscape(done), http.StatusSeeOther)
	})
}
