package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// MaxPages bounds a listing: a server whose cursor never ends must not hold
// its start, or a relist, for ever.
const MaxPages = 100

// ErrTooManyPages is List's error for a listing still going at MaxPages.
var ErrTooManyPages = fmt.Errorf("more than %d pages", MaxPages)

// List returns every item of every page of a list method (tools/list,
// prompts/list...) as the server wrote it; field names a page's items
// ("tools"). send makes one request and returns its result. A failure
// returns the items of the pages before it, with the error: a page that is
// not an object, items that are not an array, a cursor that is not a string.
func List(ctx context.Context, send func(ctx context.Context, method string, params any) (json.RawMessage, error), method, field string) ([]json.RawMessage, error) {
	var items []json.RawMessage
	cursor := ""
	for range MaxPages {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		raw, err := send(ctx, method, params)
		if err != nil {
			return items, err
		}
		var page map[string]json.RawMessage
		if err := json.Unmarshal(raw, &page); err != nil {
			return items, fmt.Errorf("decoding the %s: %w", field, err)
		}
		var got []json.RawMessage
		if err := decodeMember(page, field, &got); err != nil {
			return items, err
		}
		items = append(items, got...)
		cursor = ""
		if err := decodeMember(page, "nextCursor", &cursor); err != nil {
			return items, err
		}
		if cursor == "" {
			return items, nil
		}
	}
	return items, ErrTooManyPages
}

// decodeMember decodes page's member name into v; one absent or null leaves v
// as it is.
func decodeMember(page map[string]json.RawMessage, name string, v any) error {
	raw, ok := page[name]
	if !ok || string(raw) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("decoding the %s: %w", name, err)
	}
	return nil
}

// Listed are a server's resources, resource templates and prompts as it
// listed them, raw, so that no field is lost on the way to a client; a lazy
// server's are kept on disk so too.
type Listed struct {
	Resources []json.RawMessage `json:"resources,omitempty"`
	Templates []json.RawMessage `json:"resourceTemplates,omitempty"`
	Prompts   []json.RawMessage `json:"prompts,omitempty"`
}

// ListOthers lists a server's resources, resource templates and prompts, as
// caps, its capabilities, announce them; send is as List's. A failure is
// logged, and leaves that list with what was listed before it: a server whose
// resources are broken still serves its tools.
func ListOthers(ctx context.Context, send func(ctx context.Context, method string, params any) (json.RawMessage, error), caps mcp.ServerCapabilities, log *slog.Logger) Listed {
	all := func(method, field string) []json.RawMessage {
		items, err := List(ctx, send, method, field)
		if err != nil {
			log.Warn("listing failed", "method", method, "err", err)
		}
		return items
	}
	var l Listed
	if caps.Resources != nil {
		l.Resources = all("resources/list", "resources")
		l.Templates = all("resources/templates/list", "resourceTemplates")
	}
	if caps.Prompts != nil {
		l.Prompts = all("prompts/list", "prompts")
	}
	return l
}

// Lists names lists a server may say changed: a set of bits.
type Lists int

const (
	// ToolsList is tools/list.
	ToolsList Lists = 1 << iota
	// OtherLists are resources, resource templates and prompts.
	OtherLists
)

// Changes are the lists a server said changed and that were not read again
// yet: a burst of list_changed notifications costs one reading, not one each.
type Changes struct {
	mu      sync.Mutex
	changed Lists
	ready   chan struct{} // holds a token when a Mark may not have been taken yet
}

// NewChanges is a connection's changes: none yet.
func NewChanges() *Changes { return &Changes{ready: make(chan struct{}, 1)} }

// Mark records that lists changed.
func (c *Changes) Mark(lists Lists) {
	c.mu.Lock()
	c.changed |= lists
	c.mu.Unlock()
	select {
	case c.ready <- struct{}{}:
	default:
	}
}

// Next waits for lists marked changed and takes them, every mark since the
// last Next at once. It reports false when ctx ends or done is closed first.
func (c *Changes) Next(ctx context.Context, done <-chan struct{}) (Lists, bool) {
	for {
		select {
		case <-done:
			return 0, false
		case <-ctx.Done():
			return 0, false
		case <-c.ready:
		}
		c.mu.Lock()
		lists := c.changed
		c.changed = 0
		c.mu.Unlock()
		if lists != 0 {
			return lists, true
		}
	}
}
