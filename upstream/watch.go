package upstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
)

// Watch checks a remote connection while it lives: it pings the server every
// interval, and at once when a request on the connection broke (Doubts). A
// ping answered, even with an error, shows the server alive and keeps the
// connection: one request that failed (a connection reset as the server
// closed it) does not take the server's tools away, and the calls its doubt
// held back go on. A ping left unanswered for timeout ends the connection,
// and Watch returns the ping's error; it returns nil when the connection or
// ctx ended first.
//
// A stdio server is not watched: its process's exit tells, and a server that
// reads one request at a time must not be ended for a ping that waits behind
// a long call.
func (c *Conn) Watch(ctx context.Context, ping func(context.Context) error, interval, timeout time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.Done():
			return nil
		case <-t.C:
		case <-c.Doubts.Wake():
		}
		sent := c.Doubts.Sending()
		pctx, cancel := context.WithTimeout(ctx, timeout)
		err := ping(pctx)
		cancel()
		var answered *jsonrpc.Error
		if err != nil && !errors.As(err, &answered) && ctx.Err() == nil {
			c.Lose(fmt.Errorf("it did not answer a ping: %w", err))
			return err
		}
		c.Doubts.Settle(sent)
	}
}
