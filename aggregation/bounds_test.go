package aggregation

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/internal/jsonrpc"
)

// peakHeap samples the heap in use until stop is called, and returns the highest
// figure above the heap in use when it started.
func peakHeap() (stop func() uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	done := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		var most uint64
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			most = max(most, ms.HeapInuse)
			select {
			case <-done:
				peak <- most
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		if p := <-peak; p > base {
			return p - base
		}
		return 0
	}
}

// batchOf encodes a batch of n requests of method, with ids 0..n-1.
func batchOf(n int, method string, params string) []byte {
	var b bytes.Buffer
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":%q`, i, method)
		if params != "" {
			fmt.Fprintf(&b, `,"params":%s`, params)
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.Bytes()
}

// expect registers waits for the answers to ids 0..n-1 (and to a refusal with a
// null id) before a batch is sent.
func (c *testClient) expect(n int) []chan wireMsg {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]chan wireMsg, n+1)
	for i := range n {
		out[i] = make(chan wireMsg, 1)
		c.waiting[fmt.Sprint(i)] = out[i]
	}
	out[n] = make(chan wireMsg, 1)
	c.waiting["null"] = out[n]
	return out
}

// TestBatchFlood: a 4 MB batch of 80,000 tools/list is refused as a whole with a
// small error, on both fronts, and the gateway's heap stays bounded meanwhile (each
// item used to get a goroutine and an answer: 800 MB out, 2.96 GB of RSS).
func TestBatchFlood(t *testing.T) {
	f := newFixture(t)
	for _, front := range fronts {
		t.Run(front, func(t *testing.T) {
			c := f.client(front, "other")
			flood := batchOf(80000, "tools/list", "")
			waits := c.expect(0)
			stop := peakHeap()
			c.post(flood)
			var m wireMsg
			answered := true
			select {
			case m = <-waits[0]:
			case <-time.After(30 * time.Second):
				answered = false
			}
			heap := stop()
			t.Logf("a %d-byte batch of 80000 messages: heap in use rose by %d MB at most", len(flood), heap>>20)
			if !answered {
				t.Fatalf("no answer to the batch within 30s; the client received %d bytes", len(c.received()))
			}
			if m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidRequest || !strings.Contains(m.Error.Message, "batch of 80000 messages: at most 256") {
				t.Fatalf("answer: %v", m.Error)
			}
			if n := len(c.received()); n > 64<<10 {
				t.Errorf("the client received %d bytes", n)
			}
			if heap > 48<<20 {
				t.Errorf("heap in use rose by %d MB serving one refused batch", heap>>20)
			}
		})
	}
}

// TestBatchAnswerBound: the answers of one batch are bounded together; past the
// bound each request still gets an answer, an error that names the setting.
func TestBatchAnswerBound(t *testing.T) {
	f := newFixtureLimits(t, `{"maxBatchAnswerBytes": 65536}`)
	for _, front := range fronts {
		t.Run(front, func(t *testing.T) {
			c := f.client(front, "other")
			waits := c.expect(100)
			c.post(batchOf(100, "tools/list", ""))
			served, refused, total := 0, 0, 0
			for i := range 100 {
				select {
				case m := <-waits[i]:
					total += len(m.Result)
					switch {
					case m.Error == nil:
						served++
					case strings.Contains(m.Error.Message, "limits.maxBatchAnswerBytes"):
						refused++
					default:
						t.Errorf("answer %d: %v", i, m.Error)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("no answer to request %d of the batch", i)
				}
			}
			t.Logf("served %d, refused %d, %d bytes of results", served, refused, total)
			if served == 0 || refused == 0 || total > 65536 {
				t.Errorf("served %d, refused %d, %d bytes of results; want both under 65536 bytes", served, refused, total)
			}
		})
	}
}

// TestCallsPerSession: a session has at most maxCallsPerSession requests in flight;
// past it, single requests and batches are refused at once with an error naming the
// setting, and a batch runs its requests on at most that many workers.
func TestCallsPerSession(t *testing.T) {
	for _, front := range fronts {
		t.Run(front, func(t *testing.T) {
			f := newFixtureLimits(t, `{"maxCallsPerSession": 3}`)
			release, entered := f.evil.holdWaits(64)
			c := f.client(front, "other")
			var wg sync.WaitGroup
			for range 3 {
				wg.Go(func() {
					if m := c.request("tools/call", map[string]any{"name": "evil__wait", "arguments": map[string]any{}}); m.Error != nil {
						t.Errorf("a call within the bound: %v", m.Error)
					}
				})
			}
			for range 3 {
				<-entered
			}
			m := c.request("tools/list", nil)
			if m.Error == nil || !strings.Contains(m.Error.Message, "maximum of 3 requests") || !strings.Contains(m.Error.Message, "limits.maxCallsPerSession") {
				t.Errorf("a request past the bound: %s %v", m.Result, m.Error)
			}
			waits := c.expect(2)
			c.post(batchOf(2, "tools/list", ""))
			for i := range 2 {
				if m := <-waits[i]; m.Error == nil || !strings.Contains(m.Error.Message, "limits.maxCallsPerSession") {
					t.Errorf("a batch past the bound, request %d: %s %v", i, m.Result, m.Error)
				}
			}
			close(release)
			wg.Wait()

			// A batch of 256 waits runs on 3 workers: no goroutine per request.
			f.evil.mu.Lock()
			release, f.evil.mostWaiting = make(chan struct{}), 0
			f.evil.release = release
			f.evil.mu.Unlock()
			before := runtime.NumGoroutine()
			waits = c.expect(256)
			c.post(batchOf(256, "tools/call", `{"name":"evil__wait","arguments":{}}`))
			for range 3 {
				<-entered
			}
			grown := runtime.NumGoroutine() - before
			close(release)
			for i := range 256 {
				if m := <-waits[i]; m.Error != nil || !bytes.Contains(m.Result, []byte("released")) {
					t.Errorf("batch request %d: %s %v", i, m.Result, m.Error)
				}
			}
			f.evil.mu.Lock()
			most := f.evil.mostWaiting
			f.evil.mu.Unlock()
			t.Logf("a batch of 256 calls: %d more goroutines, at most %d calls in flight at the child", grown, most)
			if grown > 100 || most > 3 {
				t.Errorf("a batch of 256 calls: %d more goroutines, %d calls in flight at once; want one worker per slot (3)", grown, most)
			}
		})
	}
}

// rawHTTP speaks to the HTTP front one request at a time, to see statuses and
// streams as they are.
type rawHTTP struct{ url, token string }

func (c rawHTTP) do(ctx context.Context, method, sid, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.token)
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	return http.DefaultClient.Do(req)
}

