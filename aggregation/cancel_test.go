package aggregation

import (
	"strings"
	"testing"
)

// TestLegacyCancelGetsNoAnswer: a request the stdio client of an initialized
// session cancels is answered with nothing at all, as the specification says,
// even once its child call has ended.
func TestLegacyCancelGetsNoAnswer(t *testing.T) {
	f := newFixture(t)
	c := stdioClient(t, f.g, "tester")
	c.initialize("test")
	c.post([]byte(`{"jsonrpc":"2.0","id":"slow-1","method":"tools/call","params":{"name":"good__wait","arguments":{}}}`))
	waitFor(t, "the child to be in the call", func() bool {
		cn, _ := f.g.kids()["good"].current()
		_, n := cn.callers.only()
		return n == 1
	})
	c.notify("notifications/cancelled", map[string]any{"requestId": "slow-1"})
	waitFor(t, "the call to end at the child", func() bool {
		cn, _ := f.g.kids()["good"].current()
		_, n := cn.callers.only()
		return n == 0
	})
	// A request after it is answered: whatever the cancelled one would have
	// sent is out by now.
	if m := c.request("tools/list", nil); m.Error != nil {
		t.Fatal(m.Error)
	}
	if strings.Contains(c.received(), `"id":"slow-1"`) {
		t.Errorf("the cancelled request was answered:\n%s", c.received())
	}
}
