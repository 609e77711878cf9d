package upstream

import (
	"context"
	"encoding/json"
	"fmt"
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
