package upstream

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestBacklogSettle: an answer waits for the notifications that arrived before
// it, not for later ones, and not past SettleWait or its context.
func TestBacklogSettle(t *testing.T) {
	tests := []struct {
		name   string
		before int           // notifications arrived before Settle
		after  int           // arrived once Settle waits
		routed time.Duration // when the first `before` are routed; 0: never
		cancel time.Duration // when Settle's context ends; 0: never
		want   time.Duration // how long Settle waits
	}{
		{name: "nothing pending", want: 0},
		{name: "waits for those before it", before: 2, routed: 30 * time.Millisecond, want: 30 * time.Millisecond},
		{name: "not for those after it", before: 1, after: 3, routed: 10 * time.Millisecond, want: 10 * time.Millisecond},
		{name: "not past SettleWait", before: 1, want: SettleWait},
		{name: "not past its context", before: 1, cancel: 40 * time.Millisecond, want: 40 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := NewBacklog(1)
				for range tc.before {
					b.arrived()
				}
				ctx := context.Background()
				if tc.cancel > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.cancel)
					defer cancel()
				}
				if tc.routed > 0 {
					go func() {
						time.Sleep(tc.routed)
						for range tc.before {
							b.handled()
						}
					}()
				}
				go func() {
					synctest.Wait() // Settle is waiting
					for range tc.after {
						b.arrived()
					}
				}()
				start := time.Now()
				b.Settle(ctx)
				if got := time.Since(start); got != tc.want {
					t.Errorf("Settle waited %s, want %s", got, tc.want)
				}
			})
		})
	}
}

// TestBacklogPump: notifications are routed in the order they were put, one
// at a time; a full queue drops what comes, never blocks; an answer waits for
// those put before it.
func TestBacklogPump(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBacklog(2)
		release := make(chan struct{})
		var routed []string
		route := func(n Note) {
			if n.Method == "first" {
				<-release // the router is held up: the queue fills
			}
			routed = append(routed, n.Method)
		}
		done := make(chan struct{})
		go b.Pump(context.Background(), done, route)
		for _, m := range []string{"first", "second", "third", "fourth"} {
			if kept := b.Put(m, nil); kept != (m != "fourth") {
				t.Errorf("Put(%s) = %v", m, kept)
			}
			synctest.Wait() // the router took "first" and waits
		}
		settled := make(chan time.Duration)
		go func() {
			start := time.Now()
			b.Settle(context.Background())
			settled <- time.Since(start)
		}()
		time.Sleep(20 * time.Millisecond)
		close(release)
		if waited := <-settled; waited != 20*time.Millisecond {
			t.Errorf("the answer waited %v, want the 20ms until the notifications before it were routed", waited)
		}
		if got := strings.Join(routed, " "); got != "first second third" {
			t.Errorf("routed %q, want first second third", got)
		}
		close(done)
	})
}
