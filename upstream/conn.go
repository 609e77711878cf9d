package upstream

import (
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
)

// Conn is one live connection to a server: its transport, the era its opening
// exchange settled, the ids of the requests Nexus sends on it, what keeps it
// in check (Doubts, Backlog), and its end, once, with the reason.
type Conn struct {
	// Transport carries the connection; it is set once, before the
	// connection is used.
	Transport Transport
	// Doubts holds calls back while a broken request is checked.
	Doubts *Doubts
	// Backlog holds the notifications on their way to be routed.
	Backlog *Backlog
	// Changes are the lists the server said changed, to be read again.
	Changes *Changes
	// Caps and Instructions are what the server said of itself in its
	// opening exchange (Adopt); they are not changed afterwards.
	Caps         mcp.ServerCapabilities
	Instructions string
	// Declared are the capabilities Nexus declares on the connection: in the
	// legacy handshake, and in every modern request's _meta. Listen is a
	// modern connection's subscriptions/listen stream. ParamTool is the
	// server's definition of a tool whose arguments a modern HTTP request
	// mirrors into Mcp-Param headers (StandardHeaders). All three are set
	// before the connection is used.
	Declared  mcp.ClientCapabilities
	Listen    *Listen
	ParamTool func(name string) *mcp.Tool
	// Shared says the connection is the server's own, not one client
	// session's; set before it is used.
	Shared bool
	// Info is who Nexus says it is in a modern request's _meta. Level, when
	// set, is the level a modern server is asked to log at by the connection
	// of one client session (that session's); a shared connection's is the
	// one logging/setLevel last set on it (Dialect.Local). Both are set
	// before the connection is used.
	Info  mcp.Implementation
	Level func() string

	tail *Tail
	ids  atomic.Int64

	askedRoots atomic.Bool

	// inFlight counts the requests under way; lastUsed is when one last
	// began or ended, or the connection was last claimed (Touch), in
	// UnixNano.
	inFlight atomic.Int32
	lastUsed atomic.Int64

	done    chan struct{}
	endOnce sync.Once
	err     error // why it ended; read once done is closed

	mu          sync.Mutex
	version     string // the protocol version its requests carry
	why         string // how its era was chosen, for people
	sharedLevel string // the level logging/setLevel set on a modern connection
}

// backlogSize is how many notifications of a server may wait to be routed;
// past it, they are dropped (Backlog.Put).
const backlogSize = 256

// NewConn is a connection not yet carried by a transport.
func NewConn() *Conn {
	return &Conn{Doubts: NewDoubts(), Backlog: NewBacklog(backlogSize), Changes: NewChanges(), tail: &Tail{}, done: make(chan struct{})}
}

// Tail keeps the last lines of a stdio server's stderr.
func (c *Conn) Tail() *Tail { return c.tail }

// StderrTail is what the server last wrote on stderr; "" for none, or no
// connection.
func (c *Conn) StderrTail() string {
	if c == nil || c.tail == nil {
		return ""
	}
	return c.tail.String()
}

// NextID is the id of the connection's next request of Nexus's own: a string,
// so that it never collides with the numbers mcp-go's client sends.
func (c *Conn) NextID() json.RawMessage {
	return jsonrpc.StringID("nexus-" + strconv.FormatInt(c.ids.Add(1), 10))
}

// Lose ends the connection, keeping why (nil: no reason beyond its end). Only
// the first call counts.
func (c *Conn) Lose(err error) {
	if c == nil {
		return
	}
	c.endOnce.Do(func() {
		c.err = err
		close(c.done)
	})
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Lost reports whether the connection has ended.
func (c *Conn) Lost() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Err is why the connection ended: nil while it lives, or when it ended with
// no reason given.
func (c *Conn) Err() error {
	if !c.Lost() {
		return nil
	}
	return c.err
}

// ExitReason says why the connection ended; it waits for the end.
func (c *Conn) ExitReason() string {
	<-c.done
	if c.err != nil {
		return c.err.Error()
	}
	return "the connection closed"
}

// Close ends the connection and its transport (a process, gracefully).
func (c *Conn) Close() {
	c.Lose(nil)
	if c.Transport != nil {
		_ = c.Transport.Close()
	}
}

// Adopt makes the connection speak e, chosen for the reason why: its requests
// carry e's version (an HTTP transport's header too), and Caps and
// Instructions are e's.
func (c *Conn) Adopt(e Era, why string) {
	c.mu.Lock()
	c.version, c.why = e.Version, why
	c.Caps, c.Instructions = e.Caps, e.Instructions
	c.mu.Unlock()
	SetVersion(c.Transport, e.Version)
}

// Version is the protocol version the connection speaks; "" before its
// opening exchange.
func (c *Conn) Version() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// Era is the era the connection speaks, and how it was chosen.
func (c *Conn) Era() (Era, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Era{Version: c.version, Caps: c.Caps, Instructions: c.Instructions}, c.why
}

// Begin counts a request under way on the connection; the func it returns
// ends it. Idle and LastUsed, which read the count, decide when an idle server
// is stopped and which client session's connection is ended to make room for
// another.
func (c *Conn) Begin() (end func()) {
	c.inFlight.Add(1)
	c.Touch()
	return func() {
		c.Touch()
		c.inFlight.Add(-1)
	}
}

// Touch marks the connection used now.
func (c *Conn) Touch() { c.lastUsed.Store(time.Now().UnixNano()) }

// Idle reports whether no request is under way.
func (c *Conn) Idle() bool { return c.inFlight.Load() == 0 }

// LastUsed is when the connection was last used: a request began or ended,
// or it was touched.
func (c *Conn) LastUsed() time.Time { return time.Unix(0, c.lastUsed.Load()) }

// NoteRootsAsked records that the server asked its client for roots: a change
// of the client's roots may change its answers from then on.
func (c *Conn) NoteRootsAsked() { c.askedRoots.Store(true) }

// AskedRoots reports whether the server asked its client for roots.
func (c *Conn) AskedRoots() bool { return c.askedRoots.Load() }
