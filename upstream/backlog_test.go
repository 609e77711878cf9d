package upstream

import (
	"context"
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
				var b Backlog
				for range tc.before {
					b.Arrived()
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
							b.Handled()
						}
					}()
				}
				go func() {
					synctest.Wait() // Settle is waiting
					for range tc.after {
						b.Arrived()
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
