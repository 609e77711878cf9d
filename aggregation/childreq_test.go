package aggregation

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/memory"
)

// modelOutput and secretRoot are what a client answers; a server it may not reach
// must never get them.
const (
	modelOutput = "MODEL-OUTPUT-for-the-caller"
	secretRoot  = "file:///client/secret-root"
)

func answersEverything(method string, _ json.RawMessage) (any, *RPCError) {
	switch method {
	case "sampling/createMessage":
		return map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": modelOutput}, "model": "test"}, nil
	case "roots/list":
		return map[string]any{"roots": []map[string]any{{"uri": secretRoot, "name": "secret"}}}, nil
	}
	return nil, &RPCError{Code: jsonrpc.CodeMethodNotFound, Message: method}
}

// TestChildRequestsNeedAVisibleCall: a child's sampling and roots requests reach a
// client only while one of its session's calls is in flight on that child and only
// when its agent may see the server; else sampling is refused and roots/list gets
// an empty list, and the client is never asked.
func TestChildRequestsNeedAVisibleCall(t *testing.T) {
	t.Parallel()
	denyOther := func(cfg string) string {
		return strings.Replace(cfg, `"other": {"allow": ["*"]}`, `"other": {"allow": ["*"], "deny": ["evil.*"]}`, 1)
	}
	tests := []struct {
		name    string
		front   string
		agent   string
		call    bool                    // a call of the session is in flight on evil
		reload  func(cfg string) string // applied once the call is in flight
		reaches bool
		why     string
	}{
		{"stdio client that may not see the server, no call", frontStdio, "tester", false, nil, false, "no call of a client is in flight"},
		{"stdio client that may see the server, no call", frontStdio, "other", false, nil, false, "no call of a client is in flight"},
		{"call in flight, then the server is denied", frontHTTP, "other", true, denyOther, false, "may not see server evil"},
		{"call in flight on a visible server", frontHTTP, "other", true, nil, true, ""},
		{"stdio call in flight on a visible server", frontStdio, "other", true, nil, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			release, entered := f.evil.holdWaits(1)
			c := f.client(tc.front, tc.agent)
			c.answer = answersEverything
			done := make(chan struct{})
			if tc.call {
				go func() {
					defer close(done)
					c.request("tools/call", map[string]any{"name": "evil__wait", "arguments": map[string]any{}})
				}()
				<-entered
			} else {
				close(done)
			}
			if tc.reload != nil {
				cfg, err := config.Parse("test.json", []byte(tc.reload(f.cfg)))
				if err != nil {
					t.Fatal(err)
				}
				if err := f.g.Reload(cfg); err != nil {
					t.Fatal(err)
				}
			}
			sampled, err := f.evil.ask("sampling/createMessage")
			roots, rootsErr := f.evil.ask("roots/list")
			close(release)
			<-done
			got := sampled + roots
			if reached := strings.Contains(got, modelOutput) && strings.Contains(got, secretRoot); reached != tc.reaches {
				t.Errorf("the client's answers reached the child: %v, want %v (sampling %q %v; roots %q %v)", reached, tc.reaches, sampled, err, roots, rootsErr)
			}
			if tc.reaches {
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("sampling refused with %v, want %q", err, tc.why)
			}
			if rootsErr != nil || strings.Contains(roots, secretRoot) {
				t.Errorf("roots/list without a call: %q %v, want an empty list", roots, rootsErr)
			}
			if seen := c.received(); strings.Contains(seen, "sampling/createMessage") || strings.Contains(seen, `"roots/list"`) {
				t.Errorf("the client was asked: %s", seen)
			}
		})
	}
}

