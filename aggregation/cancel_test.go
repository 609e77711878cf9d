package aggregation

import (
	"strings"
	"testing"
)

// TestCancelGetsNoAnswer: a request the stdio client cancels is answered with
// nothing at all, as the specification says, even once its child call has
// ended: in an initialized session, and for a 2026-07-28 request whether its
// call runs as a flight or not.
func TestCancelGetsNoAnswer(t *testing.T) {
	const modern = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":`
	for _, tc := range []struct {
		name       string
		initialize bool
		meta       string // the call's _meta member, "" for none
	}{
		{name: "legacy", initialize: true},
		{name: "modern, a flight", meta: modern + `{"sampling":{}}}`}, // sampling declared: the call runs as a flight (mrtr.go)
		{name: "modern, no flight", meta: modern + `{}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			c := stdioClient(t, f.g, "tester")
			var listParams any
			if tc.initialize {
				c.initialize("test")
			} else {
				listParams = withMeta(nil, modernMeta(nil))
			}
			params := `{"name":"good__wait","arguments":{}`
			if tc.meta != "" {
				params += "," + tc.meta
			}
			c.post([]byte(`{"jsonrpc":"2.0","id":"slow-1","method":"tools/call","params":` + params + `}}`))
			inCall := func(want int) func() bool {
				return func() bool {
					cn, _ := f.g.kids()["good"].current()
					_, n := cn.callers.only()
					return n == want
				}
			}
			waitFor(t, "the child to be in the call", inCall(1))
			c.notify("notifications/cancelled", map[string]any{"requestId": "slow-1"})
			waitFor(t, "the call to end at the child", inCall(0))
			// A request after it is answered: whatever the cancelled one
			// would have sent is out by now.
			if m := c.request("tools/list", listParams); m.Error != nil {
				t.Fatal(m.Error)
			}
			if strings.Contains(c.received(), `"id":"slow-1"`) {
				t.Errorf("the cancelled request was answered:\n%s", c.received())
			}
		})
	}
}
