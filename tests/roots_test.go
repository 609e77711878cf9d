package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClientRootsBeforeFirstCall: a "sessions": "client" server that asks its
// client's roots as it starts (the npm filesystem server narrows what it may
// read to them) has applied them before the client's first call reaches it: a
// file outside the client's roots is refused on the very first call, as it is
// when the client connects to the server directly.
func TestClientRootsBeforeFirstCall(t *testing.T) {
	t.Parallel()
	node, script := peerScript(t, "@modelcontextprotocol/server-filesystem/dist/index.js")
	top := t.TempDir()
	inside, outside := filepath.Join(top, "inside"), filepath.Join(top, "outside")
	for _, d := range []string{inside, outside} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("not for this client"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHome(t, map[string]any{"servers": map[string]any{
		"files": map[string]any{"command": node, "args": []string{script, top}, "sessions": "client"},
	}, "policy": map[string]any{"default": map[string]any{"allow": []string{"*"}}}})
	for i := range 3 { // each a fresh client session, so a fresh server process
		s := h.serveStdioReady([]string{"files"}, "--no-memory")
		s.answer = func(m message) (any, *rpcError) {
			if m.Method != "roots/list" {
				return nil, &rpcError{Code: -32601, Message: "not answered: " + m.Method}
			}
			return map[string]any{"roots": []map[string]any{{"uri": "file://" + inside, "name": "inside"}}}, nil
		}
		res := s.call("files__read_text_file", map[string]any{"path": secret})
		if text := res.text(); !res.IsError || strings.Contains(text, "not for this client") {
			t.Errorf("session %d: the first call read a file outside the client's roots: %s", i, text)
		}
		s.close()
		if strings.Contains(s.stderr.String(), "did not ask this client's roots") {
			t.Errorf("session %d: the gateway did not see the server ask for roots:\n%s", i, s.stderr)
		}
	}
}
