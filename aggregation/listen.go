package aggregation

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
)

// listenParams is what subscriptions/listen asks for.
type listenParams struct {
	Notifications struct {
		ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
		PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
		ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
		ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
	} `json:"notifications"`
}

// listen is subscriptions/listen, the modern era's way to hear of changes: the
// request's stream stays open and carries the notifications the client opted in to,
// each tagged with the request's id, until the client ends it (it closes the stream;
// on stdio, notifications/cancelled) or Nexus stops, which answers it.
//
// The request's session becomes, for as long as the stream lasts, a session like a
// legacy one whose stream is this one (listenSink): list changes reach it per its
// agent's view as they reach any session, resource updates per subscription, under
// the agent's policy; log messages and anything else never do.
func listen(ctx context.Context, s *session, params json.RawMessage, r sink) (json.RawMessage, *RPCError) {
	var p listenParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(`subscriptions/listen params must be {"notifications": {"toolsListChanged": true, "resourceSubscriptions": ["<uri>"], ...}}: %v`, err)}
	}
	want := p.Notifications
	g := s.g
	g.lists.await(ctx)
	ls := &listenSink{r: r}
	if q := s.scope(); q != nil {
		ls.id = q.id // the stream's subscription is named by its request
	}
	ls.kinds = map[string]bool{
		"notifications/tools/list_changed":     want.ToolsListChanged,
		"notifications/prompts/list_changed":   want.PromptsListChanged,
		"notifications/resources/list_changed": want.ResourcesListChanged,
		"notifications/resources/updated":      len(want.ResourceSubscriptions) > 0,
	}
	s.out = ls
	// Registered first, then measured: what the client is told changed is measured
	// from the lists of now, in step with listsChanged, so no change between the two
	// is lost.
	g.sessions.add(s)
	defer g.sessions.remove(s)
	g.listed(s, func(seen *seenLists, v *view) {
		_, toolsFP := s.sessionTools(v)
		*seen = seenLists{tools: toolsFP, prompts: v.promptsFP, resources: v.resourcesFP,
			listedTools: want.ToolsListChanged, listedPrompts: want.PromptsListChanged, listedResources: want.ResourcesListChanged}
	})

	// Each resource as the client names it, if it may read it; the acknowledgement
	// lists those that took.
	var honored []string
	for _, uri := range want.ResourceSubscriptions {
		raw, _ := json.Marshal(map[string]string{"uri": uri})
		server, childURI, rpcErr := s.resourceServer(ctx, raw, "subscribe to")
		if rpcErr == nil {
			rpcErr = g.subs.add(ctx, g, s, subKey{server: server, uri: childURI}, uri)
		}
		if rpcErr != nil {
			g.log.Info("subscriptions/listen: a resource subscription was not honored", "agent", s.agent, "uri", uri, "reason", rpcErr.Message)
			continue
		}
		honored = append(honored, uri)
	}
	defer func() {
		s.mu.Lock()
		subs := s.subs
		s.subs = map[string]subKey{}
		s.mu.Unlock()
		for uri, k := range subs {
			g.subs.remove(g, s, k, uri)
		}
	}()

	ack := map[string]any{}
	for key, on := range map[string]bool{"toolsListChanged": want.ToolsListChanged, "promptsListChanged": want.PromptsListChanged, "resourcesListChanged": want.ResourcesListChanged} {
		if on {
			ack[key] = true
		}
	}
	if len(honored) > 0 {
		ack["resourceSubscriptions"] = honored
	}
	if !ls.open(s.outward(jsonrpc.Notification("notifications/subscriptions/acknowledged", map[string]any{
		"_meta": map[string]any{metaSubscriptionID: ls.id}, "notifications": ack}))) {
		return nil, &RPCError{Code: jsonrpc.CodeInvalidRequest, Message: "subscriptions/listen needs a stream to answer on: over HTTP, send Accept: application/json, text/event-stream"}
	}
	g.log.Debug("listen stream opened", "agent", s.agent, "front", s.front)

	alive := time.NewTicker(sseKeepAlive)
	defer alive.Stop()
	ka, _ := r.(keepAliver)
	stopped := g.runCtx
	if stopped == nil {
		stopped = context.Background()
	}
	for {
		select {
		case <-ctx.Done():
			return nil, errNoReply // the client ended it
		case <-s.ctx.Done():
			return nil, errNoReply // its token was revoked
		case <-stopped.Done():
			// Nexus is stopping: the subscription ends gracefully, with an answer.
			return json.RawMessage(`{"_meta":{"` + metaSubscriptionID + `":` + string(ls.id) + `}}`), nil
		case <-alive.C:
			if ka != nil && !ka.keepAlive() {
				return nil, errNoReply
			}
		}
	}
}

// keepAliver is a stream that can carry a comment that keeps an idle connection
// open (an SSE response).
type keepAliver interface{ keepAlive() bool }

// listenSink is the stream of a subscriptions/listen request: it passes the kinds
// of notification the client asked for, tagged with the subscription's id, and
// holds them back until the acknowledgement, which must come first, is sent.
type listenSink struct {
	r     sink
	id    json.RawMessage
	kinds map[string]bool

	mu     sync.Mutex
	acked  bool
	held   [][]byte
	broken bool
}

// open sends the acknowledgement, then what arrived meanwhile; false when the
// stream could not carry it.
func (l *listenSink) open(ack []byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.r.send(ack) {
		l.broken = true
		return false
	}
	l.acked = true
	for _, msg := range l.held {
		l.r.send(msg)
	}
	l.held = nil
	return true
}

func (l *listenSink) send(msg []byte) bool {
	if !l.kinds[methodOf(msg)] {
		return true // not asked for: dropped, the stream is fine
	}
	msg = tagSubscription(msg, l.id)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.broken:
		return false
	case !l.acked:
		if len(l.held) < maxQueued {
			l.held = append(l.held, msg)
		}
		return true
	}
	return l.r.send(msg)
}

func (l *listenSink) reply([]byte) {}

// tagSubscription puts the subscription id into a notification's _meta.
func tagSubscription(msg []byte, id json.RawMessage) []byte {
	var m struct {
		Method string                     `json:"method"`
		Params map[string]json.RawMessage `json:"params"`
	}
	if json.Unmarshal(msg, &m) != nil {
		return msg
	}
	if m.Params == nil {
		m.Params = map[string]json.RawMessage{}
	}
	var meta map[string]json.RawMessage
	_ = json.Unmarshal(m.Params["_meta"], &meta)
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	meta[metaSubscriptionID] = id
	m.Params["_meta"] = marshal(meta)
	return jsonrpc.Notification(m.Method, marshal(m.Params))
}
