package memory_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/nexus-mcp/nexus/memory"
	. "github.com/nexus-mcp/nexus/memory/memorytest"
)

// The rules that make memory safe to put in front of a real server: only
// read-only answers, only for a TTL someone gave, never an answer made with
// a caller's input, exact reading of the members it relies on, unknown
// outcomes count as done, and stale answers only when the child failed.

func TestNoTTLNoMemory(t *testing.T) {
	m := openTest(t, Options{})
	m.SetSettings(Settings{}) // nobody said how long answers of code-kg stay true
	c := &Child{}
	for i := range 3 {
		if st := Status(t, Do(t, m, "", ReadTool(), `{}`, c)); st != StatusMiss {
			t.Fatalf("call %d: %q, want miss", i, st)
		}
	}
	if n := c.Calls.Load(); n != 3 {
		t.Fatalf("child calls %d, want 3", n)
	}
	if list, err := m.List(context.Background(), 0); err != nil || len(list) != 0 {
		t.Fatalf("stored without a ttl: %v %v", list, err)
	}
	// Identical calls in flight at once still share one child call.
	release := make(chan struct{})
	var calls atomic.Int64
	slow := Plain(func(context.Context) (json.RawMessage, error) {
		calls.Add(1)
		<-release
		return TextResult("shared"), nil
	})
	results := callTogether(t, m, "", `{"q":1}`, slow, 4, func() {
		WaitFor(t, "three followers", func() bool { return localWaiting(m) == 3 })
		close(release)
	})
	if n := calls.Load(); n != 1 {
		t.Fatalf("identical concurrent calls made %d child calls, want 1", n)
	}
	for _, r := range results {
		if Text(r) != "shared" {
			t.Fatalf("result %s", r)
		}
	}
}

func TestAskedClientNeverShared(t *testing.T) {
	m := openTest(t, Options{})
	// The leader's child asks its client (roots, sampling) while followers
	// wait: each follower must make a call of its own.
	release := make(chan struct{})
	var calls atomic.Int64
	asking := func(ctx context.Context) (Answer, error) {
		n := calls.Add(1)
		if n == 1 {
			<-release
			return Answer{Result: TextResult("made with caller 1's roots"), AskedClient: true}, nil
		}
		return Answer{Result: TextResult("made with another caller's roots"), AskedClient: true}, nil
	}
	results := callTogether(t, m, "agent", `{}`, asking, 3, func() {
		WaitFor(t, "two followers", func() bool { return localWaiting(m) == 2 })
		close(release)
	})
	if n := calls.Load(); n != 3 {
		t.Fatalf("child calls %d, want 3 (one per caller)", n)
	}
	shared := 0
	for _, r := range results {
		if Text(r) == "made with caller 1's roots" {
			shared++
		}
	}
	if shared != 1 {
		t.Fatalf("caller 1's answer reached %d callers", shared)
	}
	if st := Status(t, Do(t, m, "", ReadTool(), `{}`, &Child{})); st != StatusMiss {
		t.Fatalf("an answer made with a caller's input was stored: %q", st)
	}
}

