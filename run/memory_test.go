package run

import (
	"context"
	"testing"
	"time"
)

// TestReturnMemory: the memory start-up used is returned once, after the
// children settled and a moment more, and never by a gateway that stopped first.
func TestReturnMemory(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		settle, cancel bool
		want           int // calls of free
	}{
		{"settled", true, false, 1},
		{"stopped while starting", false, true, 0},
		{"stopped while waiting after start-up", true, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			settled := make(chan struct{})
			if tc.settle {
				close(settled)
			}
			after := 10 * time.Millisecond
			if tc.cancel {
				after = time.Hour
				cancel()
			}
			calls := 0
			done := make(chan struct{})
			go func() {
				defer close(done)
				returnMemory(ctx, settled, after, func() { calls++ })
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("returnMemory did not return")
			}
			if calls != tc.want {
				t.Fatalf("free called %d times, want %d", calls, tc.want)
			}
		})
	}
}
