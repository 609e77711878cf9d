package aggregation

import (
	"strings"
	"testing"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
)

// TestStdioAgentIsPinned: without --agent, a stdio connection speaks as the first
// agent its client names, at initialize or in a 2026-07-28 request's clientInfo;
// a request that names another is refused, and says that per-agent policy on
// stdio needs --agent. With --agent, clientInfo names nobody.
func TestStdioAgentIsPinned(t *testing.T) {
	f := newFixture(t)
	as := func(name string) map[string]any {
		m := modernMeta(nil)
		m[metaClientInfo] = map[string]any{"name": name, "version": "1"}
		return withMeta(map[string]any{}, m)
	}
	type step struct {
		initialize string // a legacy initialize with this client name, else a modern tools/list
		name       string
		refused    bool
	}
	tests := []struct {
		name   string
		preset string
		steps  []step
	}{
		{"initialized as bob, then a request as alice", "", []step{{initialize: "bob"}, {name: "alice", refused: true}, {name: "bob"}}},
		{"a request as alice, then as bob", "", []step{{name: "alice"}, {name: "bob", refused: true}, {name: "alice"}}},
		{"--agent", "tester", []step{{initialize: "bob"}, {name: "alice"}, {name: "bob"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := stdioClient(t, f.g, tc.preset)
			for i, st := range tc.steps {
				if st.initialize != "" {
					c.initialize(st.initialize)
					continue
				}
				m := c.request("tools/list", as(st.name))
				switch {
				case st.refused && (m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidRequest ||
					!strings.Contains(m.Error.Message, "a request as "+st.name+" is refused") || !strings.Contains(m.Error.Message, "--agent")):
					t.Errorf("step %d, as %s: %+v, want a refusal that names --agent", i, st.name, m.Error)
				case !st.refused && m.Error != nil:
					t.Errorf("step %d, as %s: %+v, want it served", i, st.name, m.Error)
				}
			}
		})
	}
}
