package aggregation

import (
	"context"
	"fmt"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// callers tracks the front contexts of the calls in flight on one child connection,
// so that a request the child sends back during a call (sampling, elicitation,
// roots) can go to the client that made the call.
type callers struct {
	mu   sync.Mutex
	next int
	ctxs map[int]context.Context
}

func (c *callers) add(ctx context.Context) (remove func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctxs == nil {
		c.ctxs = map[int]context.Context{}
	}
	c.next++
	id := c.next
	c.ctxs[id] = ctx
	return func() {
		c.mu.Lock()
		delete(c.ctxs, id)
		c.mu.Unlock()
	}
}

// only returns the caller when exactly one call is in flight: a stdio child's request
// carries no trace of the call it belongs to, so with two calls in flight there is no
// telling whose client should answer.
func (c *callers) only(serverName string) (context.Context, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ctxs) != 1 {
		return nil, fmt.Errorf("server %s sent a request to its client with %d calls in flight; Nexus forwards such requests only when exactly one call is in flight", serverName, len(c.ctxs))
	}
	for _, ctx := range c.ctxs {
		if server.ClientSessionFromContext(ctx) == nil {
			return nil, fmt.Errorf("server %s sent a request to its client, but the calling client has no session Nexus can forward it to (nexus call, or the HTTP front)", serverName)
		}
		return ctx, nil
	}
	return nil, nil
}

// backChannel answers a child's requests by asking the calling client.
type backChannel struct {
	front *server.MCPServer
	cn    *conn
}

func (b backChannel) CreateMessage(_ context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	ctx, err := b.cn.callers.only(b.cn.server)
	if err != nil {
		return nil, err
	}
	return b.front.RequestSampling(ctx, req)
}

func (b backChannel) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	ctx, err := b.cn.callers.only(b.cn.server)
	if err != nil {
		return nil, err
	}
	return b.front.RequestElicitation(ctx, req)
}

func (b backChannel) ListRoots(_ context.Context, req mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	ctx, err := b.cn.callers.only(b.cn.server)
	if err != nil {
		return nil, err
	}
	return b.front.RequestRoots(ctx, req)
}
