package aggregation

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/upstream"
)

// This file holds what a modern child tells Nexus unasked. Such a child sends no
// notification it was not asked for: Nexus opens a subscriptions/listen request
// for the list changes the child offers and the resources the gateway's clients
// subscribed to, and the stream it answers with carries them to the same
// handlers a legacy child's notifications reach (pumpNotifications). A changed
// set of resources re-opens the stream; one that ends is opened again.

// listenRetry is the first wait before a listen stream that ended is opened
// again; it doubles up to upstream.MaxBackoff while the stream keeps ending.
const listenRetry = time.Second

// listening is the state of a modern connection's listen stream.
type listening struct {
	mu   sync.Mutex
	uris map[string]bool // the resources subscribed to at the child
	// id is the request of the stream open now, sent the URIs it asked for;
	// acked, once its acknowledgment came (ackDone), the ones the child took.
	id      string
	sent    map[string]bool
	acked   map[string]bool
	ackDone bool
	ackc    chan struct{}      // closed and replaced at each acknowledgment
	cancel  context.CancelFunc // ends the stream open now
	reopen  chan struct{}      // holds one request to open the stream anew
}

func newListening() listening {
	return listening{uris: map[string]bool{}, ackc: make(chan struct{}), reopen: make(chan struct{}, 1)}
}

// listenTo opens a modern connection's listen stream anew with uri among its
// resources, and returns once the child acknowledged it.
func (cn *conn) listenTo(ctx context.Context, uri string) error {
	if cn.Caps.Resources == nil || !cn.Caps.Resources.Subscribe {
		return &RPCError{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("server %s offers no resource subscriptions", cn.server)}
	}
	l := &cn.listen
	l.mu.Lock()
	if l.uris[uri] && l.ackDone && l.acked[uri] {
		l.mu.Unlock()
		return nil
	}
	l.uris[uri] = true
	cancel := l.cancel
	l.mu.Unlock()
	cn.reopenListen(cancel)
	for {
		l.mu.Lock()
		sent, done, took, ackc := l.sent[uri], l.ackDone, l.acked[uri], l.ackc
		l.mu.Unlock()
		switch {
		case sent && done && took:
			return nil
		case sent && done:
			return &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("server %s did not accept a subscription to %s", cn.server, uri)}
		}
		select {
		case <-ackc:
		case <-cn.Done():
			return errChildGone
		case <-ctx.Done():
			return fmt.Errorf("waiting for server %s to acknowledge the subscription to %s: %w", cn.server, uri, context.Cause(ctx))
		}
	}
}

// stopListeningTo opens a modern connection's listen stream anew without the
// resource uri.
func (cn *conn) stopListeningTo(uri string) {
	l := &cn.listen
	l.mu.Lock()
	if !l.uris[uri] {
		l.mu.Unlock()
		return
	}
	delete(l.uris, uri)
	cancel := l.cancel
	l.mu.Unlock()
	cn.reopenListen(cancel)
}

// reopenListen asks listenLoop for a stream with the current filter and ends
// the one open now (cancel, which may be nil).
func (cn *conn) reopenListen(cancel context.CancelFunc) {
	select {
	case cn.listen.reopen <- struct{}{}:
	default:
	}
	if cancel != nil {
		cancel()
	}
}

// listenFilter is what the stream asks for: the list changes the child offers
// (on the child's own connection: a client session's connection takes its lists
// from it) and the subscribed resources; nil when nothing.
func (cn *conn) listenFilter() *mcp.SubscriptionFilter {
	var f mcp.SubscriptionFilter
	if cn.owner == nil {
		f.ToolsListChanged = cn.Caps.Tools != nil && cn.Caps.Tools.ListChanged
		f.PromptsListChanged = cn.Caps.Prompts != nil && cn.Caps.Prompts.ListChanged
		f.ResourcesListChanged = cn.Caps.Resources != nil && cn.Caps.Resources.ListChanged
	}
	for u := range cn.listen.uris {
		f.ResourceSubscriptions = append(f.ResourceSubscriptions, u)
	}
	slices.Sort(f.ResourceSubscriptions)
	if !f.ToolsListChanged && !f.PromptsListChanged && !f.ResourcesListChanged && len(f.ResourceSubscriptions) == 0 {
		return nil
	}
	return &f
}

// listenLoop keeps a modern connection's listen stream open while the
// connection lives and it has something to ask for.
func (c *child) listenLoop(ctx context.Context, cn *conn) {
	l := &cn.listen
	wait, warned := listenRetry, false
	for {
		lctx, cancel := context.WithCancel(ctx)
		id := cn.NextID()
		l.mu.Lock()
		f := cn.listenFilter()
		if f != nil {
			l.id, l.cancel, l.ackDone, l.acked = string(id), cancel, false, nil
			l.sent = map[string]bool{}
			for _, u := range f.ResourceSubscriptions {
				l.sent[u] = true
			}
		}
		l.mu.Unlock()
		if f == nil {
			cancel()
			select {
			case <-l.reopen:
				continue
			case <-cn.Done():
				return
			case <-ctx.Done():
				return
			}
		}
		started := time.Now()
		_, err := cn.requestID(lctx, id, string(mcp.MethodSubscriptionsListen), map[string]any{"notifications": f}, outgoing{})
		cancel()
		l.mu.Lock()
		l.cancel = nil
		l.mu.Unlock()
		if cn.Lost() || ctx.Err() != nil {
			return
		}
		select {
		case <-l.reopen:
			continue // a new filter: at once
		default:
		}
		if time.Since(started) >= upstream.StablePeriod {
			wait = listenRetry
		}
		if !warned {
			c.log.Warn("the server's subscriptions/listen stream ended: opening it again", "err", err, "in", wait)
			warned = true
		} else {
			c.log.Debug("the server's subscriptions/listen stream ended again", "err", err, "in", wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-l.reopen:
		case <-cn.Done():
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			return
		}
		t.Stop()
		wait = min(wait*2, upstream.MaxBackoff)
	}
}

// listenAcked records the child's acknowledgment of a listen stream: the
// resources it took. It reports whether the acknowledgment is the current
// stream's.
func (cn *conn) listenAcked(params json.RawMessage) bool {
	var head struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &head) != nil {
		return false
	}
	id := jsonrpc.Compact(head.Meta[mcp.MetaKeySubscriptionID])
	var ack struct {
		Notifications mcp.SubscriptionFilter `json:"notifications"`
	}
	_ = json.Unmarshal(params, &ack) // what does not read took nothing
	l := &cn.listen
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(id) == 0 || string(id) != l.id {
		return false // none, or a stream since replaced
	}
	l.ackDone, l.acked = true, map[string]bool{}
	for _, u := range ack.Notifications.ResourceSubscriptions {
		l.acked[u] = true
	}
	close(l.ackc)
	l.ackc = make(chan struct{})
	return true
}
