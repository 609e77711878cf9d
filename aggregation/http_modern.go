package aggregation

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
)

// modern serves one 2026-07-28 POST: no session; the bearer token's agent; the
// headers that mirror the body checked against it (a load balancer or a firewall
// in front may route or filter on them, so a request whose headers say something
// else is refused); then the request's own path (serveModern), whose error code
// decides the HTTP status.
func (h *httpFront) modern(w http.ResponseWriter, r *http.Request, agent string, m *jsonrpc.Message, meta clientMeta) {
	id := m.ID
	if !m.IsRequest() {
		// A notification (or a stray response) needs no answer; closing a
		// request's stream is how this era cancels it.
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if rpcErr := checkModernHeaders(r.Header, m, meta.version); rpcErr != nil {
		h.refuse(w, modernStatus(rpcErr.Code), jsonrpc.Response(id, nil, rpcErr))
		return
	}
	if !h.g.modernSlots.acquire(agent, h.modernBound()) {
		h.refuse(w, http.StatusServiceUnavailable, jsonrpc.ErrorResponse(id, jsonrpc.CodeInternal,
			"agent %s already has its maximum of %d requests in flight; wait for one to finish (limits.maxCallsPerSession × limits.maxSessionsPerAgent)", agent, h.modernBound()))
		return
	}
	defer h.g.modernSlots.release(agent)
	if m.Method == "subscriptions/listen" {
		// A listen stream lasts as long as the client keeps it: the server's
		// read timeout, meant for reading requests, must not end it.
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	}
	rep := newHTTPReply(w, r)
	resp, code := h.g.serveModern(r.Context(), origin{front: frontHTTP, agent: agent, credential: h.credential(r), headers: r.Header}, m, meta, rep)
	if resp == nil {
		rep.reply(nil)
		return
	}
	rep.replyStatus(h.g.outward(resp), modernStatus(code))
}

// modernHeader is a request's MCP-Protocol-Version, and whether it names a version
// outside the initialize era, which makes the request a modern one.
func modernHeader(r *http.Request) (string, bool) {
	v := r.Header.Get("Mcp-Protocol-Version")
	return v, v != "" && !legacyVersion(v)
}

// modernBound is how many requests one agent may have in flight in the modern
// era: what its share of legacy sessions could hold.
func (h *httpFront) modernBound() int {
	total := h.maxSessions()
	return h.perAgent(total) * h.g.cfg.Load().Limits.CallsPerSession()
}

// checkModernHeaders checks that the headers a 2026-07-28 POST must carry say what
// its body says: MCP-Protocol-Version the _meta's version, Mcp-Method the method,
// Mcp-Name the name or URI of a tools/call, prompts/get or resources/read.
func checkModernHeaders(hd http.Header, m *jsonrpc.Message, inBody string) *RPCError {
	version := strings.TrimSpace(hd.Get("Mcp-Protocol-Version"))
	switch {
	case version == "":
		return &RPCError{Code: codeHeaderMismatch, Message: "a 2026-07-28 request over HTTP must carry the MCP-Protocol-Version header, equal to its _meta's protocol version"}
	case inBody == "":
		return &RPCError{Code: jsonrpc.CodeInvalidParams, Message: "a 2026-07-28 request must carry _meta[\"" + metaProtocolVersion + "\"], equal to its MCP-Protocol-Version header"}
	case version != inBody:
		return &RPCError{Code: codeHeaderMismatch, Message: "the MCP-Protocol-Version header " + quoted(version) + " does not match the request's _meta protocol version " + quoted(inBody)}
	}
	if got := strings.TrimSpace(hd.Get("Mcp-Method")); got != m.Method {
		return &RPCError{Code: codeHeaderMismatch, Message: "the Mcp-Method header " + quoted(got) + " does not match the request's method " + quoted(m.Method)}
	}
	var want string
	switch m.Method {
	case "tools/call", "prompts/get":
		var p struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(m.Params, &p)
		want = p.Name
	case "resources/read":
		want = uriOf(m.Params)
	default:
		return nil
	}
	got, ok := headerValue(hd.Get("Mcp-Name"))
	if !ok || got != want {
		return &RPCError{Code: codeHeaderMismatch, Message: "the Mcp-Name header must carry the request's name or URI " + quoted(want) + " (base64 as =?base64?...?= when it is not plain ASCII)"}
	}
	return nil
}

// headerValue decodes a header value that may be base64 in the sentinel form
// =?base64?...?=, with the whitespace around it removed; false when it is malformed.
func headerValue(v string) (string, bool) {
	v = strings.TrimSpace(v)
	inner, ok := strings.CutPrefix(v, "=?base64?")
	if !ok {
		return v, v != ""
	}
	inner, ok = strings.CutSuffix(inner, "?=")
	if !ok {
		return "", false
	}
	b, err := base64.StdEncoding.DecodeString(inner)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// modernStatus is the HTTP status 2026-07-28 gives a JSON-RPC error code: an
// unknown method is 404, what the client must fix 400; a result, or an error of
// the call itself, 200.
func modernStatus(code int) int {
	switch code {
	case 0:
		return http.StatusOK
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case codeHeaderMismatch, codeMissingCapability, codeUnsupportedVersion, jsonrpc.CodeInvalidRequest, jsonrpc.CodeInvalidParams, jsonrpc.CodeParseError:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// credential is what a request's session records of its bearer token, so that a
// reload that revokes it ends the session's streams: "" when no token is asked for.
func (h *httpFront) credential(r *http.Request) string {
	if len(*h.g.tokens.Load()) == 0 {
		return ""
	}
	return credential(r)
}

// agentSlots bound the modern requests each agent has in flight over HTTP, as a
// session's slots bound a legacy session's.
type agentSlots struct {
	mu sync.Mutex
	n  map[string]int
}

func (a *agentSlots) acquire(agent string, bound int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n[agent] >= bound {
		return false
	}
	if a.n == nil {
		a.n = map[string]int{}
	}
	a.n[agent]++
	return true
}

func (a *agentSlots) release(agent string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n[agent]--; a.n[agent] <= 0 {
		delete(a.n, agent)
	}
}
