package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
)

// ErrGone is what a request waiting on a connection gets when the server went
// away under it.
var ErrGone = errors.New("the server exited")

// ListenRetry is the first wait before a listen stream that ended is opened
// again; it doubles up to MaxBackoff while the stream keeps ending.
const ListenRetry = time.Second

// Listen keeps a 2026-07-28 connection's subscriptions/listen stream. A
// server of that era sends no notification it was not asked for: the stream
// asks for the list changes the server offers and the resources subscribed
// to, and what it carries reaches the connection's notification handler as a
// legacy server's notifications do. A changed set of resources opens the
// stream anew; one that ends is opened again, with backoff.
type Listen struct {
	server string // its name, for messages
	conn   *Conn
	// lists asks for the list changes the server offers: on the server's own
	// connection, not a client session's, which takes its lists from it.
	lists bool
	// open sends the stream's request, under id, and returns when it ends.
	open func(ctx context.Context, id json.RawMessage, params any) error
	log  *slog.Logger
	// retry is the first wait before a stream that ended is opened again.
	retry time.Duration

	mu   sync.Mutex
	uris map[string]bool // the resources subscribed to at the server
	// id is the request of the stream open now, sent the URIs it asked for;
	// acked, once its acknowledgment came (ackDone), the ones the server took.
	id      string
	sent    map[string]bool
	acked   map[string]bool
	ackDone bool
	ackc    chan struct{}      // closed and replaced at each acknowledgment
	cancel  context.CancelFunc // ends the stream open now
	reopen  chan struct{}      // holds one request to open the stream anew
}

// NewListen is the listen stream of server's connection conn, which open
// sends (Run), asking for list changes when lists is set.
func NewListen(server string, conn *Conn, lists bool, open func(ctx context.Context, id json.RawMessage, params any) error, log *slog.Logger) *Listen {
	return &Listen{server: server, conn: conn, lists: lists, open: open, log: log, retry: ListenRetry,
		uris: map[string]bool{}, ackc: make(chan struct{}), reopen: make(chan struct{}, 1)}
}

// Subscribe opens the stream anew with uri among its resources, and returns
// once the server acknowledged it: with a *jsonrpc.Error when the server
// offers no subscriptions or did not take this one.
func (l *Listen) Subscribe(ctx context.Context, uri string) error {
	if caps := l.conn.Caps.Resources; caps == nil || !caps.Subscribe {
		return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("server %s offers no resource subscriptions", l.server)}
	}
	l.mu.Lock()
	if l.uris[uri] && l.ackDone && l.acked[uri] {
		l.mu.Unlock()
		return nil
	}
	l.uris[uri] = true
	cancel := l.cancel
	l.mu.Unlock()
	l.openAnew(cancel)
	for {
		l.mu.Lock()
		sent, done, took, ackc := l.sent[uri], l.ackDone, l.acked[uri], l.ackc
		l.mu.Unlock()
		switch {
		case sent && done && took:
			return nil
		case sent && done:
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("server %s did not accept a subscription to %s", l.server, uri)}
		}
		select {
		case <-ackc:
		case <-l.conn.Done():
			return ErrGone
		case <-ctx.Done():
			return fmt.Errorf("waiting for server %s to acknowledge the subscription to %s: %w", l.server, uri, context.Cause(ctx))
		}
	}
}

// Unsubscribe opens the stream anew without the resource uri.
func (l *Listen) Unsubscribe(uri string) {
	l.mu.Lock()
	if !l.uris[uri] {
		l.mu.Unlock()
		return
	}
	delete(l.uris, uri)
	cancel := l.cancel
	l.mu.Unlock()
	l.openAnew(cancel)
}

// openAnew asks Run for a stream with the current filter and ends the one
// open now (cancel, which may be nil).
func (l *Listen) openAnew(cancel context.CancelFunc) {
	select {
	case l.reopen <- struct{}{}:
	default:
	}
	if cancel != nil {
		cancel()
	}
}

// filter is what the stream asks for; nil when nothing. l.mu is held.
func (l *Listen) filter() *mcp.SubscriptionFilter {
	var f mcp.SubscriptionFilter
	if caps := l.conn.Caps; l.lists {
		f.ToolsListChanged = caps.Tools != nil && caps.Tools.ListChanged
		f.PromptsListChanged = caps.Prompts != nil && caps.Prompts.ListChanged
		f.ResourcesListChanged = caps.Resources != nil && caps.Resources.ListChanged
	}
	for u := range l.uris {
		f.ResourceSubscriptions = append(f.ResourceSubscriptions, u)
	}
	slices.Sort(f.ResourceSubscriptions)
	if !f.ToolsListChanged && !f.PromptsListChanged && !f.ResourcesListChanged && len(f.ResourceSubscriptions) == 0 {
		return nil
	}
	return &f
}

// Run keeps the stream open while the connection lives and the stream has
// something to ask for, until ctx ends.
func (l *Listen) Run(ctx context.Context) {
	wait, warned := l.retry, false
	for {
		sctx, cancel := context.WithCancel(ctx)
		id := l.conn.NextID()
		l.mu.Lock()
		f := l.filter()
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
			case <-l.conn.Done():
				return
			case <-ctx.Done():
				return
			}
		}
		started := time.Now()
		err := l.open(sctx, id, map[string]any{"notifications": f})
		cancel()
		l.mu.Lock()
		l.cancel = nil
		l.mu.Unlock()
		if l.conn.Lost() || ctx.Err() != nil {
			return
		}
		select {
		case <-l.reopen:
			continue // a new filter: at once
		default:
		}
		if time.Since(started) >= StablePeriod {
			wait = l.retry
		}
		if !warned {
			l.log.Warn("the server's subscriptions/listen stream ended: opening it again", "err", err, "in", wait)
			warned = true
		} else {
			l.log.Debug("the server's subscriptions/listen stream ended again", "err", err, "in", wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-l.reopen:
		case <-l.conn.Done():
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			return
		}
		t.Stop()
		wait = min(wait*2, MaxBackoff)
	}
}

// Acknowledged records the server's acknowledgment of a stream, the params of
// its notifications/subscriptions/acknowledged: the resources it took. It
// reports whether the acknowledgment is the current stream's.
func (l *Listen) Acknowledged(params json.RawMessage) bool {
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
