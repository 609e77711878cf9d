package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
)

// stream is one subscriptions/listen request as the server gets it.
type stream struct {
	id     json.RawMessage
	filter mcp.SubscriptionFilter
}

// listenServer is the server's side of a Listen: it is told of each stream
// opened; a stream lives until Nexus ends it, or, with end set, ends at once.
type listenServer struct {
	opened chan stream
	end    bool
}

func (s *listenServer) open(ctx context.Context, id json.RawMessage, params any) error {
	p := params.(map[string]any)
	s.opened <- stream{id: id, filter: *p["notifications"].(*mcp.SubscriptionFilter)}
	if s.end {
		return io.EOF
	}
	<-ctx.Done()
	return ctx.Err()
}

// ack is the server's acknowledgment of st, taking the resources in took.
func ack(st stream, took ...string) json.RawMessage {
	f := st.filter
	f.ResourceSubscriptions = took
	b, _ := json.Marshal(map[string]any{"_meta": map[string]any{mcp.MetaKeySubscriptionID: st.id}, "notifications": f})
	return b
}

// newListen is a Listen of a server with caps, and its server, running.
func newListen(t *testing.T, caps mcp.ServerCapabilities, lists, end bool) (*Listen, *listenServer, *Conn) {
	t.Helper()
	c := NewConn()
	c.Caps = caps
	srv := &listenServer{opened: make(chan stream, 16), end: end}
	l := NewListen("fx", c, lists, srv.open, slog.New(slog.DiscardHandler))
	l.retry = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return l, srv, c
}

func subscribable(listChanged bool) mcp.ServerCapabilities {
	var caps mcp.ServerCapabilities
	caps.Resources = &struct {
		Subscribe   bool `json:"subscribe,omitempty"`
		ListChanged bool `json:"listChanged,omitempty"`
	}{Subscribe: true, ListChanged: listChanged}
	caps.Tools = &struct {
		ListChanged bool `json:"listChanged,omitempty"`
	}{ListChanged: listChanged}
	return caps
}

// next is the next stream opened, within a bound.
func next(t *testing.T, srv *listenServer) stream {
	t.Helper()
	select {
	case st := <-srv.opened:
		return st
	case <-time.After(5 * time.Second):
		t.Fatal("no stream was opened")
		return stream{}
	}
}

// TestListenSubscribes: a subscription opens the stream anew with its
// resource and waits for the server's word on it.
func TestListenSubscribes(t *testing.T) {
	tests := []struct {
		name     string
		caps     mcp.ServerCapabilities
		takes    bool
		wantCode int // 0: subscribed
	}{
		{"taken", subscribable(false), true, 0},
		{"refused", subscribable(false), false, jsonrpc.CodeInvalidParams},
		{"no subscriptions offered", mcp.ServerCapabilities{}, false, jsonrpc.CodeMethodNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, srv, _ := newListen(t, tc.caps, false, false)
			errc := make(chan error, 1)
			go func() { errc <- l.Subscribe(context.Background(), "file:///a") }()
			if tc.wantCode != jsonrpc.CodeMethodNotFound {
				st := next(t, srv)
				if !slices.Equal(st.filter.ResourceSubscriptions, []string{"file:///a"}) {
					t.Fatalf("the stream asked for %v", st.filter.ResourceSubscriptions)
				}
				var took []string
				if tc.takes {
					took = []string{"file:///a"}
				}
				if !l.Acknowledged(ack(st, took...)) {
					t.Fatal("the current stream's acknowledgment was not taken")
				}
			}
			err := <-errc
			var rpcErr *jsonrpc.Error
			switch {
			case tc.wantCode == 0 && err != nil:
				t.Fatalf("Subscribe = %v", err)
			case tc.wantCode != 0 && (!errors.As(err, &rpcErr) || rpcErr.Code != tc.wantCode):
				t.Fatalf("Subscribe = %v, want code %d", err, tc.wantCode)
			}
			if tc.wantCode == 0 {
				// Subscribed already: no new stream.
				if err := l.Subscribe(context.Background(), "file:///a"); err != nil {
					t.Fatal(err)
				}
				select {
				case st := <-srv.opened:
					t.Errorf("a subscription held already opened a stream: %+v", st)
				case <-time.After(50 * time.Millisecond):
				}
			}
		})
	}
}

// TestListenFilter: the server's own connection asks for the list changes
// the server offers; a client session's does not; a stream is opened only
// when there is something to ask for, and anew when that changes.
func TestListenFilter(t *testing.T) {
	l, srv, _ := newListen(t, subscribable(true), true, false)
	st := next(t, srv)
	if !st.filter.ToolsListChanged || !st.filter.ResourcesListChanged || st.filter.PromptsListChanged {
		t.Errorf("the stream asked for %+v, want the tools' and resources' list changes", st.filter)
	}
	l.Acknowledged(ack(st))

	session, sessionSrv, _ := newListen(t, subscribable(true), false, false)
	select {
	case st := <-sessionSrv.opened:
		t.Fatalf("a client session's connection with no subscription opened a stream: %+v", st)
	case <-time.After(50 * time.Millisecond):
	}
	go func() { _ = session.Subscribe(context.Background(), "file:///b") }()
	st = next(t, sessionSrv)
	if st.filter.ToolsListChanged || !slices.Equal(st.filter.ResourceSubscriptions, []string{"file:///b"}) {
		t.Errorf("a client session's stream asked for %+v, want only its resource", st.filter)
	}
	session.Acknowledged(ack(st, "file:///b"))
	session.Unsubscribe("file:///b")
	select {
	case st := <-sessionSrv.opened:
		t.Fatalf("with nothing left to ask for, a stream was opened: %+v", st)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestListenAcknowledgments: only the current stream's acknowledgment counts.
func TestListenAcknowledgments(t *testing.T) {
	l, srv, _ := newListen(t, subscribable(true), true, false)
	first := next(t, srv)
	go func() { _ = l.Subscribe(context.Background(), "file:///a") }()
	second := next(t, srv)
	if l.Acknowledged(ack(first, "file:///a")) {
		t.Error("the acknowledgment of a stream since replaced was taken")
	}
	if l.Acknowledged([]byte(`{"notifications":{}}`)) {
		t.Error("an acknowledgment naming no stream was taken")
	}
	if !l.Acknowledged(ack(second, "file:///a")) {
		t.Error("the current stream's acknowledgment was not taken")
	}
}

// TestListenReopens: a stream the server ends is opened again, after a wait
// that grows; a subscription waiting when the server goes is let go.
func TestListenReopens(t *testing.T) {
	l, srv, c := newListen(t, subscribable(true), true, true)
	var opened []time.Time
	for range 3 {
		next(t, srv)
		opened = append(opened, time.Now())
	}
	if gap1, gap2 := opened[1].Sub(opened[0]), opened[2].Sub(opened[1]); gap1 < 10*time.Millisecond || gap2 < gap1 {
		t.Errorf("reopened after %v, then %v: want at least the first wait, growing", gap1, gap2)
	}
	errc := make(chan error, 1)
	go func() { errc <- l.Subscribe(context.Background(), "file:///a") }()
	next(t, srv)
	c.Lose(fmt.Errorf("gone"))
	if err := <-errc; !errors.Is(err, ErrGone) {
		t.Errorf("a subscription waiting on a server that went got %v, want ErrGone", err)
	}
}
