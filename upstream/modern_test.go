package upstream

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestModernParamsKeepTheCallersMeta: the _meta a modern request carries is the
// caller's (a progress token) with the protocol version, identity,
// capabilities and log level merged in, whether the params are a map or raw
// JSON; params that cannot carry a _meta are refused.
func TestModernParamsKeepTheCallersMeta(t *testing.T) {
	m := ModernMeta{Version: "2026-07-28", Client: mcp.Implementation{Name: "nexus", Version: "1.2.3"},
		Capabilities: mcp.ClientCapabilities{Sampling: &mcp.SamplingCapability{}}, LogLevel: "debug"}
	for _, params := range []any{
		json.RawMessage(`{"name":"echo","arguments":{"text":"hi"},"_meta":{"progressToken":7}}`),
		map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}, "_meta": map[string]any{"progressToken": 7}},
	} {
		raw, err := ModernParams(params, m)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Name string         `json:"name"`
			Meta map[string]any `json:"_meta"`
		}
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{
			"progressToken": float64(7),
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "nexus", "version": "1.2.3"},
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"sampling": map[string]any{}},
			"io.modelcontextprotocol/logLevel":           "debug",
		}
		if got.Name != "echo" || !reflect.DeepEqual(got.Meta, want) {
			t.Errorf("%T params became %s", params, raw)
		}
	}
	if raw, err := ModernParams(nil, m); err != nil || !strings.Contains(string(raw), `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`) {
		t.Errorf("no params became %s, %v", raw, err)
	}
	m.Extensions, m.LogLevel = []string{"io.example/tasks"}, ""
	raw, err := ModernParams(json.RawMessage(`{}`), m)
	if err != nil || !strings.Contains(string(raw), `"extensions":{"io.example/tasks":{}}`) || strings.Contains(string(raw), "logLevel") {
		t.Errorf("an extension for this request, no level: %s, %v", raw, err)
	}
	if m.Capabilities.Extensions != nil {
		t.Error("declaring an extension for one request changed the capabilities given")
	}
	for _, bad := range []string{`[1]`, `{"_meta":"x"}`} {
		if raw, err := ModernParams(json.RawMessage(bad), m); err == nil {
			t.Errorf("params %s became %s, want an error", bad, raw)
		}
	}
}

// TestStandardHeaders: a modern request's headers name its version, method and
// tool, and mirror the arguments the tool's schema says to.
func TestStandardHeaders(t *testing.T) {
	region := mcp.NewToolWithRawSchema("region", "", json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`))
	tool := func(name string) *mcp.Tool {
		if name == "region" {
			return &region
		}
		return nil
	}
	h := StandardHeaders("2026-07-28", "tools/call", json.RawMessage(`{"name":"region","arguments":{"region":"eu-west"}}`), tool)
	for k, want := range map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "region", "Mcp-Param-Region": "eu-west"} {
		if got := h.Get(k); got != want {
			t.Errorf("%s: %q, want %q (all: %v)", k, got, want, h)
		}
	}
	h = StandardHeaders("2026-07-28", "tools/call", json.RawMessage(`{"name":"echo","arguments":{"region":"eu-west"}}`), tool)
	if h.Get("Mcp-Param-Region") != "" {
		t.Errorf("a tool that mirrors nothing got %v", h)
	}
}
