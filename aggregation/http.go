package aggregation

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/nexus-mcp/nexus/policy"
)

// HTTPOptions configure the streamable HTTP front.
type HTTPOptions struct {
	// IdleTimeout ends sessions idle for that long (default 1h).
	IdleTimeout time.Duration
	// RequireToken refuses every request while no agent token is configured, instead
	// of serving everyone as anonymous: for addresses beyond this machine, where a
	// reload that removes the last token must not open the gateway.
	RequireToken bool
}

// HTTPHandler serves the gateway over streamable HTTP at /mcp. Agents are identified
// by bearer tokens whose SHA-256 the config holds (agents.NAME.tokenSha256), read
// anew on every request so a reload revokes at once. A request without a valid token
// is refused with 401 before any MCP handling; clientInfo is never used for identity
// over HTTP. With no token configured every request is served as the anonymous agent
// (the caller decides whether that is acceptable for the address it listens on).
func (g *Gateway) HTTPHandler(opts HTTPOptions) http.Handler {
	idle := opts.IdleTimeout
	if idle <= 0 {
		idle = time.Hour
	}
	h := &httpFront{g: g, requireToken: opts.RequireToken}
	h.mcp = server.NewStreamableHTTPServer(g.front,
		server.WithEndpointPath("/mcp"),
		server.WithStateful(true),
		server.WithSessionIdManager(g.sessions),
		server.WithSessionIdleTTL(idle),
		server.WithEventStore(server.NewInMemoryEventStore()),
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			return WithAgent(ctx, agentFromRequest(r))
		}),
	)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	return mux
}

type httpAgentKey struct{}

func agentFromRequest(r *http.Request) string {
	if a, ok := r.Context().Value(httpAgentKey{}).(string); ok {
		return a
	}
	return policy.Anonymous
}

type httpFront struct {
	g            *Gateway
	requireToken bool
	mcp          *server.StreamableHTTPServer
}

// TokenHash is how a bearer token is kept in config: hex SHA-256.
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func (h *httpFront) authenticate(r *http.Request) (string, bool) {
	tokens := *h.g.tokens.Load()
	if len(tokens) == 0 {
		return policy.Anonymous, !h.requireToken
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return "", false
	}
	agent, ok := tokens[TokenHash(token)]
	return agent, ok
}

func (h *httpFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	agent, ok := h.authenticate(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="nexus"`)
		http.Error(w, "401 unauthorized: send Authorization: Bearer <token> (nexus agent add NAME creates one)", http.StatusUnauthorized)
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), httpAgentKey{}, agent))
	if r.Method != http.MethodPost {
		h.mcp.ServeHTTP(w, r)
		return
	}
	limit := h.g.cfg.Load().MessageLimit()
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if int64(len(body)) > limit {
		writeJSON(w, http.StatusRequestEntityTooLarge, responseLine(nil, nil, &RPCError{Code: codeInvalidRequest,
			Message: fmt.Sprintf("message larger than %d bytes refused; raise maxMessageBytes in the config if it is legitimate", limit)}))
		return
	}
	var msg incoming
	if json.Unmarshal(body, &msg) == nil {
		session := r.Header.Get("Mcp-Session-Id")
		if msg.isCall() {
			h.serveCall(w, r, session, agent, &msg)
			return
		}
		if msg.Method == "notifications/cancelled" {
			h.g.inflight.cancel(session, msg.Params)
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	h.mcp.ServeHTTP(w, r)
}

// serveCall answers a tools/call: as one JSON body, or as an SSE stream when the
// client accepts one and asked for progress.
func (h *httpFront) serveCall(w http.ResponseWriter, r *http.Request, session, agent string, msg *incoming) {
	if session == "" {
		writeJSON(w, http.StatusBadRequest, responseLine(msg.ID, nil, &RPCError{Code: codeInvalidRequest, Message: "missing Mcp-Session-Id header: send initialize first"}))
		return
	}
	if terminated, err := h.g.sessions.Validate(session); err != nil || terminated {
		writeJSON(w, http.StatusNotFound, responseLine(msg.ID, nil, &RPCError{Code: codeInvalidRequest, Message: "unknown or expired session: initialize a new one"}))
		return
	}
	var p callParams
	_ = json.Unmarshal(msg.Params, &p)
	streaming := p.progressToken() != nil && strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	flusher, canFlush := w.(http.Flusher)
	if !streaming || !canFlush {
		notify := func(method string, params map[string]any) {
			_ = h.g.front.SendNotificationToSpecificClient(session, method, params)
		}
		writeJSON(w, http.StatusOK, h.g.serveCall(r.Context(), session, agent, msg, notify))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Mcp-Session-Id", session)
	w.WriteHeader(http.StatusOK)
	var mu sync.Mutex
	done := false
	event := func(data []byte) {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		fmt.Fprintf(w, "event: message\ndata: %s\n\n", data)
		flusher.Flush()
	}
	resp := h.g.serveCall(r.Context(), session, agent, msg, func(method string, params map[string]any) {
		event(notificationLine(method, params))
	})
	event(resp)
	mu.Lock()
	done = true // late progress from the child must not write to a finished response
	mu.Unlock()
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
