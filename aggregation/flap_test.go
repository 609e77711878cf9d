package aggregation

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestFlappingChildCostsClientsLittle: while a child changes its tools without a
// pause and one client lists without a pause, another client that listed once is
// told of a change about once per rebuildDelay: what a child says of its lists is
// rebuilt after the debounce only. (When a list rebuilt the manifest after any
// change, the quiet client was told of one at nearly each list the busy one made:
// 178 in a second under the race detector, against 16-17.)
func TestFlappingChildCostsClientsLittle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	busy, quiet := f.client(frontStdio, "other"), f.client(frontHTTP, "other")
	quiet.request("tools/list", nil) // only a client that listed is told of changes
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
	lists := 0
	for end := time.Now().Add(run); time.Now().Before(end); lists++ {
		busy.request("tools/list", nil)
	}
	close(stop)
	wg.Wait()
	n := len(quiet.notesOf("notifications/tools/list_changed"))
	if n == 0 {
		t.Fatal("the quiet client was told of no change: the flapping did not reach it")
	}
	if most := 2*int(run/rebuildDelay) + 5; n > most {
		t.Errorf("the quiet client was sent %d list_changed in %s, want at most %d (about one per %s)", n, run, most, rebuildDelay)
	}
	t.Logf("quiet client: %d list_changed in %s; busy client: %d lists; the child was listed %d times", n, run, lists, f.evil.count("tools/list"))
}
