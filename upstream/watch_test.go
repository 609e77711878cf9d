package upstream

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
)

// TestWatch: a watched connection is pinged every interval and at once on a
// doubt; an answer, even an error, keeps it and ends the doubt; silence
// ends it.
func TestWatch(t *testing.T) {
	const interval, timeout = 20 * time.Second, 10 * time.Second
	tests := []struct {
		name   string
		answer error // what a ping gets; context.DeadlineExceeded: no answer
		lost   bool
	}{
		{"answered", nil, false},
		{"answered with an error", &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no ping here"}, false},
		{"unanswered", context.DeadlineExceeded, true},
		{"broken", errors.New("connection reset"), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := NewConn()
				var pings atomic.Int32
				var waited time.Duration
				ping := func(ctx context.Context) error {
					pings.Add(1)
					if tc.answer == context.DeadlineExceeded {
						start := time.Now()
						<-ctx.Done()
						waited = time.Since(start)
						return ctx.Err()
					}
					return tc.answer
				}
				done := make(chan error, 1)
				go func() { done <- c.Watch(context.Background(), ping, interval, timeout) }()

				time.Sleep(interval - time.Millisecond)
				synctest.Wait()
				if n := pings.Load(); n != 0 {
					t.Fatalf("%d pings before the interval", n)
				}
				c.Doubts.Raise() // a request broke: ping now
				held := c.Doubts.Held()
				synctest.Wait()
				if n := pings.Load(); n != 1 {
					t.Fatalf("%d pings after a doubt, want 1 at once", n)
				}
				if tc.lost {
					err := <-done
					if err == nil || !c.Lost() || !errors.Is(c.Err(), err) {
						t.Fatalf("Watch = %v, connection lost %v (%v): want it ended with the ping's error", err, c.Lost(), c.Err())
					}
					if tc.answer == context.DeadlineExceeded && waited != timeout {
						t.Errorf("the ping waited %v, want %v", waited, timeout)
					}
					return
				}
				select {
				case <-held:
				default:
					t.Fatal("an answered ping left the calls held")
				}
				time.Sleep(interval)
				synctest.Wait()
				if n := pings.Load(); n != 2 || c.Lost() {
					t.Fatalf("after an interval: %d pings, lost %v; want 2, kept", n, c.Lost())
				}
				c.Lose(nil)
				if err := <-done; err != nil {
					t.Errorf("Watch of a connection that ended = %v", err)
				}
			})
		})
	}
}
