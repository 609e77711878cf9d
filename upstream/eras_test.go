package upstream

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/config"
)

// TestHandshake: which era a server is spoken, as the server answers and as
// the config and what was remembered say; what is remembered after.
func TestHandshake(t *testing.T) {
	const (
		discovered = `{"result":{"supportedVersions":["2026-07-28"],"capabilities":{},"serverInfo":{"name":"s","version":"1"}}}`
		notFound   = `{"error":{"code":-32601,"message":"Method not found"}}`
	)
	legacyEra := &Found{Era{Version: "2025-06-18"}, EraAnswered}
	modernEra := &Found{Era{Version: "2026-07-28"}, EraModernOnly}
	tests := []struct {
		name       string
		server     config.Server
		legacy     string   // the version the server answers initialize at; "" refuses it
		answers    []string // to server/discover
		remembered *Found
		reuse      bool
		timeout    time.Duration // of the handshake's context; 0 for none
		sent       string        // the methods sent, in order
		version    string        // the era the connection speaks
		why        string
		kept       string // the version remembered after; "" for none
		err        string // in the error; "" for none
	}{
		{name: "a legacy server", legacy: "2025-11-25",
			sent: "initialize notifications/initialized", version: "2025-11-25", why: EraAnswered, kept: "2025-11-25"},
		{name: "a modern-only server", answers: []string{discovered},
			sent: "initialize server/discover", version: "2026-07-28", why: EraModernOnly, kept: "2026-07-28"},
		{name: "a server that answers neither", answers: []string{notFound},
			sent: "initialize server/discover", err: "asked server/discover instead, it failed too"},
		{name: "remembered legacy", legacy: "2025-06-18", remembered: legacyEra,
			sent: "initialize notifications/initialized", version: "2025-06-18", why: EraAnswered, kept: "2025-06-18"},
		{name: "remembered modern", answers: []string{discovered}, remembered: modernEra,
			sent: "server/discover", version: "2026-07-28", why: EraModernOnly, kept: "2026-07-28"},
		{name: "remembered modern, reused for a client session", remembered: modernEra, reuse: true,
			sent: "", version: "2026-07-28", why: EraModernOnly, kept: "2026-07-28"},
		{name: "remembered modern, legacy now", legacy: "2025-11-25", answers: []string{notFound}, remembered: modernEra,
			sent: "server/discover initialize notifications/initialized", version: "2025-11-25", why: EraAnswered, kept: "2025-11-25"},
		{name: "remembered modern, gone", answers: []string{"closed"}, remembered: modernEra,
			sent: "server/discover", err: ErrGone.Error()},
		{name: "remembered modern, silent until the handshake's time ran out", answers: []string{"silent"}, remembered: modernEra, timeout: 20 * time.Millisecond,
			sent: "server/discover", err: "deadline exceeded", kept: "2026-07-28"},
		{name: "remembered legacy, refused now", answers: []string{notFound}, remembered: legacyEra,
			sent: "initialize server/discover", err: "asked server/discover instead, it failed too"},
		{name: "pinned legacy", server: config.Server{ProtocolVersion: "2025-06-18"}, legacy: "2025-06-18",
			sent: "initialize notifications/initialized", version: "2025-06-18", why: fmt.Sprintf(EraPinned, "kid")},
		{name: "pinned legacy, refused", server: config.Server{ProtocolVersion: "2025-06-18"},
			sent: "initialize", err: "servers.kid.protocolVersion is 2025-06-18, which allows no other"},
		{name: "pinned modern", server: config.Server{ProtocolVersion: "2026-07-28"}, answers: []string{discovered},
			sent: "server/discover", version: "2026-07-28", why: fmt.Sprintf(EraPinned, "kid")},
		{name: "pinned modern, a legacy server", server: config.Server{ProtocolVersion: "2026-07-28"}, answers: []string{notFound},
			sent: "server/discover", err: "kid does not speak protocol 2026-07-28"},
		{name: "HTTP+SSE", server: config.Server{Transport: config.TransportSSE}, legacy: "2025-11-25",
			sent: "initialize notifications/initialized", version: "2025-11-25", why: EraSSE},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.server
			cfg.Name = "kid"
			if cfg.Transport == "" {
				cfg.Transport = config.TransportStdio
			}
			var eras Eras
			if tc.remembered != nil {
				eras.put("key", *tc.remembered)
			}
			srv := &handshaking{answering: answering{answers: tc.answers}, version: tc.legacy, refuse: tc.legacy == ""}
			c := NewConn()
			c.Transport, c.Info = srv, mcp.Implementation{Name: "nexus", Version: "1"}
			h := Handshake{Server: &cfg, Eras: &eras, Key: "key", Reuse: tc.reuse, Log: slog.New(slog.DiscardHandler)}
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			err := h.Open(ctx, c)
			if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Open: %v, want an error saying %q", err, tc.err)
			}
			if got := strings.Join(srv.sent, " "); got != tc.sent {
				t.Errorf("sent %q, want %q", got, tc.sent)
			}
			if e, why := c.Era(); err == nil && (e.Version != tc.version || why != tc.why) {
				t.Errorf("speaks %s (%s), want %s (%s)", e.Version, why, tc.version, tc.why)
			}
			kept := ""
			if e := eras.Get("key"); e != nil {
				kept = e.Version
			}
			if kept != tc.kept {
				t.Errorf("remembered %q, want %q", kept, tc.kept)
			}
		})
	}
}
