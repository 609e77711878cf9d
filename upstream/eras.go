package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/config"
)

// This file chooses the era a server is spoken. A server speaks either the
// modern, stateless protocol (2026-07-28 and later: no initialize, every
// request carries its version, identity and capabilities in _meta) or a
// legacy one (2025-11-25 and earlier: an initialize handshake fixes them for
// the session).
//
// Unless servers.X.protocolVersion says which, initialize is offered first
// and server/discover asked only of a server that refuses it. A dual-era
// server is thus spoken the legacy era, on purpose: today's SDKs (mcp-go, the
// official Go SDK, the TypeScript SDK v2) refuse their own requests to the
// client (sampling, elicitation, roots) on a 2026-07-28 connection, and a
// legacy session costs no _meta per request. Modern clients lose nothing by
// it: the gateway bridges a legacy server's requests into their
// input_required rounds. A server that speaks only the modern era refuses
// initialize and is spoken that. The era found is remembered (Eras), so
// restarts and the connections of client sessions do not ask again; a
// remembered era that fails is forgotten and the next attempt starts over.

// Why an era was chosen, as list-servers --live, doctor and the status page
// say it.
const (
	EraPinned     = "pinned by servers.%s.protocolVersion"
	EraSSE        = "HTTP+SSE predates the stateless era"
	EraAnswered   = "it answered initialize: a session keeps its requests to the client (sampling, elicitation, roots)"
	EraModernOnly = "it refused initialize and answered server/discover: it speaks only the stateless era"
)

// DiscoverWait bounds the server/discover probe: a legacy server may answer an
// unknown method before initialize with silence rather than an error.
const DiscoverWait = 5 * time.Second

// Found is an era a handshake found, and why it was chosen, for people.
type Found struct {
	Era
	Why string
}

// Eras remembers the era of a server between its connections, under a key:
// a changed launch or URL is not the same server.
type Eras struct {
	mu  sync.Mutex
	key string
	e   *Found
}

// Get is the era remembered under key, or nil.
func (m *Eras) Get(key string) *Found {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.e == nil || m.key != key {
		return nil
	}
	e := *m.e
	return &e
}

func (m *Eras) put(key string, e Found) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.key, m.e = key, &e
}

func (m *Eras) forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.key == key {
		m.e = nil
	}
}

// ErrEraFound is a handshake's end when the era was found on a connection
// that cannot speak it (mcp-go's HTTP transport, which took a refused
// initialize for a session): a fresh connection speaks the era now
// remembered.
var ErrEraFound = errors.New("the era was found on a connection that cannot speak it")

// A Handshake settles the era of a connection to a configured server and
// performs its opening: initialize for a legacy server, server/discover for a
// modern one.
type Handshake struct {
	Server *config.Server
	// Eras remembers what was found, under Key.
	Eras *Eras
	Key  string
	// Reuse takes a remembered modern era without asking the server again:
	// for the connection of one client session, which the server's own
	// connection has just asked.
	Reuse bool
	// ProbeWait bounds server/discover asked of a server that may stay silent
	// (DiscoverWait).
	ProbeWait time.Duration
	Log       *slog.Logger
}

