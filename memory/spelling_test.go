package memory_test

import (
	"testing"

	. "github.com/nexus-mcp/nexus/memory"
	. "github.com/nexus-mcp/nexus/memory/memorytest"
)

// TestNumberSpellingsAreTwoCalls: a call whose number is spelt otherwise is
// another call, never answered with the first one's answer: a Python child
// reads 1.0 as a float and 1 as an int.
func TestNumberSpellingsAreTwoCalls(t *testing.T) {
	tests := []struct{ first, second string }{
		{`{"n":1.0}`, `{"n":1}`},
		{`{"n":1e2}`, `{"n":100}`},
		{`{"n":-0}`, `{"n":0}`},
	}
	for _, tc := range tests {
		t.Run(tc.first+" "+tc.second, func(t *testing.T) {
			m := openTest(t, Options{})
			c := &Child{}
			Do(t, m, "alice", ReadTool(), tc.first, c)
			if got := Status(t, Do(t, m, "bob", ReadTool(), tc.second, c)); got != StatusMiss {
				t.Errorf("the second spelling: %q, want a miss", got)
			}
			if got := Status(t, Do(t, m, "bob", ReadTool(), tc.first, c)); got != StatusHit {
				t.Errorf("the first spelling again: %q, want a hit", got)
			}
			if n := c.Calls.Load(); n != 2 {
				t.Errorf("the child got %d calls, want 2", n)
			}
		})
	}
}
