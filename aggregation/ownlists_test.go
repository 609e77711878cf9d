package aggregation

import (
	"slices"
	"strings"
	"testing"
)

// TestClientSessionSeesItsOwnLists: what a "client" server's connection of one
// client session lists (a resource and a tool that session's calls made) reaches
// that client, with list_changed, as it would over a direct connection; another
// client's lists do not change, and the lists go back to the server's common ones
// when the connection closes.
func TestClientSessionSeesItsOwnLists(t *testing.T) {
	t.Parallel()
	for _, front := range []string{frontStdio, frontHTTP} {
		t.Run(front, func(t *testing.T) {
			t.Parallel()
			f := newSessionsFixture(t, nil)
			a := f.client(front, "tester", nil)
			b := f.client(frontHTTP, "other", nil)
			for _, c := range []*testClient{a, b} {
				names(t, c.request("tools/list", nil), "tools", "name")
				names(t, c.request("resources/list", nil), "resources", "uri")
			}

			if got, isErr := call(t, a, "solo__make", "alpha"); isErr {
				t.Fatalf("make: %s", got)
			}
			for _, method := range []string{"notifications/tools/list_changed", "notifications/resources/list_changed"} {
				if !a.waitNote(method, nil) {
					t.Fatalf("A was not sent %s after its connection's lists changed", method)
				}
			}
			const madeURI, madeTool = "mem://solo/made/alpha", "solo__made_alpha"
			if uris := names(t, a.request("resources/list", nil), "resources", "uri"); !slices.Contains(uris, madeURI) {
				t.Errorf("A's resources: %v, want %s, which its own connection lists", uris, madeURI)
			}
			if tools := names(t, a.request("tools/list", nil), "tools", "name"); !slices.Contains(tools, madeTool) {
				t.Errorf("A's tools: %v, want %s", tools, madeTool)
			}
			if got, isErr := call(t, a, madeTool, ""); isErr || got != "made tool alpha" {
				t.Errorf("A calls %s: %q (error %v)", madeTool, got, isErr)
			}
			m := a.request("resources/read", map[string]any{"uri": madeURI})
			if m.Error != nil || !strings.Contains(string(m.Result), "made alpha") {
				t.Errorf("A reads %s: %s %v", madeURI, m.Result, m.Error)
			}

			// B's own connection lists nothing new, and B is told of nothing.
			if uris := names(t, b.request("resources/list", nil), "resources", "uri"); slices.Contains(uris, madeURI) {
				t.Errorf("B's resources hold A's %s: %v", madeURI, uris)
			}
			if tools := names(t, b.request("tools/list", nil), "tools", "name"); slices.Contains(tools, madeTool) {
				t.Errorf("B's tools hold A's %s", madeTool)
			}
			if n := b.notesOf("notifications/resources/list_changed"); len(n) > 0 {
				t.Errorf("B was sent %d resources/list_changed for A's connection", len(n))
			}
			if m := b.request("tools/call", map[string]any{"name": madeTool}); m.Error == nil {
				t.Errorf("B called A's tool %s: %s", madeTool, m.Result)
			}
		})
	}
}
