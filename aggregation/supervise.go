package aggregation

import (
	"context"
	"time"

	"github.com/nexus-mcp/nexus/upstream"
)

// supervisee is a child as its Life sees it (upstream.Supervisee): how the
// child's own connection is opened and listed, what is kept once it serves,
// and when it should stop.
type supervisee child

var _ upstream.Supervisee[*conn, listing] = (*supervisee)(nil)

// Restore shows a lazy server's lists from its last run (restoreLists).
func (s *supervisee) Restore() bool { return (*child)(s).restoreLists() }

// Connect opens the child's own connection and lists its tools, resources and
// prompts. A failure carries the line of the child's stderr that explains it.
func (s *supervisee) Connect(ctx context.Context) (*conn, listing, error) {
	c := (*child)(s)
	cn, raws, err := c.connect(ctx, nil, nil)
	if err != nil {
		return cn, listing{}, withStderr(err, cn.StderrTail())
	}
	ex := c.listExtras(ctx, cn)
	cn.Touch()
	return cn, listing{raws: raws, extras: ex}, nil // its tools derived as it becomes the child's
}

// Up keeps the lists for the next run and starts the pings of a remote child.
func (s *supervisee) Up(ctx context.Context, cn *conn, l listing, took time.Duration) {
	c := (*child)(s)
	c.saveLists(cn, l)
	// Logged once its lists are the child's state: whoever reads the log (a
	// person, a test) may ask for them now.
	c.log.Info("child connected", "tools", len(l.raws), "took", took.Round(time.Millisecond))
	if cn.Transport.Remote() {
		go c.watchRemote(ctx, cn)
	}
}

// Serve waits while cn serves (watch).
func (s *supervisee) Serve(ctx context.Context, cn *conn, started time.Time) upstream.End {
	return (*child)(s).watch(ctx, cn, started)
}

// Keep keeps what cn listed for the next run (saveLists).
func (s *supervisee) Keep(cn *conn, l listing) { (*child)(s).saveLists(cn, l) }

// Reconnected tells the gateway the child came back after exiting: what
// memory remembers of it is stale.
func (s *supervisee) Reconnected() { s.events.reconnected(s.name) }

// Drain is the server's call timeout: what a call that took the connection
// just before it was retired may still take.
func (s *supervisee) Drain() time.Duration { return (*child)(s).config().CallTimeout() }