func TestStrictResultReading(t *testing.T) {
	for _, tc := range []struct {
		name   string
		result string
		stored bool
	}{
		{"plain", `{"content":[{"type":"text","text":"ok"}]}`, true},
		{"isError false", `{"content":[],"isError":false}`, true},
		{"isError", `{"content":[],"isError":true}`, false},
		{"case variant after", `{"content":[],"isError":true,"ISERROR":false}`, false},
		{"case variant alone", `{"content":[],"IsError":false}`, false},
		{"duplicate", `{"content":[],"isError":true,"isError":false}`, false},
		{"meta variant", `{"content":[],"_Meta":{}}`, false},
		{"resultType variant", `{"content":[],"resulttype":"complete"}`, false},
		{"request state", `{"content":[],"requestState":"abc"}`, false},
		{"input required", `{"content":[],"resultType":"input_required","inputRequests":{}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := openTest(t, Options{})
			for range 2 {
				if _, err := m.Call(context.Background(), "", ReadTool(), json.RawMessage(`{}`), Answers(tc.result)); err != nil {
					t.Fatal(err)
				}
			}
			list, err := m.List(context.Background(), 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(list) == 1; got != tc.stored {
				t.Fatalf("stored %v, want %v", got, tc.stored)
			}
			// A mutating call whose result memory cannot read for sure
			// counts as done: it invalidates.
			if tc.stored {
				return
			}
			m2 := openTest(t, Options{})
			c := &Child{}
			Do(t, m2, "", ReadTool(), `{}`, c)
			if _, err := m2.Call(context.Background(), "", WriteTool(), json.RawMessage(`{}`), Answers(tc.result)); err != nil {
				t.Fatal(err)
			}
			want := StatusMiss
			if tc.name == "isError" {
				want = StatusHit // the child said plainly it failed: nothing changed
			}
			if st := Status(t, Do(t, m2, "", ReadTool(), `{}`, c)); st != want {
				t.Fatalf("read after the mutating call: %q, want %q", st, want)
			}
		})
	}
}

func TestUnknownOutcomeInvalidates(t *testing.T) {
	for _, tc := range []struct {
		name       string
		a          Answer
		invalidate bool
	}{
		{"answered", Answer{Result: TextResult("done")}, true},
		{"child said it failed", Answer{Result: ErrorResult("no")}, false},
		{"timed out", Answer{Result: ErrorResult("timeout"), Outcome: Unknown, Failure: "timeout"}, true},
		{"never sent", Answer{Result: ErrorResult("not running"), Outcome: NotSent, Failure: "not running"}, false},
		{"refused at the write", Answer{Result: ErrorResult("refused"), Outcome: Refused}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := openTest(t, Options{})
			c := &Child{}
			Do(t, m, "", ReadTool(), `{}`, c)
			if _, err := m.Call(context.Background(), "", WriteTool(), json.RawMessage(`{}`), func(context.Context) (Answer, error) { return tc.a, nil }); err != nil {
				t.Fatal(err)
			}
			want := StatusHit
			if tc.invalidate {
				want = StatusMiss
			}
			if st := Status(t, Do(t, m, "", ReadTool(), `{}`, c)); st != want {
				t.Fatalf("read after: %q, want %q", st, want)
			}
		})
	}
}

func TestStaleIfError(t *testing.T) {
	clk := NewClock()
	m := openTest(t, Options{Now: clk.Now})
	m.SetSettings(Settings{TTL: map[string]TTL{"code-kg.*": {D: time.Minute}}, StaleIfError: map[string]time.Duration{"code-kg.*": time.Hour}})
	c := &Child{}
	first := Do(t, m, "", ReadTool(), `{}`, c)
	call := func(a Answer) json.RawMessage {
		t.Helper()
		res, err := m.Call(context.Background(), "", ReadTool(), json.RawMessage(`{}`), func(context.Context) (Answer, error) { return a, nil })
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	down := Answer{Result: ErrorResult("server code-kg is not running"), Outcome: NotSent, Failure: "server code-kg is not running"}
	// Fresh: a hit, whatever the child would say.
	WantStatus(t, "fresh", call(down), StatusHit)
	clk.Advance(2 * time.Minute)
	// Expired, the child answers (even with isError): its answer.
	WantStatus(t, "expired, child answers isError", call(Answer{Result: ErrorResult("bad input")}), StatusMiss)
	// Expired, the child is down: the stale answer, said so.
	res := call(down)
	var meta struct {
		Meta map[string]struct {
			Status string `json:"status"`
			AgeMS  int64  `json:"age_ms"`
			Error  string `json:"error"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(res, &meta); err != nil {
		t.Fatal(err)
	}
	rep := meta.Meta[MetaKey]
	if rep.Status != StatusStale || rep.AgeMS != (2*time.Minute).Milliseconds() || rep.Error != down.Failure || Text(res) != Text(first) {
		t.Fatalf("stale answer %s", res)
	}
	// Timed out: also stale.
	WantStatus(t, "timeout", call(Answer{Result: ErrorResult("t"), Outcome: Unknown, Failure: "t"}), StatusStale)
	// A refusal never gets one.
	WantStatus(t, "refused", call(Answer{Result: ErrorResult("no"), Outcome: Refused}), StatusMiss)
	// A restart marks the entry stale: not fresh, still standing in.
	Do(t, m, "", ReadTool(), `{}`, c)
	WantStatus(t, "refreshed", call(down), StatusHit)
	if err := m.MarkStale(context.Background(), ReadTool().Server); err != nil {
		t.Fatal(err)
	}
	WantStatus(t, "after a restart, child down", call(down), StatusStale)
	WantStatus(t, "after a restart, child up", Do(t, m, "", ReadTool(), `{}`, c), StatusMiss)
	// Older than the window: the failure itself.
	clk.Advance(2 * time.Hour)
	WantStatus(t, "beyond the window", call(down), StatusMiss)
	// Off unless configured.
	m.SetSettings(Settings{TTL: map[string]TTL{"code-kg.*": {D: time.Minute}}})
	Do(t, m, "", ReadTool(), `{}`, c)
	clk.Advance(2 * time.Minute)
	WantStatus(t, "no window", call(down), StatusMiss)
}

// callTogether makes n identical calls of readTool at once, runs meanwhile
// while they are under way, and returns their results.
func callTogether(t *testing.T, m *Memory, agent, args string, forward Forward, n int, meanwhile func()) []json.RawMessage {
	t.Helper()
	var wg sync.WaitGroup
	results := make([]json.RawMessage, n)
	for i := range results {
		wg.Go(func() {
			res, err := m.Call(context.Background(), agent, ReadTool(), json.RawMessage(args), forward)
			if err != nil {
				t.Error(err)
			}
			results[i] = res
		})
	}
	meanwhile()
	wg.Wait()
	return results
}
