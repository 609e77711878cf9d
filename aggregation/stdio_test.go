package aggregation

import (
	"bytes"
	"sync"
	"testing"
)

// TestStdioReadsWhileCallsWait: on stdio a call runs on the goroutine that read
// it, and the client's next messages are still read while it waits: on its
// child, or on an identical call in flight that memory makes it share. A ping
// sent while two such calls wait is answered before either of them.
func TestStdioReadsWhileCallsWait(t *testing.T) {
	t.Parallel()
	mem := openMemory(t)
	f := newFixtureMemory(t, "{}", mem)
	release, entered := f.evil.holdWaits(8)
	c := f.client(frontStdio, "other")

	answers := make([]wireMsg, 2)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			answers[i] = c.request("tools/call", map[string]any{"name": "evil__wait", "arguments": map[string]any{"text": "same"}})
		})
		if i == 0 {
			<-entered // the first is at the child; the second will follow it
		}
	}
	waitFor(t, "the second call to wait on the first", func() bool {
		local, _ := mem.Waiting()
		return local == 1
	})
	if m := c.request("ping", nil); m.Error != nil {
		t.Fatalf("ping while two calls wait: %v", m.Error)
	}
	close(release)
	wg.Wait()
	for i, m := range answers {
		if m.Error != nil || !bytes.Contains(m.Result, []byte("released")) {
			t.Errorf("call %d: %s %v", i, m.Result, m.Error)
		}
	}
	if n := f.evil.count("tools/call"); n != 1 {
		t.Errorf("the child was called %d times, want 1: identical calls in flight share one", n)
	}
}
