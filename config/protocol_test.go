package config

import (
	"strings"
	"testing"
)

// TestProtocolVersionValidated: servers.X.protocolVersion takes the versions
// Nexus speaks, and an error names them all.
func TestProtocolVersionValidated(t *testing.T) {
	for _, v := range ProtocolVersions {
		if _, err := Parse("test.json", []byte(`{"servers": {"a": {"command": "x", "protocolVersion": "`+v+`"}}}`)); err != nil {
			t.Errorf("%s refused: %v", v, err)
		}
	}
	_, err := Parse("test.json", []byte(`{"servers": {"a": {"command": "x", "protocolVersion": "2099-01-01"}}}`))
	if err == nil || !strings.Contains(err.Error(), strings.Join(ProtocolVersions, ", ")) {
		t.Errorf("an unknown version: %v, want an error naming %v", err, ProtocolVersions)
	}
	_, err = Parse("test.json", []byte(`{"servers": {"a": {"transport": "sse", "url": "http://127.0.0.1/sse", "protocolVersion": "2026-07-28"}}}`))
	if err == nil || !strings.Contains(err.Error(), "sse") {
		t.Errorf("the modern version over sse: %v, want an error", err)
	}
}
