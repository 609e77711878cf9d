package samples

import (
	"encoding/json"
	"testing"
)

func TestZZDebug(t *testing.T) {
	s := inProcess(t, NewCodeKG(Options{}))
	_, _, err := s.callRaw("kg_latest_graph", map[string]any{"repository": "x", "bogus": 1})
	t.Logf("err: %v", err)
	_, _, err = s.callRaw("kg_latest_graph", map[string]any{"latest": "yes"})
	t.Logf("err: %v", err)
	b, _ := s.call("kg_resolve_finding", map[string]any{"graph_id": "g-np-main-002", "source_tool": "bandit", "finding_type": "bandit_b324_hashlib", "path": "services/echo/app/services/meeting_service.py", "line": 1094})
	j, _ := json.MarshalIndent(b, "", " ")
	t.Logf("%d bytes\n%s", len(j), j)
	d := inProcess(t, NewDocKG(Options{}))
	b, _ = d.call("doc_kg_context_pack", map[string]any{"query": "staging vs production deploy", "max_items": 3, "max_chars": 600})
	j, _ = json.MarshalIndent(b, "", " ")
	t.Logf("%s", j)
	b, _ = d.call("doc_kg_search", map[string]any{"query": "auth module bugs", "limit": 4})
	j, _ = json.MarshalIndent(b, "", " ")
	t.Logf("%s", j)
}