// TestChildRequestFlood: a child sending thousands of sampling requests during one
// call, to a client that never answers, has at most maxChildRequestsPerClient (8)
// of them forwarded, so that the client cannot take every place of the child's
// maxChildRequests (16); the rest are refused at once with an error naming the
// setting. (It used to forward every one, each held up to 10 minutes: 50,000 took
// the gateway from 36 to 583 MB of RSS.)
func TestChildRequestFlood(t *testing.T) {
	const bound, perClient = 16, 8
	for _, tc := range []struct {
		front, server string
		flood         int
	}{
		// The bound is the gateway's, whatever the child's transport; a stdio child
		// can flood at scale (mcp-go's HTTP server sends its requests a few a second).
		{frontHTTP, "good", 5000},
		{frontStdio, "good", 5000},
	} {
		flood := tc.flood
		t.Run(tc.front+"/"+tc.server, func(t *testing.T) {
			f := newFixture(t)
			c := f.client(tc.front, "other")
			hold := make(chan struct{})
			t.Cleanup(func() { close(hold) })
			var asked atomic.Int64
			c.answer = func(method string, params json.RawMessage) (any, *RPCError) {
				asked.Add(1)
				<-hold // the client never answers while the test runs
				return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: "too late"}
			}
			stop := peakHeap()
			m := c.requestWithin("tools/call", map[string]any{"name": tc.server + "__flood", "arguments": map[string]any{"n": flood, "refusals": flood - bound}}, time.Minute)
			heap := stop()
			t.Logf("%d sampling requests: %s; the client was asked %d times; heap in use rose by %d MB at most", flood, m.Result, asked.Load(), heap>>20)
			if m.Error != nil || !strings.Contains(string(m.Result), "refused="+strconv.Itoa(flood-bound)) {
				t.Errorf("the flood: %s %v", m.Result, m.Error)
			}
			if n := asked.Load(); n > perClient {
				t.Errorf("the client was asked %d times, want at most %d", n, perClient)
			}
		})
	}
}

// TestAnswerKeptUnlessItsClientAnsweredFirst: a child's request carries no trace
// of its call, so the calls in flight when a child asks its client something may
// be made of the client's answer, and memory does not keep them. A call the child
// answers before the client answered was not made of it: memory keeps it. (Every
// call in flight was marked as the request arrived: a server that asks for roots a
// moment after it starts, as server-everything does, lost the first answers made
// in that moment.)
func TestAnswerKeptUnlessItsClientAnsweredFirst(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		answeredFirst bool // the client answers the child before the call ends
		want          string
	}{
		{"the client answered during the call", true, memory.StatusMiss},
		{"the call ended first", false, memory.StatusHit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mem := openMemory(t)
			f := newFixtureMemory(t, "{}", mem)
			release, entered := f.evil.holdWaits(1)
			c := f.client(frontStdio, "other")
			asked, callEnded := make(chan struct{}, 1), make(chan struct{})
			c.answer = func(method string, params json.RawMessage) (any, *RPCError) {
				asked <- struct{}{}
				if !tc.answeredFirst {
					<-callEnded
				}
				return answersEverything(method, params)
			}
			call := func() wireMsg {
				return c.request("tools/call", map[string]any{"name": "evil__wait", "arguments": map[string]any{"text": "same"}})
			}
			first := make(chan wireMsg, 1)
			go func() { first <- call() }()
			<-entered
			childHasAnswer := make(chan struct{})
			go func() {
				defer close(childHasAnswer)
				_, _ = f.evil.ask("roots/list")
			}()
			<-asked // the client holds the child's request
			if tc.answeredFirst {
				<-childHasAnswer
			}
			close(release)
			m := <-first
			close(callEnded)
			<-childHasAnswer
			if m.Error != nil || !bytes.Contains(m.Result, []byte("released")) {
				t.Fatalf("the call: %s %v", m.Result, m.Error)
			}
			if st, _, _ := memory.CacheStatus(call().Result); st != tc.want {
				t.Errorf("the same call again: %q, want %q (the child was called %d times)", st, tc.want, f.evil.count("tools/call"))
			}
		})
	}
}