// initialize opens a session; its status and id.
func (c rawHTTP) initialize(t *testing.T) (int, string) {
	t.Helper()
	resp, err := c.do(context.Background(), http.MethodPost, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
}

// call sends one request on a session; its status.
func (c rawHTTP) call(t *testing.T, sid, method string) int {
	t.Helper()
	resp, err := c.do(context.Background(), http.MethodPost, sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":%q}`, method))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// stream opens the session's stream; ended is closed when the gateway ends it.
func (c rawHTTP) stream(t *testing.T, sid string) (status int, ended <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	resp, err := c.do(ctx, http.MethodGet, sid, "")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
	}()
	return resp.StatusCode, done
}

func ends(ch <-chan struct{}, within time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(within):
		return false
	}
}

// TestAgentSessionFlood: one agent opening 1,000 sessions in a burst ends its own
// oldest idle ones and holds no more than its share; another agent's session lives
// on and it can still open more (it used to get 503 for the idle hour).
func TestAgentSessionFlood(t *testing.T) {
	f := newFixtureLimits(t, `{"maxSessions": 30}`) // two agents: a share of 10
	other := rawHTTP{f.url, tokens["other"]}
	_, kept := other.initialize(t)
	flooder := rawHTTP{f.url, tokens["tester"]}
	statuses := make([]int, 1000)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < len(statuses); i += 8 {
				statuses[i], _ = flooder.initialize(t)
			}
		})
	}
	wg.Wait()
	refused := 0
	for _, s := range statuses {
		if s != http.StatusOK {
			refused++
		}
	}
	held := map[string]int{}
	for _, s := range f.g.sessions.snapshot() {
		held[s.preset]++
	}
	t.Logf("1000 initialize of one agent: %d refused; sessions held %v", refused, held)
	if held["tester"] > 10 {
		t.Errorf("the flooding agent holds %d sessions, more than its share of 10", held["tester"])
	}
	if st := other.call(t, kept, "tools/list"); st != http.StatusOK {
		t.Errorf("the other agent's session after the flood: status %d", st)
	}
	for i := range 5 {
		if st, _ := other.initialize(t); st != http.StatusOK {
			t.Errorf("the other agent's new session %d after the flood: status %d", i, st)
		}
	}
}

// TestRevokeEndsStreams: a reload that removes or changes an agent's token ends
// that agent's sessions and their open streams at once; a reload that keeps it
// leaves them be.
func TestRevokeEndsStreams(t *testing.T) {
	testerHash := TokenHash(tokens["tester"])
	tests := []struct {
		name string
		edit func(cfg string) string
		ends bool
	}{
		{"token removed", func(cfg string) string {
			return strings.Replace(cfg, fmt.Sprintf(`"tester": {"tokenSha256": %q}, `, testerHash), "", 1)
		}, true},
		{"token changed", func(cfg string) string { return strings.Replace(cfg, testerHash, TokenHash("tok-new"), 1) }, true},
		{"token kept", func(cfg string) string { return cfg }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tester, other := rawHTTP{f.url, tokens["tester"]}, rawHTTP{f.url, tokens["other"]}
			_, sid := tester.initialize(t)
			_, otherSID := other.initialize(t)
			st, ended := tester.stream(t, sid)
			if st != http.StatusOK {
				t.Fatalf("opening the stream: status %d", st)
			}
			edited := tc.edit(f.cfg)
			if tc.ends && edited == f.cfg {
				t.Fatal("the edit changed nothing")
			}
			cfg, err := config.Parse("test.json", []byte(edited))
			if err != nil {
				t.Fatal(err)
			}
			if err := f.g.Reload(cfg); err != nil {
				t.Fatal(err)
			}
			if got := f.g.sessions.get(sid) == nil; got != tc.ends {
				t.Errorf("session ended by the reload: %v, want %v", got, tc.ends)
			}
			if tc.ends && !ends(ended, 5*time.Second) {
				t.Error("the revoked agent's stream is still open")
			}
			if f.g.sessions.get(otherSID) == nil {
				t.Error("the other agent's session ended")
			}
		})
	}
}
