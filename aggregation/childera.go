package aggregation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/upstream"
)

// This file holds the child's protocol era. A child speaks either the modern,
// stateless protocol (2026-07-28 and later: no initialize, every request carries
// its version, identity and capabilities in _meta) or a legacy one (2025-11-25
// and earlier: an initialize handshake fixes them for the session).
//
// Unless servers.X.protocolVersion says which, Nexus offers initialize first and
// asks server/discover only of a child that refuses it. A dual-era child is thus
// spoken the legacy era, on purpose: today's SDKs (mcp-go, the official Go SDK,
// the TypeScript SDK v2) refuse their own requests to the client (sampling,
// elicitation, roots) on a 2026-07-28 connection, and a legacy session costs no
// _meta per request. Modern clients lose nothing by it: Nexus bridges a legacy
// child's requests into their input_required rounds. A child that speaks only
// the modern era refuses initialize and is spoken that. The era found is
// remembered per launch (stdio) or URL (HTTP), so restarts and the connections
// of client sessions do not ask again; a remembered era that fails is forgotten
// and the next attempt starts over.

// discoverWait bounds the server/discover probe: a legacy server may answer an
// unknown method before initialize with silence rather than an error.
const discoverWait = 5 * time.Second

// era is what the handshake of a child found (upstream.Era: its protocol
// version and what the child said of itself), and why says, for people, how
// the era was chosen (eraPinned, eraAnswered...).
type era struct {
	upstream.Era
	why string
}

// eraMemo remembers the era of a child between its connections. key is what the
// era belongs to (eraKey): a changed launch or URL is not the same server.
type eraMemo struct {
	mu  sync.Mutex
	key string
	e   *era
}

func (m *eraMemo) get(key string) *era {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.e == nil || m.key != key {
		return nil
	}
	e := *m.e
	return &e
}

func (m *eraMemo) put(key string, e era) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.key, m.e = key, &e
}

func (m *eraMemo) forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.key == key {
		m.e = nil
	}
}

// eraKey is what a remembered era belongs to: the process as launched (stdio),
// the URL (HTTP).
func eraKey(s *config.Server) string {
	if s.Transport == config.TransportStdio {
		return launchKey(s)
	}
	return s.Transport + " " + s.URL
}

// Why an era was chosen, as list-servers --live, doctor and the status page say it.
const (
	eraPinned     = "pinned by servers.%s.protocolVersion"
	eraSSE        = "HTTP+SSE predates the stateless era"
	eraAnswered   = "it answered initialize: a session keeps its requests to the client (sampling, elicitation, roots)"
	eraModernOnly = "it refused initialize and answered server/discover: it speaks only the stateless era"
)

