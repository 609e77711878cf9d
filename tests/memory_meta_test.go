package tests

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMemoryKeepsCallMetaApart: a call's _meta reaches the child, which may
// answer from it, so a call with another _meta is not answered with the first
// one's answer (bob never reads "alice"); the same _meta is.
func TestMemoryKeepsCallMetaApart(t *testing.T) {
	t.Parallel()
	h := memoryHome(t, nil)
	s := h.serveStdio()
	call := func(user string) callResult {
		t.Helper()
		res, rpcErr := s.request("tools/call", map[string]any{"name": "fx__meta", "arguments": map[string]any{"n": "who"},
			"_meta": map[string]any{"example/user": user}})
		if rpcErr != nil {
			t.Fatalf("tools/call: %+v", rpcErr)
		}
		var r callResult
		if err := json.Unmarshal(res, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	steps := []struct {
		user, status string
	}{
		{"alice", "miss"},
		{"bob", "miss"},
		{"alice", "hit"},
	}
	for _, st := range steps {
		r := call(st.user)
		if r.cacheStatus() != st.status || !strings.Contains(r.text(), st.user) {
			t.Errorf("%s's call: status %q, text %q; want %q and the child's answer to %s", st.user, r.cacheStatus(), r.text(), st.status, st.user)
		}
	}
}
