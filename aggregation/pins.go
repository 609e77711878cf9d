package aggregation

import (
	"encoding/json"
	"fmt"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/pins"
)

// pinsHeld is what a child's pins last kept back: the held tools, as the gateway
// would have listed them (for the error a call of one gets), and the tools
// listed without approval.
type pinsHeld struct {
	tools      []*Tool
	unapproved []string
}

func (h pinsHeld) names() (held, unapproved []string) {
	for _, t := range h.tools {
		held = append(held, t.Name)
	}
	return held, h.unapproved
}

// admit is where a child's tool listing is taken in: of what the child offers,
// the tools its pins let through. A tool held never reaches the manifest, so no
// client lists or calls it and memory never keeps its answers. fresh says the
// child just listed them (pins.Guard.Admit records it). Called under c.mu.
func (c *child) admit(raws []json.RawMessage, fresh bool) []json.RawMessage {
	if c.pins == nil {
		return raws
	}
	cfg := c.config()
	a := c.pins.Admit(c.name, pins.Mode(cfg.PinMode()), cfg.Pins, raws, fresh)
	c.held = pinsHeld{}
	for _, ch := range a.Held {
		raw, _ := json.Marshal(map[string]string{"name": ch.Tool})
		if t, err := newTool(cfg, raw, c.names); err == nil {
			c.held.tools = append(c.held.tools, t)
		}
	}
	for _, ch := range a.Unapproved {
		c.held.unapproved = append(c.held.unapproved, ch.Tool)
	}
	return a.Tools
}

// heldTool is the answer to a call of a tool its pins hold, nil when no child
// holds one of that name.
func (g *Gateway) heldTool(name string) *RPCError {
	for _, c := range g.kids() {
		c.mu.Lock()
		held := c.held.tools
		c.mu.Unlock()
		for _, t := range held {
			if t.Wire == name || t.Canonical == name {
				return &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
					"tool %s is held: server %s offers it changed, new or renamed since its definition was approved; `nexus tools diff %s` shows the change and `nexus tools approve %s %s` accepts it",
					t.Canonical, t.Server, t.Server, t.Server, t.Name)}
			}
		}
	}
	return nil
}
