package aggregation

import (
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nexus-mcp/nexus/config"
)

// The tests in this file run on synctest's fake clock, with the real durations:
// the clock moves only when every goroutine of the bubble is durably blocked, so
// what a child or session does over an hour takes no time at all. Nothing in a
// bubble may wait on real I/O (a pipe to a process, a socket), which is not
// durably blocking: the children here fail to start (exec finds no program, so no
// process and no pipe outlives the attempt), and HTTP goes through handler calls.

// missingCommand is a program that does not exist: starting it fails at once, with
// no process, as a child whose npx package is gone does.
const missingCommand = "/nonexistent/nexus-test-child"

// attemptClock records, on the bubble's clock, when a child makes each attempt.
type attemptClock struct {
	start time.Time
	mu    sync.Mutex
	at    []time.Duration // since start
}

func (a *attemptClock) beforeStart(*config.Server) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.at = append(a.at, time.Since(a.start))
}

func (a *attemptClock) attempts() []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Duration(nil), a.at...)
}

// TestChildBackoffSeries: a child that cannot start is tried maxFailures times,
// the waits between tries doubling from firstBackoff, its state saying when the
// next try is; then it gives up and waits, however long, until a call asks for one
// fresh attempt. The real constants, on the fake clock.
func TestChildBackoffSeries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := &attemptClock{start: time.Now()}
		g := comebackGateway(t, `{"gone": {"command": "`+missingCommand+`"}}`,
			func(kids map[string]*child) { kids["gone"].beforeStart = clock.beforeStart })
		c := g.kids()["gone"]

		// The waits the policy promises: 250ms, 500ms, ... doubling, one fewer
		// than the attempts.
		var want []time.Duration
		var at, wait time.Duration = 0, firstBackoff
		for range maxFailures {
			want = append(want, at)
			at += wait
			wait = min(wait*2, maxBackoff)
		}
		for i := range maxFailures - 1 {
			synctest.Wait() // attempt i+1 failed; the child sleeps
			if got := len(clock.attempts()); got != i+1 {
				t.Fatalf("at %s: %d attempts, want %d", time.Since(clock.start), got, i+1)
			}
			st := c.status()
			next := want[i+1] - want[i]
			if st.State != StateRetrying || !st.NextRetry.Equal(clock.start.Add(want[i+1])) {
				t.Fatalf("after attempt %d: %s (next try at %s), want retrying, next try in %s",
					i+1, st.State, st.NextRetry.Sub(clock.start), next)
			}
			if d := st.Describe(); !strings.Contains(d, "next try in "+next.String()) {
				t.Errorf("after attempt %d: %q, want the wait (%s) said", i+1, d, next)
			}
			// Nothing happens a moment before the wait ends.
			time.Sleep(next - time.Millisecond)
			synctest.Wait()
			if got := len(clock.attempts()); got != i+1 {
				t.Fatalf("%s before the wait of %s ended: %d attempts, want %d", time.Millisecond, next, got, i+1)
			}
			time.Sleep(time.Millisecond)
		}
		synctest.Wait()
		if got := clock.attempts(); !equalDurations(got, want) {
			t.Fatalf("attempts at %v, want %v", got, want)
		}
		st := c.status()
		if st.State != StateFailed || !strings.Contains(st.Error, "gave up after 8 attempts") || !st.NextRetry.IsZero() {
			t.Fatalf("after %d attempts: %s %q (next try %v), want failed, given up", maxFailures, st.State, st.Error, st.NextRetry)
		}

		// A failed child stays failed: no timer brings it back.
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		if got := len(clock.attempts()); got != maxFailures {
			t.Fatalf("a day after giving up: %d attempts, want %d", got, maxFailures)
		}
		// A call makes one fresh attempt, waits for it, and says why it failed.
		if got := callText(t, g, "gone__anything", `{}`); !strings.Contains(got, "is not running (failed") {
			t.Errorf("a call to the failed child: %s", got)
		}
		if got := len(clock.attempts()); got != maxFailures+1 {
			t.Errorf("after a call: %d attempts, want %d (one fresh)", got, maxFailures+1)
		}
		if st := c.status(); st.State != StateFailed || !strings.Contains(st.Error, "a fresh attempt failed too") {
			t.Errorf("after the fresh attempt: %s %q", st.State, st.Error)
		}
	})
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
