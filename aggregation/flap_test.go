package aggregation

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestFlappingChildCostsClientsLittle: a child that changes its tools without a
// pause, to a client that lists again at each notifications/tools/list_changed,
// costs that client about one list_changed per rebuildDelay, not one per round
// trip of its own: what a child says of its lists is rebuilt after the debounce
// only, and a client's list does not rebuild the manifest for it.
func TestFlappingChildCostsClientsLittle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client(frontStdio, "other")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		answer := func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("flap"), nil
		}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			f.evil.srv.AddTool(mcp.NewTool(fmt.Sprintf("flap_%d", i)), answer)
			f.evil.srv.DeleteTools(fmt.Sprintf("flap_%d", i-1))
			time.Sleep(time.Millisecond)
		}
	})
	const run = time.Second
	listed := 0
	for end := time.Now().Add(run); time.Now().Before(end); {
		if n := len(c.notesOf("notifications/tools/list_changed")); n > listed {
			listed = n
			c.request("tools/list", nil)
			continue
		}
		select {
		case <-c.noted:
		case <-time.After(10 * time.Millisecond):
		}
	}
	close(stop)
	wg.Wait()
	n := len(c.notesOf("notifications/tools/list_changed"))
	if n == 0 {
		t.Fatal("the client was told of no change: the flapping did not reach it")
	}
	if most := 2*int(run/rebuildDelay) + 5; n > most {
		t.Errorf("the client was sent %d list_changed in %s, want at most %d (about one per %s)", n, run, most, rebuildDelay)
	}
	t.Logf("%d list_changed in %s, %d lists; the child was listed %d times", n, run, listed, f.evil.count("tools/list"))
}
