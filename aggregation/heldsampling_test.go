package aggregation

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
)

// TestHeldSamplingStarvesNoOne: on a shared stdio child, one client that never
// answers the sampling request of its call (alice) holds up no other client (bob)
// past limits.childRequestTurn, however often it calls again, and its own call ends
// with an error that names the bound that fired, which the gateway logs. (A stdio
// child's request does not say which call it belongs to, so it used to be refused
// while calls of two clients were in flight: one client holding its request kept
// every other's sampling refused until its call timed out, and called again.)
func TestHeldSamplingStarvesNoOne(t *testing.T) {
	t.Parallel()
	sample := map[string]any{"name": "good__sample", "arguments": map[string]any{}}
	tests := []struct {
		name   string
		front  string
		limits string
		bob    int    // calls bob makes while alice holds (0: alice is alone)
		again  bool   // alice calls again as soon as each call of hers ends
		alice  string // in the error alice's call ends with
	}{
		{"another client samples while one holds", frontHTTP, `{"childRequestTurn": "200ms"}`, 1, false, "limits.childRequestTurn"},
		{"another stdio client samples while one holds", frontStdio, `{"childRequestTurn": "200ms"}`, 1, false, "limits.childRequestTurn"},
		{"the holder calls again and again", frontHTTP, `{"childRequestTurn": "500ms"}`, 3, true, "limits.childRequestTurn"},
		{"a holder alone is bounded too", frontHTTP, `{"childRequestTimeout": "300ms"}`, 0, false, "within 300ms (limits.childRequestTimeout)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixtureLimits(t, tc.limits)
			alice, bob := f.client(tc.front, "other"), f.client(tc.front, "tester")
			asked, hold := make(chan struct{}, 16), make(chan struct{})
			t.Cleanup(func() { close(hold) })
			alice.answer = func(string, json.RawMessage) (any, *RPCError) {
				asked <- struct{}{}
				<-hold // alice's client never answers while the test runs
				return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: "too late"}
			}
			bob.answer = answersEverything
			var mu sync.Mutex
			var aliceGot []string
			stop, quit := make(chan struct{}), make(chan struct{})
			aliceDone := make(chan struct{})
			t.Cleanup(func() { close(quit); <-aliceDone })
			go func() {
				defer close(aliceDone)
				for {
					m, ok := alice.requestUnless("tools/call", sample, quit)
					if !ok {
						return
					}
					mu.Lock()
					aliceGot = append(aliceGot, string(m.Result)+fmt.Sprint(m.Error))
					mu.Unlock()
					select {
					case <-stop:
						return
					default:
					}
					if !tc.again {
						return
					}
				}
			}()
			<-asked // alice's call holds its sampling request
			for i := range tc.bob {
				start := time.Now()
				m := bob.requestWithin("tools/call", sample, time.Minute)
				took := time.Since(start)
				if m.Error != nil || !strings.Contains(string(m.Result), modelOutput) {
					t.Errorf("bob's call %d: %s %v, want his model's answer", i, m.Result, m.Error)
				}
				if took > 10*time.Second { // the call's timeout is 60s, a request's 10 minutes
					t.Errorf("bob's call %d took %s", i, took)
				}
				if tc.again {
					<-asked // alice holds again
				}
			}
			close(stop)
			if tc.again { // alice's latest call holds until bob's next takes its turn
				bob.requestWithin("tools/call", sample, time.Minute)
			}
			select {
			case <-aliceDone:
			case <-time.After(15 * time.Second): // its call's timeout is 60s
				t.Fatal("alice's call did not end")
			}
			mu.Lock()
			got := append([]string{}, aliceGot...)
			mu.Unlock()
			if len(got) < max(tc.bob, 1) {
				t.Fatalf("alice's calls ended %d times, want %d", len(got), max(tc.bob, 1))
			}
			for i, g := range got {
				if !strings.Contains(g, "Nexus withdrew sampling/createMessage") || !strings.Contains(g, tc.alice) {
					t.Errorf("alice's call %d ended with %s, want an error that says Nexus withdrew her request and names %s", i, g, tc.alice)
				}
			}
			if lines := f.logs.lines("withdrawn"); len(lines) == 0 || !strings.Contains(strings.Join(lines, "\n"), "server=good") {
				t.Errorf("the withdrawal was not logged: %q", lines)
			}
		})
	}
}

