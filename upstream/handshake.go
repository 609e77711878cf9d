package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/oauth"
)

// Era is what a server's opening exchange found: the protocol version it
// speaks and what it said of itself.
type Era struct {
	Version      string
	Caps         mcp.ServerCapabilities
	Instructions string
}

// Modern reports the stateless era (2026-07-28 and later).
func (e Era) Modern() bool { return mcp.IsModernProtocol(e.Version) }

// SetVersion records the protocol version a connection's requests carry: an
// HTTP transport sends it as MCP-Protocol-Version and, on a modern version,
// leaves out the session header and the GET stream. A Process carries none.
func SetVersion(tr Transport, v string) {
	if h, ok := tr.MCP().(transport.HTTPConnection); ok {
		h.SetProtocolVersion(v)
	}
}

// Initialize performs the legacy handshake at version: initialize, then
// notifications/initialized, sent by mcp-go's client as client, declaring
// caps. It is the one exchange that client makes; every request after it is
// Nexus's own. mcp-go's client checks the version the server chose, and sets
// an HTTP transport's protocol header to it.
func Initialize(ctx context.Context, tr Transport, version string, as mcp.Implementation, caps mcp.ClientCapabilities) (Era, error) {
	SetVersion(tr, "") // the handshake negotiates it
	cl := client.NewClient(tr.MCP(), client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION), client.WithClientCapabilities(caps))
	res, err := cl.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: version, ClientInfo: as}})
	if err != nil {
		return Era{}, err
	}
	return Era{Version: res.ProtocolVersion, Caps: res.Capabilities, Instructions: res.Instructions}, nil
}

// NotModernError says a server answered a modern request as a legacy server
// does.
type NotModernError struct{ Why error }

func (e *NotModernError) Error() string { return "not a modern server: " + e.Why.Error() }
func (e *NotModernError) Unwrap() error { return e.Why }

// Discover sends server/discover at m.Version, as server name, within bound
// when it is not zero; id gives each request its id. A server that answers is
// modern, and its Era is returned, the transport left speaking it. One that
// refuses the version but names a modern one it supports is asked again at
// that version. The error is a *NotModernError when the answer is a legacy
// server's, transport.ErrTransportClosed when the connection ended, an
// *oauth.LoginError when the server wants a login; the transport is then left
// speaking no version.
func Discover(ctx context.Context, tr Transport, name string, m ModernMeta, bound time.Duration, id func() json.RawMessage) (Era, error) {
	pctx := ctx
	if bound > 0 {
		var cancel context.CancelFunc
		pctx, cancel = context.WithTimeout(ctx, bound)
		defer cancel()
	}
	for range 2 {
		SetVersion(tr, m.Version)
		resp, err := sendDiscover(pctx, tr, m, id())
		if err != nil {
			SetVersion(tr, "")
			switch {
			case ctx.Err() != nil:
				return Era{}, context.Cause(ctx)
			case pctx.Err() != nil:
				return Era{}, &NotModernError{Why: fmt.Errorf("no answer to server/discover within %s", bound)}
			case errors.Is(err, transport.ErrTransportClosed):
				return Era{}, err
			}
			if le := (*oauth.LoginError)(nil); errors.As(err, &le) {
				return Era{}, le
			}
			return Era{}, &NotModernError{Why: err}
		}
		if resp.Error == nil {
			var res mcp.DiscoverResult
			if err := json.Unmarshal(resp.Result, &res); err != nil {
				SetVersion(tr, "")
				return Era{}, &NotModernError{Why: fmt.Errorf("its server/discover result does not decode: %w", err)}
			}
			return Era{Version: m.Version, Caps: res.Capabilities, Instructions: res.Instructions}, nil
		}
		SetVersion(tr, "")
		rpcErr := resp.Error
		switch rpcErr.Code {
		case mcp.UNSUPPORTED_PROTOCOL_VERSION:
			supported := namedVersions(rpcErr.Data)
			pick := mcp.NegotiateMutuallySupportedVersion(supported)
			switch {
			case pick == "":
				return Era{}, fmt.Errorf("%s supports protocol versions %v, none of which Nexus speaks: %w", name, supported, rpcErr)
			case !mcp.IsModernProtocol(pick):
				return Era{}, &NotModernError{Why: rpcErr}
			case pick == m.Version:
				return Era{}, fmt.Errorf("%s refused protocol %s, which it says it supports: %w", name, m.Version, rpcErr)
			}
			m.Version = pick
			continue
		case mcp.HEADER_MISMATCH, mcp.MISSING_REQUIRED_CLIENT_CAPABILITY:
			return Era{}, fmt.Errorf("%s refused server/discover: %w", name, rpcErr) // a modern server's refusal
		}
		return Era{}, &NotModernError{Why: rpcErr}
	}
	return Era{}, fmt.Errorf("%s kept refusing the protocol versions it named", name)
}

// sendDiscover sends one server/discover, written as the era m speaks wants.
func sendDiscover(ctx context.Context, tr Transport, m ModernMeta, id json.RawMessage) (*jsonrpc.Message, error) {
	method := string(mcp.MethodServerDiscover)
	params, err := ModernParams(map[string]any{}, m)
	if err != nil {
		return nil, err
	}
	return tr.Send(ctx, Request{ID: id, Method: method, Params: params, Header: StandardHeaders(m.Version, method, params, nil)}, nil)
}

// namedVersions reads the versions an UnsupportedProtocolVersionError names.
func namedVersions(data any) []string {
	var d struct {
		Supported []string `json:"supported"`
	}
	if raw, err := json.Marshal(data); err == nil {
		_ = json.Unmarshal(raw, &d)
	}
	return d.Supported
}
