package memory_test

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/nexus-mcp/nexus/memory"
	. "github.com/nexus-mcp/nexus/memory/memorytest"
)

// TestCallMetaIsPartOfTheKey: a call whose _meta (as the child gets it) differs
// is another call, since a child may answer from it; trace context and a
// client's tool-use id alone do not make another call.
func TestCallMetaIsPartOfTheKey(t *testing.T) {
	const args = `{"q":"who"}`
	tests := []struct {
		name          string
		first, second string
		want          string
	}{
		{"another user", `{"user":"alice"}`, `{"user":"bob"}`, StatusMiss},
		{"the same user", `{"user":"alice"}`, `{ "user" : "alice" }`, StatusHit},
		{"_meta against none", `{"user":"alice"}`, ``, StatusMiss},
		{"none against _meta", ``, `{"user":"bob"}`, StatusMiss},
		{"a number spelt otherwise", `{"n":1.0}`, `{"n":1}`, StatusMiss},
		{"trace context only", `{"traceparent":"00-aa-01-01"}`, `{"traceparent":"00-bb-02-01","tracestate":"x=1"}`, StatusHit},
		{"a tool-use id beside the same user", `{"user":"alice","claudecode/toolUseId":"toolu_1"}`, `{"user":"alice","claudecode/toolUseId":"toolu_2"}`, StatusHit},
		{"a tool-use id beside another user", `{"user":"alice","claudecode/toolUseId":"toolu_1"}`, `{"user":"bob","claudecode/toolUseId":"toolu_1"}`, StatusMiss},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := openTest(t, Options{})
			c := &Child{}
			call := func(agent, meta string) json.RawMessage {
				t.Helper()
				q := m.QueryWithMeta(agent, ReadTool(), json.RawMessage(args), json.RawMessage(meta))
				res, ok := q.Hit(context.Background())
				if ok {
					return res
				}
				res, err := q.Call(context.Background(), c.Forward(json.RawMessage(args)))
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			call("alice", tc.first)
			if got := Status(t, call("bob", tc.second)); got != tc.want {
				t.Errorf("the second call: %q, want %q", got, tc.want)
			}
		})
	}
}