// handshake settles the era of cn and performs its opening: initialize for a
// legacy child, server/discover for a modern one. owner is the client session
// the connection serves; its connection reuses a remembered modern era without
// asking the child again.
func (c *child) handshake(ctx context.Context, cn *conn, owner *session) error {
	cfg := c.config()
	pinned := cfg.ProtocolVersion
	switch {
	case cfg.Transport == config.TransportSSE:
		return c.initialize(ctx, cn, cfg.Protocol(), eraSSE)
	case pinned != "" && !mcp.IsModernProtocol(pinned):
		if err := c.initialize(ctx, cn, pinned, fmt.Sprintf(eraPinned, c.name)); err != nil {
			return fmt.Errorf("%w (servers.%s.protocolVersion is %s, which allows no other; a server that speaks only %s needs it removed or set to that)",
				err, c.name, pinned, mcp.LATEST_PROTOCOL_VERSION)
		}
		return nil
	case pinned != "":
		err := c.discover(ctx, cn, pinned, c.probeWait, fmt.Sprintf(eraPinned, c.name))
		if nm := (*upstream.NotModernError)(nil); errors.As(err, &nm) {
			return fmt.Errorf("%s does not speak protocol %s, which servers.%s.protocolVersion requires: %w; remove the setting to let Nexus find the server's era, or set a version up to %s",
				c.name, pinned, c.name, nm.Why, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
		}
		return err
	}
	key := eraKey(cfg)
	e := c.eras.get(key)
	switch {
	case e == nil:
		return c.findEra(ctx, cn, key, config.DefaultProtocolVersion, eraAnswered)
	case !e.Modern():
		err := c.findEra(ctx, cn, key, e.Version, e.why)
		if err != nil && ctx.Err() == nil {
			c.eras.forget(key) // it may have changed: the next attempt asks afresh
		}
		return err
	case owner != nil:
		cn.Adopt(e.Era, e.why)
		return nil
	}
	err := c.discover(ctx, cn, e.Version, c.probeWait, e.why)
	if err == nil {
		c.eras.put(key, cn.era())
		return nil
	}
	if ctx.Err() == nil {
		c.eras.forget(key)
	}
	if nm := (*upstream.NotModernError)(nil); errors.As(err, &nm) {
		c.log.Info("the server no longer speaks the stateless protocol: offering initialize", "err", err)
		return c.findEra(ctx, cn, key, config.DefaultProtocolVersion, eraAnswered)
	}
	return err
}

// findEra offers a child initialize at version (chosen for the reason why)
// and, when it refuses, asks server/discover: a child that answers that speaks
// only the modern era. The era found is remembered under key.
func (c *child) findEra(ctx context.Context, cn *conn, key, version, why string) error {
	err := c.initialize(ctx, cn, version, why)
	if err == nil {
		c.eras.put(key, cn.era())
		return nil
	}
	if !childAnswered(err) || ctx.Err() != nil {
		return err
	}
	derr := c.discover(ctx, cn, mcp.LATEST_PROTOCOL_VERSION, c.probeWait, eraModernOnly)
	if derr != nil {
		return fmt.Errorf("%w; asked server/discover instead, it failed too: %v", err, derr)
	}
	c.log.Debug("the server speaks only the stateless era", "initialize", err)
	c.eras.put(key, cn.era())
	if _, isHTTP := cn.Transport.MCP().(transport.HTTPConnection); isHTTP {
		// mcp-go's HTTP transport took the refused initialize for a session and
		// opens the legacy GET stream: a fresh connection speaks the era found.
		return errEraFound
	}
	return nil
}

// errEraFound asks connect for a fresh connection, which speaks the era just
// found and remembered.
var errEraFound = errors.New("the era was found on a connection that cannot speak it")

// childAnswered reports whether err is the child's own refusal of a request: a
// JSON-RPC error, or an HTTP 4xx to an initialize POST (mcp-go takes that for
// a legacy SSE server; a modern-only server answers so too), as opposed to a
// failure to reach it.
func childAnswered(err error) bool {
	if errors.Is(err, transport.ErrLegacySSEServer) {
		return true
	}
	te := (*transport.Error)(nil)
	return !errors.As(err, &te) && !errors.Is(err, errChildGone) && !errors.Is(err, transport.ErrTransportClosed) &&
		!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled)
}

// initialize performs the legacy handshake at version; why says how that era
// was chosen.
func (c *child) initialize(ctx context.Context, cn *conn, version, why string) error {
	e, err := upstream.Initialize(ctx, cn.Transport, version, nexusInfo(), cn.declared)
	if err != nil {
		return fmt.Errorf("initializing %s: %w", c.name, err)
	}
	cn.Adopt(e, why)
	return nil
}

// discover sends server/discover at version, within bound when it is not zero
// (upstream.Discover). A child that answers is modern and cn takes its era,
// chosen for the reason why. The error is a *upstream.NotModernError when the
// answer is a legacy server's.
func (c *child) discover(ctx context.Context, cn *conn, version string, bound time.Duration, why string) error {
	e, err := upstream.Discover(ctx, cn.Transport, c.name, cn.modernMeta(version), bound, cn.NextID)
	if errors.Is(err, transport.ErrTransportClosed) {
		return errChildGone
	}
	if err != nil {
		return err
	}
	cn.Adopt(e, why)
	return nil
}

// era is what cn's handshake found, for the child to remember.
func (cn *conn) era() era {
	e, why := cn.Era()
	return era{e, why}
}

// modern reports whether cn speaks the stateless protocol (2026-07-28 and
// later): no session, every request carries its _meta, changes arrive on a
// subscriptions/listen stream, and the child never sends requests back.
func (cn *conn) modern() bool { return mcp.IsModernProtocol(cn.Version()) }

// dialect is how cn speaks its child's era (dialect.go).
func (cn *conn) dialect() dialect {
	if cn.modern() {
		return modernDialect{cn}
	}
	return legacyDialect{cn}
}

// nexusInfo is who Nexus says it is to its children.
func nexusInfo() mcp.Implementation { return mcp.Implementation{Name: "nexus", Version: Version} }

