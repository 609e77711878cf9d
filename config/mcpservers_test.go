package config

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestClientEntry pins the one conversion both a config's "mcpServers" section and
// `nexus import` use: the same entry becomes the same server either way.
func TestClientEntry(t *testing.T) {
	tests := []struct {
		name, entry   string
		wantTransport string
		wantUnknown   []string
		wantErr       bool
	}{
		{"stdio by default", `{"command": "x"}`, TransportStdio, nil, false},
		{"url means http", `{"url": "http://h/mcp"}`, TransportStreamableHTTP, nil, false},
		{"sse", `{"type": "sse", "url": "http://h/sse"}`, TransportSSE, nil, false},
		{"http alias", `{"type": "streamable_http", "url": "http://h/mcp"}`, TransportStreamableHTTP, nil, false},
		{"type is case-blind", `{"type": "STDIO", "command": "x"}`, TransportStdio, nil, false},
		{"timeout kept", `{"command": "x", "timeout": "5s"}`, TransportStdio, nil, false},
		{"unknown keys listed", `{"command": "x", "autoApprove": [], "alwaysAllow": []}`, TransportStdio, []string{"alwaysAllow", "autoApprove"}, false},
		{"unknown type", `{"type": "websocket", "url": "ws://h"}`, "", nil, true},
		{"type not a string", `{"type": 3, "command": "x"}`, "", nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var entry map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tc.entry), &entry); err != nil {
				t.Fatal(err)
			}
			out, unknown, err := ClientEntry(entry)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if !slices.Equal(unknown, tc.wantUnknown) {
				t.Errorf("unknown = %v, want %v", unknown, tc.wantUnknown)
			}
			if tc.wantErr {
				return
			}
			var s Server
			one, _ := json.Marshal(out)
			if err := DecodeStrict(one, &s); err != nil {
				t.Fatalf("converted entry is not a server entry: %v", err)
			}
			if s.Transport != tc.wantTransport {
				t.Errorf("transport = %q, want %q", s.Transport, tc.wantTransport)
			}
			if _, had := entry["timeout"]; had && s.Timeout.IsZero() {
				t.Error("timeout dropped")
			}
		})
	}
}

// TestMCPServersSectionUsesTheConversion: the same unknown type a client file is
// refused for is an error in a config's mcpServers section, not ignored.
func TestMCPServersSectionUsesTheConversion(t *testing.T) {
	_, err := Parse("f.json", []byte(`{"mcpServers": {"a": {"type": "websocket", "url": "ws://h"}}}`))
	if err == nil {
		t.Fatal("an unknown type was accepted")
	}
	cfg, err := Parse("f.json", []byte(`{"mcpServers": {"a": {"command": "x", "timeout": "7s"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Servers["a"].Timeout.D.String(); got != "7s" {
		t.Errorf("timeout = %s, want 7s", got)
	}
}