// Open settles c's era and performs its opening exchange; c adopts the era.
// Who Nexus says it is and what it declares are c's (Info, Declared).
func (h *Handshake) Open(ctx context.Context, c *Conn) error {
	cfg := h.Server
	pinned := cfg.ProtocolVersion
	switch {
	case cfg.Transport == config.TransportSSE:
		return h.initialize(ctx, c, cfg.Protocol(), EraSSE)
	case pinned != "" && !mcp.IsModernProtocol(pinned):
		if err := h.initialize(ctx, c, pinned, fmt.Sprintf(EraPinned, cfg.Name)); err != nil {
			return fmt.Errorf("%w (servers.%s.protocolVersion is %s, which allows no other; a server that speaks only %s needs it removed or set to that)",
				err, cfg.Name, pinned, mcp.LATEST_PROTOCOL_VERSION)
		}
		return nil
	case pinned != "":
		err := h.discover(ctx, c, pinned, fmt.Sprintf(EraPinned, cfg.Name))
		if nm := (*NotModernError)(nil); errors.As(err, &nm) {
			return fmt.Errorf("%s does not speak protocol %s, which servers.%s.protocolVersion requires: %w; remove the setting to let Nexus find the server's era, or set a version up to %s",
				cfg.Name, pinned, cfg.Name, nm.Why, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
		}
		return err
	}
	e := h.Eras.Get(h.Key)
	switch {
	case e == nil:
		return h.find(ctx, c, config.DefaultProtocolVersion, EraAnswered)
	case !e.Modern():
		err := h.find(ctx, c, e.Version, e.Why)
		if err != nil && ctx.Err() == nil {
			h.Eras.forget(h.Key) // it may have changed: the next attempt asks afresh
		}
		return err
	case h.Reuse:
		c.Adopt(e.Era, e.Why)
		return nil
	}
	err := h.discover(ctx, c, e.Version, e.Why)
	if err == nil {
		h.remember(c)
		return nil
	}
	if ctx.Err() == nil {
		h.Eras.forget(h.Key)
	}
	if nm := (*NotModernError)(nil); errors.As(err, &nm) {
		h.Log.Info("the server no longer speaks the stateless protocol: offering initialize", "err", err)
		return h.find(ctx, c, config.DefaultProtocolVersion, EraAnswered)
	}
	return err
}

// find offers initialize at version (chosen for the reason why) and, when
// the server refuses, asks server/discover: a server that answers that speaks
// only the modern era. The era found is remembered.
func (h *Handshake) find(ctx context.Context, c *Conn, version, why string) error {
	err := h.initialize(ctx, c, version, why)
	if err == nil {
		h.remember(c)
		return nil
	}
	if !answered(err) || ctx.Err() != nil {
		return err
	}
	derr := h.discover(ctx, c, mcp.LATEST_PROTOCOL_VERSION, EraModernOnly)
	if derr != nil {
		return fmt.Errorf("%w; asked server/discover instead, it failed too: %v", err, derr)
	}
	h.Log.Debug("the server speaks only the stateless era", "initialize", err)
	h.remember(c)
	if _, isHTTP := c.Transport.MCP().(transport.HTTPConnection); isHTTP {
		// mcp-go's HTTP transport took the refused initialize for a session and
		// opens the legacy GET stream: a fresh connection speaks the era found.
		return ErrEraFound
	}
	return nil
}

// remember keeps the era c adopted.
func (h *Handshake) remember(c *Conn) {
	e, why := c.Era()
	h.Eras.put(h.Key, Found{e, why})
}

// answered reports whether err is the server's own refusal of a request: a
// JSON-RPC error, or an HTTP 4xx to an initialize POST (mcp-go takes that for
// a legacy SSE server; a modern-only server answers so too), as opposed to a
// failure to reach it.
func answered(err error) bool {
	if errors.Is(err, transport.ErrLegacySSEServer) {
		return true
	}
	te := (*transport.Error)(nil)
	return !errors.As(err, &te) && !errors.Is(err, ErrGone) && !errors.Is(err, transport.ErrTransportClosed) &&
		!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled)
}

// initialize performs the legacy handshake at version; why says how that era
// was chosen.
func (h *Handshake) initialize(ctx context.Context, c *Conn, version, why string) error {
	e, err := Initialize(ctx, c.Transport, version, c.Info, c.Declared)
	if err != nil {
		return fmt.Errorf("initializing %s: %w", h.Server.Name, err)
	}
	c.Adopt(e, why)
	return nil
}

// discover sends server/discover at version, within ProbeWait when it is not
// zero (Discover). A server that answers is modern and c takes its era,
// chosen for the reason why. The error is a *NotModernError when the answer
// is a legacy server's.
func (h *Handshake) discover(ctx context.Context, c *Conn, version, why string) error {
	e, err := Discover(ctx, c.Transport, h.Server.Name, c.ModernMeta(version), h.ProbeWait, c.NextID)
	if errors.Is(err, transport.ErrTransportClosed) {
		return ErrGone
	}
	if err != nil {
		return err
	}
	c.Adopt(e, why)
	return nil
}