// modernMeta is what cn's requests at version say of their client: Nexus, the
// capabilities cn declares, the level its child is asked to log at.
func (cn *conn) modernMeta(version string) upstream.ModernMeta {
	return upstream.ModernMeta{Version: version, Client: nexusInfo(), Capabilities: cn.declared, LogLevel: cn.logLevel()}
}

// logLevel is the level a modern child is asked to log at: its client
// session's, for a session's own connection; the most verbose any session set,
// for a shared one (see forwardSharedLevel).
func (cn *conn) logLevel() string {
	if cn.owner != nil {
		if l := cn.owner.level.Load(); l != levelUnset && int(l) < len(logLevels) {
			return logLevels[l]
		}
		return ""
	}
	cn.levelMu.Lock()
	defer cn.levelMu.Unlock()
	return cn.sharedLevel
}

// paramHeaderTool is the child's definition of the tool it calls name when its
// schema mirrors arguments into headers (x-mcp-header), nil otherwise.
func (c *child) paramHeaderTool(name string) *mcp.Tool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.headerTools[name]
}

// headerToolsOf decodes, once per listing, the tools whose schema mirrors arguments
// into headers; nil when none does.
func headerToolsOf(raws []json.RawMessage) map[string]*mcp.Tool {
	var out map[string]*mcp.Tool
	for _, raw := range raws {
		if !bytes.Contains(raw, []byte("x-mcp-header")) {
			continue
		}
		var t mcp.Tool
		if json.Unmarshal(raw, &t) != nil {
			continue
		}
		if out == nil {
			out = map[string]*mcp.Tool{}
		}
		out[t.Name] = &t
	}
	return out
}

// describeProtocol says a protocol version and how it is spoken, for people:
// "2026-07-28 (stateless)", "2025-11-25 (session)".
func describeProtocol(version string) string {
	switch {
	case version == "":
		return ""
	case mcp.IsModernProtocol(version):
		return version + " (stateless)"
	}
	return version + " (session)"
}

// modernLocal answers the legacy requests the modern era has no method for, so
// that the gateway's routes need not know a child's era: logging/setLevel sets
// the level later requests carry in _meta, resources/subscribe and
// resources/unsubscribe change the listen stream, ping asks server/discover.
// ok is false for every other method, which goes to the child.
func (cn *conn) modernLocal(ctx context.Context, method string, params any) (raw json.RawMessage, ok bool, err error) {
	var p struct {
		Level string `json:"level"`
		URI   string `json:"uri"`
	}
	decode := func() error {
		b, err := json.Marshal(params)
		if err == nil {
			err = json.Unmarshal(b, &p)
		}
		if err != nil {
			return &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("the params of %s: %v", method, err)}
		}
		return nil
	}
	empty := json.RawMessage(`{}`)
	switch mcp.MCPMethod(method) {
	case mcp.MethodSetLogLevel:
		if err := decode(); err != nil {
			return nil, true, err
		}
		cn.levelMu.Lock()
		cn.sharedLevel = p.Level
		cn.levelMu.Unlock()
		return empty, true, nil
	case mcp.MethodResourcesSubscribe, mcp.MethodResourcesUnsubscribe:
		if err := decode(); err != nil {
			return nil, true, err
		}
		if mcp.MCPMethod(method) == mcp.MethodResourcesSubscribe {
			err = cn.listen.Subscribe(ctx, p.URI)
		} else {
			cn.listen.Unsubscribe(p.URI)
		}
		if err != nil {
			return nil, true, err
		}
		return empty, true, nil
	case mcp.MethodPing:
		if _, err := cn.requestID(ctx, cn.NextID(), string(mcp.MethodServerDiscover), map[string]any{}, outgoing{}); err != nil {
			return nil, true, err
		}
		return empty, true, nil
	}
	return nil, false, nil
}

// knownCaps are the capabilities the child declared: its live connection's, or
// the ones last found while it is down. ok is false before it ever answered.
func (c *child) knownCaps() (caps mcp.ServerCapabilities, ok bool) {
	c.mu.Lock()
	cn := c.conn
	c.mu.Unlock()
	if cn != nil {
		return cn.Caps, true
	}
	if e := c.eras.get(eraKey(c.config())); e != nil {
		return e.Caps, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.said != nil { // an idle server: what it said last run
		return c.said.Capabilities, true
	}
	return caps, false
}
