package aggregation

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nexus-mcp/nexus/config"
)

func TestPassMeta(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{``, ``},
		{`null`, ``},
		{`[1]`, ``},
		{`{}`, ``},
		{`{"progressToken":"p"}`, ``},
		{`{"nexus/cache":"bypass"}`, ``},
		{`{"trace/id":"t","progressToken":7}`, `{"trace/id":"t"}`},
		{"{\n \"b\": [1, 2],\n \"a\": {\"x\": 1.50}\n}", `{"a":{"x":1.50},"b":[1,2]}`},
		{`{"nexusish":1,"nexus/x":2}`, `{"nexusish":1}`},
	} {
		if got := string(passMeta(json.RawMessage(tc.in))); got != tc.want {
			t.Errorf("passMeta(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestForwardParams(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`{"uri":"a://b"}`, `{"uri":"a://b"}`},
		{`{"uri":"a://b","_meta":{"k":"v"}}`, `{"_meta":{"k":"v"},"uri":"a://b"}`},
		{`{"uri":"a://b","_meta":{"progressToken":"p"}}`, `{"uri":"a://b"}`},
		{`{"uri":"a://b","_meta":{"progressToken":"p","k":1}}`, `{"_meta":{"k":1},"uri":"a://b"}`},
		{`"_meta"`, `"_meta"`},
	} {
		if got := string(forwardParams(json.RawMessage(tc.in))); got != tc.want {
			t.Errorf("forwardParams(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestDropOwnMeta(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`{"content":[],"_meta":{"k":1}}`, `{"content":[],"_meta":{"k":1}}`},
		{`{"content":[{"type":"text","text":"nexus/x"}]}`, `{"content":[{"type":"text","text":"nexus/x"}]}`},
		{`{"content":[],"_meta":{"nexus/cache":{"status":"hit"}}}`, `{"content":[]}`},
		{`{"content":[],"_meta":{"nexus/cache":1,"k":2}}`, `{"_meta":{"k":2},"content":[]}`},
	} {
		if got := string(dropOwnMeta(json.RawMessage(tc.in))); got != tc.want {
			t.Errorf("dropOwnMeta(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestCallRequestMeta(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		meta, token, want string
	}{
		{``, ``, `{"name":"t","arguments":{"a":1}}`},
		{``, `nexus-1`, `{"name":"t","arguments":{"a":1},"_meta":{"progressToken":"nexus-1"}}`},
		{`{"k":"v"}`, ``, `{"name":"t","arguments":{"a":1},"_meta":{"k":"v"}}`},
		{`{"k":"v","l":2}`, `nexus-1`, `{"name":"t","arguments":{"a":1},"_meta":{"progressToken":"nexus-1","k":"v","l":2}}`},
	} {
		var meta json.RawMessage
		if tc.meta != "" {
			meta = json.RawMessage(tc.meta)
		}
		got := callRequest("t", json.RawMessage(`{"a":1}`), meta, tc.token)
		if string(got) != tc.want || !json.Valid(got) {
			t.Errorf("callRequest(meta %s, token %q) = %s, want %s", tc.meta, tc.token, got, tc.want)
		}
	}
}

func TestRenameTask(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`{"task":{"taskId":"c-1","status":"working","ttl":60000}}`, `{"task":{"status":"working","taskId":"g-1","ttl":60000}}`},
		{`{"taskId":"c-1","pollInterval":1.50}`, `{"pollInterval":1.50,"taskId":"g-1"}`},
		{`{"content":[{"type":"text","text":"c-1"}],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"c-1"}}}`,
			`{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"g-1"}},"content":[{"type":"text","text":"c-1"}]}`},
		{`{"structuredContent":{"taskId":"c-1"},"task":[]}`, `{"structuredContent":{"taskId":"c-1"},"task":[]}`},
		{`{"taskId":"c-2"}`, `{"taskId":"c-2"}`},
	} {
		if got := string(renameTask(json.RawMessage(tc.in), "c-1", "g-1")); got != tc.want {
			t.Errorf("renameTask(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestTaskRoutesBound: a task id is honoured only for the session (and agent) that
// created it; tasks/list sees a session's own; an ended session's tasks are gone.
func TestTaskRoutesBound(t *testing.T) {
	t.Parallel()
	var tr taskRoutes
	tool := &Tool{Server: "s", Name: "t", Canonical: "s.t"}
	alice, alice2, bob := &session{agent: "alice"}, &session{agent: "alice"}, &session{agent: "bob"}
	id, err := tr.add(alice, tool, "child-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.add(bob, tool, "child-2", 0); err != nil {
		t.Fatal(err)
	}
	if r := tr.lookup(id, alice); r == nil || r.child != "child-1" || r.server != "s" {
		t.Errorf("the creator's lookup: %+v", r)
	}
	for name, s := range map[string]*session{"another session of the agent": alice2, "another agent": bob} {
		if r := tr.lookup(id, s); r != nil {
			t.Errorf("%s may use alice's task: %+v", name, r)
		}
	}
	if got := tr.of(alice); len(got) != 1 || got[0].id != id {
		t.Errorf("alice's tasks: %+v", got)
	}
	if r := tr.byChild("s", "child-2"); r == nil || r.s != bob {
		t.Errorf("the route of a child's status: %+v", r)
	}
	tr.dropSession(alice)
	if r := tr.lookup(id, alice); r != nil || len(tr.of(alice)) != 0 {
		t.Errorf("an ended session's task is still honoured: %+v", r)
	}
}

// recordSink keeps what a session was sent.
type recordSink struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recordSink) send(msg []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, string(msg))
	return true
}

func (r *recordSink) reply(msg []byte) { r.send(msg) }

func (r *recordSink) sent() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs)
}

// TestTaskStatusRoutedToItsSession: a child's notifications/tasks/status reaches only
// the session whose task it is, under the gateway's id and redacted; a status from
// another server with the same child id, or of a task no client made, goes nowhere.
func TestTaskStatusRoutedToItsSession(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-0123456789abcdef"
	cfg, err := config.Parse("test.json", []byte(`{"servers": {"s": {"command": "s"}, "other": {"command": "o"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{Redact: func(b []byte) []byte { return bytes.ReplaceAll(b, []byte(secret), []byte("[redacted]")) }})
	if err != nil {
		t.Fatal(err)
	}
	mine, theirs := &recordSink{}, &recordSink{}
	s1, s2 := g.newSession(frontStdio, "alice", mine), g.newSession(frontStdio, "alice", theirs)
	s1.agent, s2.agent = "alice", "alice"
	id, err := g.tasks.add(s1, &Tool{Server: "s", Name: "t", Canonical: "s.t"}, "c-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	g.notification("s", "notifications/tasks/status", json.RawMessage(`{"taskId":"c-1","status":"working","statusMessage":"`+secret+`"}`))
	g.notification("other", "notifications/tasks/status", json.RawMessage(`{"taskId":"c-1","status":"failed"}`))
	g.notification("s", "notifications/tasks/status", json.RawMessage(`{"taskId":"c-9","status":"failed"}`))
	got := mine.sent()
	if len(got) != 1 || !strings.Contains(got[0], `"taskId":"`+id+`"`) || strings.Contains(got[0], "c-1") || strings.Contains(got[0], secret) {
		t.Errorf("the task's session got %q", got)
	}
	if len(theirs.sent()) != 0 {
		t.Errorf("another session got %q", theirs.sent())
	}
}