// requestUnless is request, given up (false) when quit is closed first.
func (c *testClient) requestUnless(method string, params any, quit <-chan struct{}) (wireMsg, bool) {
	select {
	case m := <-sendAsync(c, method, params):
		return m, true
	case <-quit:
		return wireMsg{}, false
	}
}

// TestSamplingAtOnceOnASharedChild: two clients that answer at once, calling a
// sampling tool of a shared stdio child at the same moment, do not wait on each
// other past the bounds: each round, at least one call gets its client's answer,
// and a refused one says why, within a few turns (limits.childRequestTurn).
func TestSamplingAtOnceOnASharedChild(t *testing.T) {
	t.Parallel()
	f := newFixtureLimits(t, `{"childRequestTurn": "200ms"}`)
	clients := []*testClient{f.client(frontHTTP, "other"), f.client(frontHTTP, "tester")}
	for _, c := range clients {
		c.answer = answersEverything
	}
	sample := map[string]any{"name": "good__sample", "arguments": map[string]any{}}
	for round := range 3 {
		got := make([]string, len(clients))
		var wg sync.WaitGroup
		start := time.Now()
		for i, c := range clients {
			wg.Go(func() {
				m := c.requestWithin("tools/call", sample, time.Minute)
				got[i] = string(m.Result) + fmt.Sprint(m.Error)
			})
		}
		wg.Wait()
		t.Logf("round %d after %s: %q", round, time.Since(start).Round(time.Millisecond), got)
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("round %d took %s", round, took)
		}
		answered := 0
		for i, g := range got {
			switch {
			case strings.Contains(g, modelOutput):
				answered++
			case !strings.Contains(g, "limits.childRequestTurn"):
				t.Errorf("round %d, client %d: %s, want its model's answer or a refusal naming limits.childRequestTurn", round, i, g)
			}
		}
		if answered == 0 {
			t.Errorf("round %d: no call got its client's answer: %q", round, got)
		}
	}
}

// TestHeldRequestEndsWithItsCall: a stdio child's request that a client holds is
// withdrawn when the call it was sent for ends (here, cancelled by the client): it
// no longer takes one of the child's places for limits.childRequestTimeout, the
// client is told, and the gateway logs it, as information: a server that asks on
// a timer sees it happen to calls that went well.
func TestHeldRequestEndsWithItsCall(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := stdioClient(t, f.g, "other")
	c.initialize("test-alice")
	asked, hold := make(chan struct{}, 1), make(chan struct{})
	t.Cleanup(func() { close(hold) })
	c.answer = func(string, json.RawMessage) (any, *RPCError) {
		asked <- struct{}{}
		<-hold
		return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: "too late"}
	}
	c.post([]byte(`{"jsonrpc":"2.0","id":"held-1","method":"tools/call","params":{"name":"good__sample","arguments":{}}}`))
	<-asked
	c.notify("notifications/cancelled", map[string]any{"requestId": "held-1"})
	waitFor(t, "the withdrawal to be logged", func() bool {
		return len(f.logs.lines("the call it belongs to ended on server good")) > 0
	})
	// The call ended before its client answered: nothing is wrong with the
	// client, and the line is no warning.
	if lines := f.logs.lines("the call it belongs to ended on server good"); !strings.Contains(lines[0], "level=INFO") {
		t.Errorf("the withdrawal of a request whose call ended is logged as %s, want level INFO", lines[0])
	}
	if !c.waitNote("notifications/cancelled", nil) {
		t.Errorf("the client was not told the request was withdrawn:\n%s", c.received())
	}
	cn, _ := f.g.kids()["good"].current()
	cn.holds.mu.Lock()
	n := len(cn.holds.m)
	cn.holds.mu.Unlock()
	if n != 0 {
		t.Errorf("%d requests still held", n)
	}
}
