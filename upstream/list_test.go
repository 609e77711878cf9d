package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

func TestList(t *testing.T) {
	refused := errors.New("the server went away")
	tests := []struct {
		name  string
		pages map[string]string // cursor asked -> the page answered ("!" fails the request)
		want  string            // the items, joined
		err   string            // in the error; "" for none
	}{
		{"one page", map[string]string{"": `{"tools":[{"name":"a"},{"name":"b"}]}`}, `{"name":"a"} {"name":"b"}`, ""},
		{"pages by cursor", map[string]string{"": `{"tools":[1],"nextCursor":"p2"}`, "p2": `{"tools":[2],"nextCursor":"p3"}`, "p3": `{"tools":[3]}`}, "1 2 3", ""},
		{"null cursor and items", map[string]string{"": `{"tools":null,"nextCursor":null}`}, "", ""},
		{"none listed", map[string]string{"": `{}`}, "", ""},
		{"a failed request keeps what came before", map[string]string{"": `{"tools":[1],"nextCursor":"p2"}`, "p2": "!"}, "1", "went away"},
		{"a page that is no object", map[string]string{"": `[1,2]`}, "", "decoding the tools"},
		{"items that are no array", map[string]string{"": `{"tools":{"a":1}}`}, "", "decoding the tools"},
		{"a cursor that is no string", map[string]string{"": `{"tools":[1],"nextCursor":7}`}, "1", "decoding the nextCursor"},
		{"a cursor that never ends", map[string]string{"": `{"tools":[0],"nextCursor":"again"}`, "again": `{"tools":[0],"nextCursor":"again"}`}, strings.TrimSpace(strings.Repeat("0 ", MaxPages)), "more than 100 pages"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			send := func(_ context.Context, method string, params any) (json.RawMessage, error) {
				if method != "tools/list" {
					t.Fatalf("asked %s", method)
				}
				cursor, _ := params.(map[string]any)["cursor"].(string)
				page, ok := tc.pages[cursor]
				switch {
				case !ok:
					return nil, fmt.Errorf("no page %q", cursor)
				case page == "!":
					return nil, refused
				}
				return json.RawMessage(page), nil
			}
			items, err := List(context.Background(), send, "tools/list", "tools")
			var got []string
			for _, it := range items {
				got = append(got, string(it))
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("items %q, want %q", strings.Join(got, " "), tc.want)
			}
			if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want one saying %q", err, tc.err)
			}
		})
	}
}

// TestChanges: marks made before a Next are taken by it at once, as one; Next
// waits for a mark, and ends with its connection or context.
func TestChanges(t *testing.T) {
	c := NewChanges()
	c.Mark(ToolsList)
	c.Mark(OtherLists)
	c.Mark(ToolsList)
	if lists, ok := c.Next(t.Context(), nil); !ok || lists != ToolsList|OtherLists {
		t.Fatalf("Next = %b, %v; want both lists at once", lists, ok)
	}

	got := make(chan Lists)
	go func() {
		lists, _ := c.Next(t.Context(), nil)
		got <- lists
	}()
	select {
	case lists := <-got:
		t.Fatalf("Next took %b with nothing marked", lists)
	case <-time.After(20 * time.Millisecond):
	}
	c.Mark(OtherLists)
	if lists := <-got; lists != OtherLists {
		t.Fatalf("Next after a mark = %b, want %b", lists, OtherLists)
	}

	done := make(chan struct{})
	close(done)
	if _, ok := c.Next(t.Context(), done); ok {
		t.Error("Next went on past its connection's end")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, ok := c.Next(ctx, nil); ok {
		t.Error("Next went on past its context's end")
	}
}

// TestListOthers: a server's resources, templates and prompts are listed as
// its capabilities announce them; a list that fails is logged and keeps what
// came before the failure, and the others are listed all the same.
func TestListOthers(t *testing.T) {
	tests := []struct {
		name  string
		caps  mcp.ServerCapabilities
		pages map[string]string // method -> its one page ("!" fails it)
		want  [3]string         // resources, templates, prompts
		asked string            // the methods asked, in order
		warns int               // failures logged
	}{
		{"nothing announced", mcp.ServerCapabilities{}, nil, [3]string{}, "", 0},
		{"resources alone", mcp.ServerCapabilities{Resources: &struct {
			Subscribe   bool `json:"subscribe,omitempty"`
			ListChanged bool `json:"listChanged,omitempty"`
		}{}}, map[string]string{
			"resources/list": `{"resources":[{"uri":"a://1"}]}`, "resources/templates/list": `{"resourceTemplates":[{"uriTemplate":"a://{x}"}]}`,
		}, [3]string{`{"uri":"a://1"}`, `{"uriTemplate":"a://{x}"}`, ""}, "resources/list resources/templates/list", 0},
		{"templates fail, prompts listed", mcp.ServerCapabilities{Resources: &struct {
			Subscribe   bool `json:"subscribe,omitempty"`
			ListChanged bool `json:"listChanged,omitempty"`
		}{}, Prompts: &struct {
			ListChanged bool `json:"listChanged,omitempty"`
		}{}}, map[string]string{
			"resources/list": `{"resources":[]}`, "resources/templates/list": "!", "prompts/list": `{"prompts":[{"name":"p"}]}`,
		}, [3]string{"", "", `{"name":"p"}`}, "resources/list resources/templates/list prompts/list", 1},
		{"prompts alone, the second page failing", mcp.ServerCapabilities{Prompts: &struct {
			ListChanged bool `json:"listChanged,omitempty"`
		}{}}, map[string]string{
			"prompts/list": `{"prompts":[{"name":"p"}],"nextCursor":"2"}`, "prompts/list 2": "!",
		}, [3]string{"", "", `{"name":"p"}`}, "prompts/list prompts/list", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var asked []string
			send := func(_ context.Context, method string, params any) (json.RawMessage, error) {
				asked = append(asked, method)
				page := method
				if cursor, _ := params.(map[string]any)["cursor"].(string); cursor != "" {
					page += " " + cursor
				}
				if tc.pages[page] == "!" {
					return nil, errors.New("broken")
				}
				return json.RawMessage(tc.pages[page]), nil
			}
			var log strings.Builder
			l := ListOthers(t.Context(), send, tc.caps, slog.New(slog.NewTextHandler(&log, nil)))
			join := func(items []json.RawMessage) string {
				var s []string
				for _, it := range items {
					s = append(s, string(it))
				}
				return strings.Join(s, " ")
			}
			if got := [3]string{join(l.Resources), join(l.Templates), join(l.Prompts)}; got != tc.want {
				t.Errorf("listed %q, want %q", got, tc.want)
			}
			if got := strings.Join(asked, " "); got != tc.asked {
				t.Errorf("asked %q, want %q", got, tc.asked)
			}
			if n := strings.Count(log.String(), "listing failed"); n != tc.warns {
				t.Errorf("%d failures logged, want %d:\n%s", n, tc.warns, log.String())
			}
		})
	}
}
