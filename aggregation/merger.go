package aggregation

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// rebuildDelay debounces manifest rebuilds: a child that restarts, or several that
// change at once, cost clients one tools/list_changed, not a burst.
const rebuildDelay = 50 * time.Millisecond

// merger keeps the manifest: the children's lists merged into one, built
// again a moment after a child's lists change, or at once when a request finds
// it behind. Readers load the current one and never lock.
type merger struct {
	cur atomic.Pointer[manifest]
	// due holds a rebuild the loop is to make, after rebuildDelay.
	due chan struct{}
	// changes counts the changes of a child's connection, state or config
	// (changed); built is the count the last finished build began from. A
	// request finds the manifest behind while built < changes.
	changes atomic.Uint64
	built   atomic.Uint64

	mu        sync.Mutex         // one build at a time
	published map[string][]*Tool // server -> the tool list it last gave, none while it gives none

	src mergeSource
	// settled closes once every child of the first config made its first
	// attempt; until then, or until firstLists (set by Start), a request
	// waits for them (await).
	settled    <-chan struct{}
	firstLists time.Time
}

// mergeSource is what a build reads and tells: the gateway.
type mergeSource interface {
	kids() map[string]*child
	// forget marks a server's remembered answers stale.
	forget(ctx context.Context, server string)
	// listsChanged tells the sessions whose lists the new manifest changed.
	listsChanged()
}

func newMerger(src mergeSource, settled <-chan struct{}) *merger {
	m := &merger{due: make(chan struct{}, 1), published: map[string][]*Tool{}, src: src, settled: settled}
	m.cur.Store(&manifest{byName: map[string]*Tool{}, byPrompt: map[string]*prompt{}, res: &resourceIndex{}})
	return m
}

// current is the manifest as last built.
func (m *merger) current() *manifest { return m.cur.Load() }

// changed says a child's connection, state or config changed. Such changes
// come at the pace of starts, backoffs and reloads: a request that comes
// before the debounced rebuild makes it first (await).
func (m *merger) changed() {
	m.changes.Add(1)
	m.schedule()
}

// schedule asks for a rebuild after the debounce only. A child that listed
// anew after it said its lists changed decides how often that is: were a
// client's list to rebuild too, a child that flaps its tools would have every
// client told of a change at each list any client makes.
func (m *merger) schedule() {
	select {
	case m.due <- struct{}{}:
	default:
	}
}

// loop makes the rebuilds asked for, each rebuildDelay after it was asked,
// until ctx ends.
func (m *merger) loop(ctx context.Context, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.due:
		}
		if !sleep(ctx, rebuildDelay) {
			return
		}
		for _, err := range m.rebuild(ctx) {
			log.Error("tool skipped", "err", err)
		}
	}
}

// await waits, only in the first moments after Start (until m.settled closes
// or firstLists passes), for the children's first attempts; then it brings a
// manifest that lags behind a child's connection or state (changed) up to
// date, so that a list asked once a child connected (the log says so) holds
// its tools, not only after the rebuild's debounce.
func (m *merger) await(ctx context.Context) {
	select {
	case <-m.settled:
	default:
		t := time.NewTimer(time.Until(m.firstLists))
		select {
		case <-m.settled:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	want := m.changes.Load()
	if m.built.Load() >= want {
		return
	}
	// Under mu, a request waits for a build already running, and requests
	// that found the manifest behind together make one build, not one each.
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.built.Load() < want {
		// The build is every client's, not only this request's: a client
		// that goes away meanwhile must not leave a changed server's answers
		// fresh.
		m.rebuildLocked(context.WithoutCancel(ctx)) // what it skipped, the loop's pass logs
	}
}

// rebuild merges the children's tools into a new manifest, forgets remembered
// answers of servers whose tools changed or that restarted, and tells the
// sessions whose lists changed. A server's tools are compared with the last
// list it gave while connected, never with the nothing of a server still
// starting: in a gateway that just started, every server's first list is new
// to it, and what memory kept from the previous run stays fresh.
func (m *merger) rebuild(ctx context.Context) []error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rebuildLocked(ctx)
}

// rebuildLocked is rebuild, with m.mu held.
func (m *merger) rebuildLocked(ctx context.Context) []error {
	src := m.src
	from := m.changes.Load() // a change from now on is read by the next build
	perServer := map[string][]*Tool{}
	kids := src.kids()
	for name, c := range kids {
		_, tools := c.current()
		perServer[name] = tools
		old, seen := m.published[name]
		if tools == nil {
			// Not connected. One that was has exited: what it said is stale. One
			// still starting has said nothing yet: its first list is no change.
			if seen && len(old) > 0 {
				src.forget(ctx, name)
				m.published[name] = nil
			}
			continue
		}
		if seen && len(old) > 0 && !sameTools(old, tools) {
			src.forget(ctx, name)
		}
		m.published[name] = tools
	}
	for name := range m.published {
		if _, ok := kids[name]; !ok {
			src.forget(ctx, name)
			delete(m.published, name)
		}
	}
	perExtras := map[string]extras{}
	for name, c := range kids {
		perExtras[name] = c.life.Lists().extras
	}
	next, errs := buildManifest(perServer, perExtras)
	m.cur.Store(next)
	m.built.Store(from)
	src.listsChanged()
	return errs
}

// sameTools reports whether two lists of a server's tools are what it listed
// alike, tool for tool. Keeping the list itself to compare with, rather than a
// copy of its bytes, costs no memory: the list is the one shown.
func sameTools(a, b []*Tool) bool {
	return slices.EqualFunc(a, b, func(x, y *Tool) bool { return x == y || bytes.Equal(x.Raw, y.Raw) })
}
