package aggregation

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
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
			if m.Error == nil || m.Error.Code != codeInvalidRequest || !strings.Contains(m.Error.Message, "batch of 80000 messages: at most 256") {
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
			release, entered := make(chan struct{}), make(chan struct{}, 64)
			f.evil.mu.Lock()
			f.evil.release, f.evil.entered = release, entered
			f.evil.mu.Unlock()
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
			if m.Error == nil || !strings.Contains(m.Error.Message, "at most 3") || !strings.Contains(m.Error.Message, "limits.maxCallsPerSession") {
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
