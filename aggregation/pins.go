package aggregation

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/pins"
)

// pinsHeld is what a child's pins last kept back: the held tools, as the gateway
// would have listed them (for the error a call of one gets), and the tools
// listed without approval. It has a lock of its own: a listing may be taken in
// with or without the child's.
type pinsHeld struct {
	mu         sync.Mutex
	tools      []*Tool
	unapproved []string
}

func (h *pinsHeld) set(tools []*Tool, unapproved []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tools, h.unapproved = tools, unapproved
}

func (h *pinsHeld) names() (held, unapproved []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range h.tools {
		held = append(held, t.Name)
	}
	return held, slices.Clone(h.unapproved)
}

// find is the held tool of that wire or canonical name, or nil.
func (h *pinsHeld) find(name string) *Tool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range h.tools {
		if t.Wire == name || t.Canonical == name {
			return t
		}
	}
	return nil
}

// admit is where a child's tool listing is taken in: of what the child offers,
// the tools its pins let through. A tool held never reaches the manifest, so no
// client lists or calls it and memory never keeps its answers. fresh says the
// child just listed them (pins.Guard.Admit records it).
func (c *child) admit(raws []json.RawMessage, fresh bool) []json.RawMessage {
	if c.pins == nil {
		return raws
	}
	cfg := c.config()
	a := c.pins.Admit(c.name, pins.Mode(cfg.PinMode()), cfg.Pins, raws, fresh)
	var held []*Tool
	var unapproved []string
	for _, ch := range a.Held {
		raw, _ := json.Marshal(map[string]string{"name": ch.Tool})
		if t, err := newTool(cfg, raw, c.names); err == nil {
			held = append(held, t)
		}
	}
	for _, ch := range a.Unapproved {
		unapproved = append(unapproved, ch.Tool)
	}
	c.held.set(held, unapproved)
	return a.Tools
}

// heldTool is the answer to a call of a tool its pins hold, nil when no child
// holds one of that name.
func (g *Gateway) heldTool(name string) *RPCError {
	for _, c := range g.kids() {
		if t := c.held.find(name); t != nil {
			return &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
				"tool %s is held: server %s offers it changed, new or renamed since its definition was approved; `nexus tools diff %s` shows the change and `nexus tools approve %s %s` accepts it",
				t.Canonical, t.Server, t.Server, t.Server, t.Name)}
		}
	}
	return nil
}

// ReviewPins reads the pin file again and reviews every child's last listing
// against it, under the running config: what an approval let through is listed,
// and the sessions whose lists changed are told. It is Reload for a change of
// the pin file alone.
func (g *Gateway) ReviewPins() {
	if g.pins == nil {
		return
	}
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	if g.closed {
		return
	}
	_ = g.pins.Reload() // a file that can no longer be trusted holds every tool (logged)
	for _, c := range g.kids() {
		c.reconfigure(c.config())
	}
}
