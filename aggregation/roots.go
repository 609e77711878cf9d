package aggregation

import (
	"context"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// This file keeps a child's view of its client's roots in step with the client
// whose request it serves. A server that asks for roots usually asks once, as
// it starts, and acts on the answer from then on (the npm filesystem server
// narrows what it may read to them; server-everything reports them). A shared
// child started before any call got no roots; a client session's own child may
// be sent the first request before it has taken them in.

// rootsState is whose roots a connection's child was last told. told is closed
// and replaced each time a client answers the child's roots/list.
type rootsState struct {
	mu   sync.Mutex
	of   *session
	told chan struct{}
	// sync serializes the calls that bring a shared child's roots up to date.
	sync sync.Mutex
	// deaf is set once the child did not ask again after being told the
	// roots changed: its later calls are not held up for it.
	deaf bool
}

// toldBy records that s answered the child's roots/list.
func (r *rootsState) toldBy(s *session) {
	r.mu.Lock()
	r.of = s
	close(r.told)
	r.told = make(chan struct{})
	r.mu.Unlock()
}

// forget records that the child's roots are nobody's (a client's changed).
func (r *rootsState) forget() {
	r.mu.Lock()
	r.of = nil
	r.mu.Unlock()
}

// current reports whether the child was last told s's roots, and the channel
// closed when it is next told.
func (r *rootsState) current(s *session) (bool, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.of == s, r.told
}

// rootsSettle is how long, at least, a child is given to take in the roots it
// was told before the next request reaches it: a server checks each root on
// disk after the answer (the npm filesystem server does), and says nothing
// when it is done.
const rootsSettle = 100 * time.Millisecond

// await waits, within ctx, until cn's child has been told s's roots, then lets
// it take them in: ping round trips for at least rootsSettle (two at least),
// so that the work the answer started is done before the next request.
func (r *rootsState) await(ctx context.Context, cn *conn, s *session) bool {
	for {
		ok, told := r.current(s)
		if ok {
			break
		}
		select {
		case <-told:
		case <-cn.Done():
			return false
		case <-ctx.Done():
			return false
		}
	}
	start := time.Now()
	for n := 0; n < 2 || time.Since(start) < rootsSettle; n++ {
		if _, err := cn.Request(ctx, string(mcp.MethodPing), nil); err != nil {
			return false
		}
		if n >= 1 {
			select { // a ping every 10ms, not a busy loop
			case <-time.After(10 * time.Millisecond):
			case <-ctx.Done():
				return false
			}
		}
	}
	return true
}

// syncWait bounds how long a call waits for a shared child, told its client's
// roots changed, to ask for them. A node server on a loaded machine was seen to
// take over a second; a child that never asks pays it once (it is then deaf).
const syncWait = 3 * time.Second

// syncRoots brings a shared child that asks for roots up to date with the
// roots of from's client before from's call reaches it: when the child was last
// told another client's roots (or none), it is told they changed, and the call
// waits (up to syncWait) for the child to ask and from's client to answer. A
// child of one legacy client pays this once; a child that does not ask again
// when told is not held up for again. Modern requests are left out: each would
// pay an input round of its own.
func (g *Gateway) syncRoots(ctx context.Context, cn *conn, from *caller) {
	if from == nil || from.s == nil || !from.s.era.lasting() || !from.s.caps.roots || !cn.Shared || !cn.Dialect().KeepsSession() || !cn.AskedRoots() {
		return
	}
	if ok, _ := cn.roots.current(from.s); ok || cn.roots.isDeaf() {
		return
	}
	cn.roots.sync.Lock()
	defer cn.roots.sync.Unlock()
	if ok, _ := cn.roots.current(from.s); ok || cn.roots.isDeaf() {
		return
	}
	_, remove := cn.callers.add(from) // the child's roots/list belongs to this call
	defer remove()
	wait, cancel := context.WithTimeout(ctx, syncWait)
	defer cancel()
	cn.Dialect().Notify("notifications/roots/list_changed")
	if !cn.roots.await(wait, cn, from.s) && ctx.Err() == nil {
		cn.roots.mu.Lock()
		cn.roots.deaf = true
		cn.roots.mu.Unlock()
		g.log.Info("a shared server did not ask for its client's roots when told they changed; its calls are not held up for them again", "server", cn.server)
	}
}

func (r *rootsState) isDeaf() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deaf
}
