package memory_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/nexus-mcp/nexus/memory"
	. "github.com/nexus-mcp/nexus/memory/memorytest"
)

// TestRewording: a similarity hit is not served to the caller that stored
// the entry within the window (its session by default, its agent when
// configured), and is served to anyone else, and to the caller after it.
func TestRewording(t *testing.T) {
	const stored, reworded = "postgres connection pool settings", "show me the postgres connection pool settings"
	for _, tc := range []struct {
		name           string
		rw             Rewording
		agent, session string
		after          time.Duration
		want           string
	}{
		{"same session", Rewording{}, "alice", "s1", 0, StatusMiss},
		{"same session, after the window", Rewording{}, "alice", "s1", DefaultRewordingWindow, StatusSemanticHit},
		{"same session, shorter window", Rewording{Window: time.Minute}, "alice", "s1", 2 * time.Minute, StatusSemanticHit},
		{"another session of the agent", Rewording{}, "alice", "s2", 0, StatusSemanticHit},
		{"another agent", Rewording{}, "bob", "s3", 0, StatusSemanticHit},
		{"agent scope, another session", Rewording{Scope: RewordingAgent}, "alice", "s2", 0, StatusMiss},
		{"agent scope, another agent", Rewording{Scope: RewordingAgent}, "bob", "s3", 0, StatusSemanticHit},
		{"no session", Rewording{}, "alice", "", 0, StatusSemanticHit},
		{"agent scope, no session", Rewording{Scope: RewordingAgent}, "alice", "", 0, StatusMiss},
		{"off", Rewording{Scope: RewordingOff}, "alice", "s1", 0, StatusSemanticHit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := NewClock()
			m := openTest(t, Options{Now: clk.Now})
			m.SetSettings(Settings{TTL: map[string]TTL{"*": {Never: true}}, Rewording: tc.rw})
			c := &Child{}
			call := func(agent, session, query string) string {
				t.Helper()
				args := json.RawMessage(SearchArgs(query, 10))
				res, err := m.Query(agent, SearchTool(), args).Session(session).Call(context.Background(), c.Forward(args))
				if err != nil {
					t.Fatal(err)
				}
				return Status(t, res)
			}
			if s := call("alice", "s1", stored); s != StatusMiss {
				t.Fatalf("first call: %s", s)
			}
			if err := m.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			clk.Advance(tc.after)
			before := c.Calls.Load()
			got := call(tc.agent, tc.session, reworded)
			if got != tc.want {
				t.Fatalf("reworded by %s/%s after %v: %s, want %s", tc.agent, tc.session, tc.after, got, tc.want)
			}
			if forwarded := c.Calls.Load() > before; forwarded != (tc.want == StatusMiss) {
				t.Fatalf("forwarded %v with status %s", forwarded, got)
			}
		})
	}
}
