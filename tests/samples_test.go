package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The sample servers (package samples) behind `nexus serve`: every tool called
// through the gateway, the documented rules of the code-kg and doc-kg contracts
// (docs/contracts.md), the samples as streamable-http
// children, and `nexus demo`.

// Commits of the code-kg sample dataset (samples/codekg_data.go).
const (
	sampleCommitNP001  = "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678" // g-np-main-001
	sampleCommitNP002  = "e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d" // g-np-main-002, latest of main
	sampleCommitNPDocs = "5e6f7a8b9c0d1e2f3a4b5c6d7e8f90a1b2c3d4e5" // 1 ahead of 002, README only
	sampleCommitNPHead = "9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d" // 2 ahead of 002, touches http_client.py (has a finding)
	sampleCommitAI001  = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c" // g-ai-main-001

	samplePocket     = "syl2042/Nexus-Pocket"
	sampleInfra      = "syl2042/aurora-infra"
	sampleEchoBranch = "feature/echo-sync"
	sampleMeetingSvc = "services/echo/app/services/meeting_service.py"
)

// sampleCodeTools and sampleDocTools are the tools of the two samples, by the
// contract; readOnlyHint is false only for the two regeneration tools.
var (
	sampleCodeTools = []string{
		"kg_latest_graph", "kg_graph_summary", "kg_list_audit_risks", "kg_get_audit_risk",
		"kg_list_anomalies", "kg_get_anomaly", "kg_resolve_finding", "kg_file_context", "kg_impact",
		"kg_compare_runs", "kg_compare_with_local_git", "kg_regenerate_dry_run",
		"kg_regenerate", "kg_regenerate_submit",
	}
	sampleDocTools = []string{
		"doc_kg_status", "doc_kg_list_source_apps", "doc_kg_list_workspaces", "doc_kg_list_projects",
		"doc_kg_list_documents", "doc_kg_list_resources", "doc_kg_subgraph", "doc_kg_neighbors",
		"doc_kg_node", "doc_kg_relations", "doc_kg_search", "doc_kg_context_pack", "doc_kg_query",
	}
	sampleMutating = map[string]bool{"kg_regenerate": true, "kg_regenerate_submit": true}
)

// sampleWireNames lists the 27 wire names of both samples behind nexus.
func sampleWireNames() []string {
	var out []string
	for _, t := range sampleCodeTools {
		out = append(out, "code-kg__"+t)
	}
	for _, t := range sampleDocTools {
		out = append(out, "doc-kg__"+t)
	}
	return out
}

// sampleServer is a config entry running the sample name as a stdio child (the
// samplechild helper: `nexus sample-server name` without the race detector). The gateway builds the child's environment, so what the sample reads
// goes in "env".
func (h *home) sampleServer(name string, env map[string]string) map[string]any {
	e := map[string]string{"NEXUS_SAMPLE_CALL_LOG": h.log}
	for k, v := range env {
		e[k] = v
	}
	return map[string]any{"command": built.sample, "args": []string{name}, "env": e}
}

// sampleAllowAll lets the tests reach the mutating code-kg tools; policy has its own tests.
var sampleAllowAll = map[string]any{"default": map[string]any{"allow": []string{"*"}}}

// sampleHome configures both samples as children; roots is
// NEXUS_MCP_LOCAL_REPO_ROOTS for code-kg ("" for none).
func sampleHome(t *testing.T, roots string, extraServers map[string]any) *home {
	t.Helper()
	h := newHome(t, nil)
	codeEnv := map[string]string{}
	if roots != "" {
		codeEnv["NEXUS_MCP_LOCAL_REPO_ROOTS"] = roots
	}
	servers := map[string]any{
		"code-kg": h.sampleServer("code-kg", codeEnv),
		"doc-kg":  h.sampleServer("doc-kg", nil),
	}
	for k, v := range extraServers {
		servers[k] = v
	}
	h.writeConfig(map[string]any{"servers": servers, "policy": sampleAllowAll})
	return h
}

// sampleCall is a tools/call through the gateway with the raw JSON-RPC message
// and the decoded structuredContent.
type sampleCall struct {
	callResult
	raw []byte
	sc  map[string]any
}

func (c sampleCall) status() string { return jstr(c.sc, "status") }

// callSample calls a tool and checks what every sample answer must be: a
// result (not a JSON-RPC error) whose structuredContent is an object with a
// status, mirrored in the text content, bounded, and with no credential.
func callSample(t *testing.T, s *session, name string, args any) sampleCall {
	t.Helper()
	m := s.requestMsg("tools/call", map[string]any{"name": name, "arguments": args})
	if m.Error != nil {
		t.Fatalf("calling %s %v: JSON-RPC error %d: %s\nstderr:\n%s", name, args, m.Error.Code, m.Error.Message, s.stderr)
	}
	var c sampleCall
	c.raw = m.raw
	if err := json.Unmarshal(m.Result, &c.callResult); err != nil {
		t.Fatalf("decoding the result of %s: %v: %s", name, err, m.Result)
	}
	if len(c.StructuredContent) == 0 {
		t.Fatalf("%s: no structuredContent: %s", name, m.Result)
	}
	if err := json.Unmarshal(c.StructuredContent, &c.sc); err != nil || c.sc == nil {
		t.Fatalf("%s: structuredContent is not an object (%v): %s", name, err, c.StructuredContent)
	}
	if c.status() == "" {
		t.Errorf("%s: structuredContent has no status: %s", name, c.StructuredContent)
	}
	var fromText map[string]any
	if err := json.Unmarshal([]byte(c.text()), &fromText); err != nil {
		t.Errorf("%s: the text content is not the JSON answer: %v: %q", name, err, c.text())
	} else if a, b := mustMarshal(t, fromText), mustMarshal(t, c.sc); a != b {
		t.Errorf("%s: text content and structuredContent differ:\n text: %s\n structured: %s", name, a, b)
	}
	checkNoCredential(t, name, c.raw)
	// Bounded payloads: the largest answer of the dataset (a subgraph or a
	// context pack at their defaults) is a few kB; 64 KiB is far above any
	// bounded answer and far below an unbounded dump.
	if len(c.raw) > 64<<10 {
		t.Errorf("%s: answer of %d bytes is not bounded", name, len(c.raw))
	}
	return c
}

var (
	credentialAuthz  = regexp.MustCompile(`(?i)authorization\s*:`)
	credentialBearer = regexp.MustCompile(`(?i)bearer\s+[A-Za-z0-9._~+/=-]+`)
)

func checkNoCredential(t *testing.T, what string, raw []byte) {
	t.Helper()
	for _, re := range []*regexp.Regexp{credentialAuthz, credentialBearer} {
		if m := re.Find(raw); m != nil {
			t.Errorf("%s: the answer carries a credential-like %q: %s", what, m, raw)
		}
	}
	if strings.Contains(string(raw), "sample0000notasecret") {
		t.Errorf("%s: the answer carries the dataset's fake token: %s", what, raw)
	}
}

// callInvalid calls a tool with arguments its schema rejects and checks the
// JSON-RPC error the child answered passes through the gateway unchanged.
func callInvalid(t *testing.T, s *session, name string, args any) {
	t.Helper()
	_, rpcErr := s.request("tools/call", map[string]any{"name": name, "arguments": args})
	if rpcErr == nil || rpcErr.Code != -32602 || !strings.Contains(rpcErr.Message, "invalid params") {
		t.Errorf("%s %v: got %+v, want -32602 invalid params", name, args, rpcErr)
	}
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// at walks a path of object keys and array indexes ("0") through decoded JSON.
func jat(v any, path ...string) any {
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			var i int
			if _, err := fmt.Sscan(p, &i); err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func jstr(v any, path ...string) string { s, _ := jat(v, path...).(string); return s }
func jarr(v any, path ...string) []any  { a, _ := jat(v, path...).([]any); return a }
func jnum(v any, path ...string) float64 {
	n, ok := jat(v, path...).(float64)
	if !ok {
		return -1
	}
	return n
}

// field collects one string field of every object of a list.
func jfield(list []any, key string) []string {
	var out []string
	for _, it := range list {
		out = append(out, jstr(it, key))
	}
	return out
}

func jstrs(list []any) []string {
	var out []string
	for _, it := range list {
		s, _ := it.(string)
		out = append(out, s)
	}
	return out
}

// TestSamplesEveryToolThroughNexus lists and calls all 27 tools of both samples
// through `nexus serve`, by wire name, and checks each answer's content.
func TestSamplesEveryToolThroughNexus(t *testing.T) {
	t.Parallel()
	h := sampleHome(t, "", nil)
	s := h.serveStdio()

	tools := s.tools()
	if len(tools) != 27 {
		t.Errorf("tools/list has %d tools, want 27: %v", len(tools), mapKeys(tools))
	}
	for _, wire := range sampleWireNames() {
		raw, ok := tools[wire]
		if !ok {
			t.Errorf("tools/list lacks %s", wire)
			continue
		}
		var tool struct {
			Annotations struct {
				ReadOnlyHint *bool `json:"readOnlyHint"`
			} `json:"annotations"`
			InputSchema  map[string]any `json:"inputSchema"`
			OutputSchema map[string]any `json:"outputSchema"`
		}
		if err := json.Unmarshal(raw, &tool); err != nil {
			t.Fatalf("%s: %v", wire, err)
		}
		short := wire[strings.Index(wire, "__")+2:]
		if ro := tool.Annotations.ReadOnlyHint; ro == nil || *ro == sampleMutating[short] {
			t.Errorf("%s: readOnlyHint %v, want %v: %s", wire, ro, !sampleMutating[short], raw)
		}
		if tool.OutputSchema["type"] != "object" || jat(tool.OutputSchema, "properties", "status") == nil {
			t.Errorf("%s: no object outputSchema with a status: %s", wire, raw)
		}
		if tool.InputSchema["type"] != "object" || tool.InputSchema["additionalProperties"] != false {
			t.Errorf("%s: the closed inputSchema did not pass through: %s", wire, raw)
		}
	}

	type check func(t *testing.T, sc map[string]any)
	tests := []struct {
		tool   string
		args   map[string]any
		status string
		check  check
	}{
		{"code-kg__kg_latest_graph", map[string]any{"repository": samplePocket, "branch": "main"}, "ok", func(t *testing.T, sc map[string]any) {
			if jstr(sc, "graph", "graph_id") != "g-np-main-002" || jstr(sc, "graph", "commit") != sampleCommitNP002 {
				t.Errorf("latest graph of main: %v", sc["graph"])
			}
		}},
		{"code-kg__kg_graph_summary", map[string]any{"repository": sampleInfra}, "ok", func(t *testing.T, sc map[string]any) {
			// A single-branch repository needs no branch.
			if jstr(sc, "graph", "graph_id") != "g-ai-main-001" || jnum(sc, "counts", "files") != 6 || jnum(sc, "counts", "findings") != 3 || jnum(sc, "counts", "audit_risks") != 1 {
				t.Errorf("summary of aurora-infra: %v", sc)
			}
		}},
		{"code-kg__kg_list_audit_risks", map[string]any{"repository": samplePocket, "branch": "main", "severity": "high", "limit": 3}, "ok", func(t *testing.T, sc map[string]any) {
			risks := jarr(sc, "risks")
			if len(risks) != 3 || jnum(sc, "returned") != 3 || jnum(sc, "total") != 4 || sc["truncated"] != true {
				t.Errorf("high risks limited to 3: %v", sc)
			}
			for _, r := range risks {
				if jstr(r, "severity") != "high" || !strings.HasPrefix(jstr(r, "risk_id"), "np-risk-") {
					t.Errorf("risk %v", r)
				}
			}
		}},
		{"code-kg__kg_get_audit_risk", map[string]any{"graph_id": "g-np-main-002", "risk_id": "np-risk-echo-002"}, "ok", func(t *testing.T, sc map[string]any) {
			fs := jarr(sc, "findings")
			if jstr(sc, "risk", "risk_id") != "np-risk-echo-002" || len(fs) != 2 || jstr(fs, "0", "path") != sampleMeetingSvc {
				t.Errorf("risk np-risk-echo-002: %v", sc)
			}
		}},
		{"code-kg__kg_list_anomalies", map[string]any{"repository": samplePocket, "branch": "main"}, "ok", func(t *testing.T, sc map[string]any) {
			ids := jfield(jarr(sc, "anomalies"), "anomaly_id")
			want := []string{"np-anom-parse-001", "np-anom-cycle-002", "np-anom-orphan-003", "np-anom-import-004"}
			for _, id := range want {
				if !slices.Contains(ids, id) {
					t.Errorf("anomalies %v lack %s", ids, id)
				}
			}
			if jnum(sc, "total") != 4 || jat(sc, "anomalies", "0", "blocking") != true {
				t.Errorf("anomalies, blocking first: %v", sc)
			}
		}},
		{"code-kg__kg_get_anomaly", map[string]any{"graph_id": "g-np-main-002", "anomaly_id": "np-anom-cycle-002"}, "ok", func(t *testing.T, sc map[string]any) {
			if jstr(sc, "anomaly", "kind") != "import_cycle" || jstr(sc, "file_context", "file", "path") != "services/auth/app/session.py" {
				t.Errorf("anomaly np-anom-cycle-002: %v", sc)
			}
		}},
		{"code-kg__kg_resolve_finding", map[string]any{"graph_id": "g-np-main-002", "source_tool": "ruff", "finding_type": "ruff_e722_bare_except", "path": "services/notes/app/sync.py"}, "ready", func(t *testing.T, sc map[string]any) {
			// The 4-tuple is unique here: an action packet, without line.
			if jnum(sc, "finding", "line") != 88 || len(jarr(sc, "recommended_reads")) == 0 || len(jarr(sc, "recommended_commands")) == 0 || len(jarr(sc, "safety_notes")) == 0 || sc["file_context"] == nil || sc["impact"] == nil {
				t.Errorf("action packet: %v", sc)
			}
		}},
		{"code-kg__kg_file_context", map[string]any{"repository": samplePocket, "branch": "main", "path": sampleMeetingSvc}, "ok", func(t *testing.T, sc map[string]any) {
			lines := []float64{}
			for _, f := range jarr(sc, "findings") {
				lines = append(lines, jnum(f, "line"))
			}
			if jstr(sc, "graph_id") != "g-np-main-002" || !slices.Contains(lines, 1094) || !slices.Contains(lines, 1210) || len(jarr(sc, "relations")) == 0 {
				t.Errorf("file context of meeting_service.py: %v", sc)
			}
		}},
		{"code-kg__kg_impact", map[string]any{"repository": samplePocket, "branch": "main", "target": "services/auth/app/tokens.py", "max_depth": 1}, "ok", func(t *testing.T, sc map[string]any) {
			deps := jarr(sc, "dependents")
			if len(deps) == 0 || !slices.Contains(jstrs(jarr(sc, "affected_files")), "services/auth/app/api/login.py") {
				t.Errorf("impact of tokens.py: %v", sc)
			}
			for _, d := range deps {
				if jnum(d, "depth") != 1 {
					t.Errorf("max_depth 1 but dependent %v", d)
				}
			}
		}},
		{"code-kg__kg_compare_runs", map[string]any{"repository": samplePocket, "branch": "main"}, "ok", func(t *testing.T, sc map[string]any) {
			if jstr(sc, "base", "graph_id") != "g-np-main-001" || jstr(sc, "head", "graph_id") != "g-np-main-002" ||
				!slices.Contains(jstrs(jarr(sc, "files_added")), "services/echo/app/services/summary_service.py") ||
				!slices.Contains(jstrs(jarr(sc, "files_removed")), "services/notes/app/legacy_sync.py") {
				t.Errorf("diff 001..002: %v", sc)
			}
		}},
		{"code-kg__kg_compare_with_local_git", map[string]any{"repository": sampleInfra, "local_head": sampleCommitAI001}, "ok", func(t *testing.T, sc map[string]any) {
			if sc["verdict"] != "fresh" || sc["patch_allowed"] != true || jstr(sc, "graph_commit") != sampleCommitAI001 {
				t.Errorf("HEAD at the graph commit: %v", sc)
			}
		}},
		{"code-kg__kg_regenerate_dry_run", map[string]any{"repository": samplePocket, "branch": sampleEchoBranch}, "dry_run", func(t *testing.T, sc map[string]any) {
			if !slices.Contains(jstrs(jarr(sc, "requires")), "allow_dirty=true") || len(jarr(sc, "warnings")) == 0 || jat(sc, "would_regenerate", "worktree_dirty") != true {
				t.Errorf("plan on the dirty branch: %v", sc)
			}
		}},
		{"code-kg__kg_regenerate", map[string]any{"repository": sampleInfra}, "dry_run", func(t *testing.T, sc map[string]any) {
			if !strings.Contains(jstr(sc, "note"), "nothing was regenerated") || jstr(sc, "graph", "graph_id") != "g-ai-main-001" {
				t.Errorf("kg_regenerate without dry_run: %v", sc)
			}
		}},
		// Last of code-kg: it creates a run.
		{"code-kg__kg_regenerate_submit", map[string]any{"repository": sampleInfra, "confirmed_by_sr": true, "reason": "e2e"}, "completed", func(t *testing.T, sc map[string]any) {
			if jstr(sc, "new_graph", "graph_id") != "g-ai-main-002" || jstr(sc, "previous_graph_id") != "g-ai-main-001" {
				t.Errorf("real run on aurora-infra: %v", sc)
			}
		}},

		{"doc-kg__doc_kg_status", map[string]any{}, "ok", func(t *testing.T, sc map[string]any) {
			if sc["server"] != "nexus-doc-kg" || sc["schema"] != "nexus_doc_kg_mcp.v1" || sc["readonly"] != true || sc["mutating_tools"] == nil || len(jarr(sc, "mutating_tools")) != 0 {
				t.Errorf("status: %v", sc)
			}
		}},
		{"doc-kg__doc_kg_list_source_apps", map[string]any{}, "ok", func(t *testing.T, sc map[string]any) {
			apps := jarr(sc, "source_apps")
			if len(apps) != 4 {
				t.Errorf("source apps: %v", sc)
			}
			for _, a := range apps {
				if jstr(a, "source_app") == "capture" && (jstr(a, "graph_status") != "graph_unavailable" || jstr(a, "reason") != "not_generated") {
					t.Errorf("capture: %v", a)
				}
			}
		}},
		{"doc-kg__doc_kg_list_workspaces", map[string]any{"source_app": "nexus_pocket_notes"}, "ok", func(t *testing.T, sc map[string]any) {
			if got := jfield(jarr(sc, "workspaces"), "workspace"); !slices.Equal(got, []string{"ws-engineering", "ws-planning"}) {
				t.Errorf("workspaces of notes: %v", got)
			}
		}},
		{"doc-kg__doc_kg_list_projects", map[string]any{"source_app": "nexus_pocket_notes", "workspace": "ws-engineering"}, "ok", func(t *testing.T, sc map[string]any) {
			if got := jfield(jarr(sc, "projects"), "project"); !slices.Equal(got, []string{"prj-auth", "prj-deploy"}) {
				t.Errorf("projects of ws-engineering: %v", got)
			}
		}},
		{"doc-kg__doc_kg_list_documents", map[string]any{"source_app": "nexus_pocket_notes", "workspace": "ws-engineering", "project": "prj-auth", "limit": 2}, "ok", func(t *testing.T, sc map[string]any) {
			docs := jarr(sc, "documents")
			if len(docs) != 2 || jnum(sc, "total") != 4 || sc["truncated"] != true || jstr(docs, "0", "doc_id") != "doc-auth-refresh-bug" {
				t.Errorf("documents of prj-auth, limit 2, newest first: %v", sc)
			}
			for _, d := range docs {
				if jstr(d, "project") != "prj-auth" || jat(d, "body") != nil {
					t.Errorf("document outside the scope or with its body: %v", d)
				}
			}
		}},
		{"doc-kg__doc_kg_list_resources", map[string]any{"source_app": "manual"}, "ok", func(t *testing.T, sc map[string]any) {
			uris := jfield(jarr(sc, "resources"), "uri")
			if !slices.Equal(uris, []string{"nexus-doc://manual/ws-handbook/prj-runbooks", "nexus-doc://manual/ws-handbook/prj-onboarding"}) {
				t.Errorf("resources of manual: %v", uris)
			}
		}},
		{"doc-kg__doc_kg_subgraph", map[string]any{"source_app": "nexus_pocket_notes", "workspace": "ws-planning", "project": "prj-roadmap"}, "ok", func(t *testing.T, sc map[string]any) {
			ids := jfield(jarr(sc, "nodes"), "node_id")
			if !slices.Contains(ids, "doc-q3-planning") || !slices.Contains(ids, "ent-q3") || slices.Contains(ids, "doc-budget-2026") {
				t.Errorf("subgraph of prj-roadmap: %v", ids)
			}
			edges := jarr(sc, "edges")
			if len(edges) == 0 {
				t.Errorf("no edges: %v", sc)
			}
			for _, e := range edges {
				if !slices.Contains(ids, jstr(e, "from")) || !slices.Contains(ids, jstr(e, "to")) {
					t.Errorf("edge %v leaves the subgraph", e)
				}
			}
		}},
		{"doc-kg__doc_kg_node", map[string]any{"node_id": "ent-production"}, "ok", func(t *testing.T, sc map[string]any) {
			if jstr(sc, "node", "node_type") != "entity" || jstr(sc, "node", "name") != "production" {
				t.Errorf("node ent-production: %v", sc)
			}
		}},
		{"doc-kg__doc_kg_neighbors", map[string]any{"node_id": "doc-auth-refresh-bug"}, "ok", func(t *testing.T, sc map[string]any) {
			if ids := jfield(jarr(sc, "neighbors"), "node_id"); !slices.Contains(ids, "ent-auth-module") || !slices.Contains(ids, "ent-refresh-token") {
				t.Errorf("neighbors of doc-auth-refresh-bug: %v", ids)
			}
		}},
		{"doc-kg__doc_kg_relations", map[string]any{"node_id": "ent-auth-module", "direction": "in"}, "ok", func(t *testing.T, sc map[string]any) {
			rels := jarr(sc, "relations")
			if !slices.Contains(jfield(rels, "from"), "doc-auth-refresh-bug") {
				t.Errorf("relations into ent-auth-module: %v", sc)
			}
			for _, r := range rels {
				if jstr(r, "to") != "ent-auth-module" {
					t.Errorf("direction in, but %v", r)
				}
			}
		}},
		{"doc-kg__doc_kg_search", map[string]any{"query": "auth module bugs"}, "ok", func(t *testing.T, sc map[string]any) {
			res := jarr(sc, "results")
			if jstr(res, "0", "doc_id") != "doc-auth-refresh-bug" || jstr(res, "0", "title") == "" || jnum(res, "0", "score") <= 0 || len(res) > 20 {
				t.Errorf("search: %v", sc)
			}
		}},
		{"doc-kg__doc_kg_context_pack", map[string]any{"query": "production deployment checklist", "max_items": 2, "max_chars": 600}, "ok", func(t *testing.T, sc map[string]any) {
			items := jarr(sc, "items")
			if len(items) == 0 || len(items) > 2 || jnum(sc, "total_chars") > 600 || jstr(jarr(sc, "citations"), "0") != "doc-deploy-production" {
				t.Errorf("context pack: %v", sc)
			}
		}},
		{"doc-kg__doc_kg_query", map[string]any{"question": "which documents mention the auth module"}, "ok", func(t *testing.T, sc map[string]any) {
			if sc["method"] != "entity_lookup" || !slices.Contains(jfield(jarr(sc, "matched_entities"), "node_id"), "ent-auth-module") ||
				!slices.Contains(jfield(jarr(sc, "documents"), "doc_id"), "doc-auth-refresh-bug") {
				t.Errorf("query: %v", sc)
			}
		}},
	}
	called := map[string]bool{}
	for _, tc := range tests {
		called[tc.tool] = true
		t.Run(tc.tool, func(t *testing.T) {
			c := callSample(t, s, tc.tool, tc.args)
			if c.IsError || c.status() != tc.status {
				t.Fatalf("status %q isError %v, want %q: %s", c.status(), c.IsError, tc.status, c.StructuredContent)
			}
			tc.check(t, c.sc)
		})
	}
	for _, wire := range sampleWireNames() {
		if !called[wire] {
			t.Errorf("%s is not called by this test", wire)
		}
	}
	// Every call reached its child exactly once (memory was cold: all arguments differ).
	calls := h.calls()
	for _, name := range append(slices.Clone(sampleCodeTools), sampleDocTools...) {
		if calls[name] != 1 {
			t.Errorf("the child received %s %d times, want 1 (%v)", name, calls[name], calls)
		}
	}

	t.Run("credentials are redacted", func(t *testing.T) {
		// doc-onboarding-access holds a fake "Authorization: Bearer ..." line.
		for _, call := range []struct {
			tool string
			args map[string]any
		}{
			{"doc-kg__doc_kg_node", map[string]any{"node_id": "doc-onboarding-access"}},
			{"doc-kg__doc_kg_search", map[string]any{"query": "authorization bearer header access", "source_app": "manual"}},
			{"doc-kg__doc_kg_context_pack", map[string]any{"query": "authorization bearer header access", "max_chars": 8000, "max_items": 10}},
		} {
			c := callSample(t, s, call.tool, call.args) // checkNoCredential runs on every answer
			if c.IsError || !strings.Contains(string(c.raw), "doc-onboarding-access") {
				t.Errorf("%s: doc-onboarding-access not in the answer: %s", call.tool, c.StructuredContent)
			}
			if !strings.Contains(string(c.raw), "[redacted-credential]") {
				t.Errorf("%s: the credential line is not shown redacted: %s", call.tool, c.StructuredContent)
			}
		}
	})
}

// TestSamplesRulesThroughNexus checks the documented rules of both contracts
// through the gateway. Its subtests share one session and run in order: the
// regeneration ones change the code-kg dataset.
func TestSamplesRulesThroughNexus(t *testing.T) {
	t.Parallel()
	root, root2, outside := t.TempDir(), t.TempDir(), t.TempDir()
	writeGitHead(t, filepath.Join(root, "np"), sampleCommitNP002+"\n", nil)
	writeGitHead(t, filepath.Join(root, "np-ref"), "ref: refs/heads/main\n", map[string]string{"refs/heads/main": sampleCommitNPDocs + "\n"})
	writeGitHead(t, filepath.Join(root2, "np"), sampleCommitNP002+"\n", nil)
	writeGitHead(t, filepath.Join(outside, "np"), sampleCommitNP002+"\n", nil)
	if err := os.MkdirAll(filepath.Join(root, "nogit"), 0o755); err != nil {
		t.Fatal(err)
	}
	symlink := filepath.Join(root, "escape")
	if err := os.Symlink(filepath.Join(outside, "np"), symlink); err != nil {
		t.Fatal(err)
	}
	roots := root + string(os.PathListSeparator) + root2
	h := newHome(t, nil)
	h.writeConfig(map[string]any{"servers": map[string]any{
		"code-kg": h.sampleServer("code-kg", map[string]string{"NEXUS_MCP_LOCAL_REPO_ROOTS": roots}),
		"doc-kg":  h.sampleServer("doc-kg", nil),
		// The same sample with no allow-listed root.
		"cg-noroots": h.sampleServer("code-kg", nil),
	}, "policy": sampleAllowAll})
	s := h.serveStdio("--no-memory")

	latest := func(t *testing.T, branch string) string {
		t.Helper()
		c := callSample(t, s, "code-kg.kg_latest_graph", map[string]any{"repository": samplePocket, "branch": branch})
		return jstr(c.sc, "graph", "graph_id")
	}

	t.Run("finding ambiguity and disambiguation", func(t *testing.T) {
		tuple := map[string]any{"graph_id": "g-np-main-002", "source_tool": "bandit", "finding_type": "bandit_b324_hashlib", "path": sampleMeetingSvc}
		c := callSample(t, s, "code-kg__kg_resolve_finding", tuple)
		cands := jarr(c.sc, "candidates")
		var lines []float64
		for _, cand := range cands {
			lines = append(lines, jnum(cand, "line"))
		}
		slices.Sort(lines)
		if c.status() != "ambiguous" || !slices.Equal(lines, []float64{1094, 1210}) ||
			!slices.Equal(jstrs(jarr(c.sc, "required_disambiguation")), []string{"line", "message", "dedupe_key"}) || c.sc["finding"] != nil {
			t.Fatalf("4-tuple with two matches: %s", c.StructuredContent)
		}
		for _, by := range []struct {
			key  string
			val  any
			line float64
		}{
			{"line", 1210, 1210},
			{"line", 1094, 1094},
			{"dedupe_key", jstr(cands, "1", "dedupe_key"), jnum(cands, "1", "line")},
			{"message", jstr(cands, "0", "message"), jnum(cands, "0", "line")},
		} {
			args := map[string]any{by.key: by.val}
			for k, v := range tuple {
				args[k] = v
			}
			c := callSample(t, s, "code-kg.kg_resolve_finding", args)
			if c.status() != "ready" || jnum(c.sc, "finding", "line") != by.line || c.IsError {
				t.Errorf("disambiguated by %s=%v: %s", by.key, by.val, c.StructuredContent)
			}
		}
		args := map[string]any{"line": 1}
		for k, v := range tuple {
			args[k] = v
		}
		if c := callSample(t, s, "code-kg__kg_resolve_finding", args); c.status() != "not_found" || !c.IsError {
			t.Errorf("a line with no finding: %s", c.StructuredContent)
		}
	})

	t.Run("selector ambiguity", func(t *testing.T) {
		c := callSample(t, s, "code-kg__kg_latest_graph", map[string]any{"repository": samplePocket})
		if c.status() != "ambiguous" || len(jarr(c.sc, "candidates")) != 2 || !slices.Equal(jstrs(jarr(c.sc, "required_disambiguation")), []string{"branch", "graph_id"}) {
			t.Errorf("Nexus-Pocket without branch: %s", c.StructuredContent)
		}
		before := h.calls()["kg_regenerate"]
		for _, args := range []map[string]any{
			{"repository": samplePocket},
			{"repository": samplePocket, "dry_run": false, "confirmed_by_sr": true},
			{"graph_id": "g-np-main-001", "dry_run": false, "confirmed_by_sr": true}, // not the newest run
		} {
			c := callSample(t, s, "code-kg__kg_regenerate", args)
			if c.status() != "refused" || jstr(c.sc, "refusal") != "ambiguous_graph" || !c.IsError {
				t.Errorf("kg_regenerate %v: %s", args, c.StructuredContent)
			}
		}
		if got := h.calls()["kg_regenerate"] - before; got != 3 {
			t.Errorf("code-kg received %d kg_regenerate calls, want 3 (the * policy allows them)", got)
		}
		if c := callSample(t, s, "code-kg__kg_regenerate_submit", map[string]any{"repository": samplePocket, "confirmed_by_sr": true}); jstr(c.sc, "refusal") != "ambiguous_graph" || !c.IsError {
			t.Errorf("kg_regenerate_submit without branch: %s", c.StructuredContent)
		}
		if got := latest(t, "main"); got != "g-np-main-002" {
			t.Errorf("a refused regeneration created %s", got)
		}
	})

	t.Run("dry run by default", func(t *testing.T) {
		before := h.calls()["kg_regenerate"]
		for _, args := range []map[string]any{
			{"repository": samplePocket, "branch": "main"},
			// Confirmations without dry_run=false still change nothing.
			{"repository": samplePocket, "branch": "main", "confirmed_by_sr": true},
			{"repository": samplePocket, "branch": "main", "dry_run": true, "confirmed_by_sr": true},
		} {
			c := callSample(t, s, "code-kg__kg_regenerate", args)
			if c.status() != "dry_run" || c.IsError || !strings.Contains(jstr(c.sc, "note"), "dry run") ||
				!slices.Equal(jstrs(jarr(c.sc, "requires")), []string{"dry_run=false", "confirmed_by_sr=true"}) || c.sc["new_graph"] != nil {
				t.Errorf("kg_regenerate %v: %s", args, c.StructuredContent)
			}
		}
		if got := h.calls()["kg_regenerate"] - before; got != 3 {
			t.Errorf("code-kg received %d kg_regenerate calls, want 3", got)
		}
		if got := latest(t, "main"); got != "g-np-main-002" {
			t.Errorf("a dry run created %s", got)
		}
	})

	t.Run("missing confirmations", func(t *testing.T) {
		for _, tc := range []struct {
			tool    string
			args    map[string]any
			missing []string
		}{
			{"code-kg__kg_regenerate", map[string]any{"repository": samplePocket, "branch": "main", "dry_run": false}, []string{"confirmed_by_sr=true"}},
			{"code-kg__kg_regenerate", map[string]any{"repository": samplePocket, "branch": "main", "dry_run": false, "confirmed_by_sr": false}, []string{"confirmed_by_sr=true"}},
			{"code-kg__kg_regenerate_submit", map[string]any{"repository": samplePocket, "branch": "main"}, []string{"confirmed_by_sr=true"}},
			{"code-kg__kg_regenerate", map[string]any{"repository": samplePocket, "branch": sampleEchoBranch, "dry_run": false}, []string{"confirmed_by_sr=true", "allow_dirty=true"}},
			{"code-kg__kg_regenerate", map[string]any{"repository": samplePocket, "branch": sampleEchoBranch, "dry_run": false, "confirmed_by_sr": true}, []string{"allow_dirty=true"}},
			{"code-kg__kg_regenerate_submit", map[string]any{"repository": samplePocket, "branch": sampleEchoBranch, "confirmed_by_sr": true}, []string{"allow_dirty=true"}},
			{"code-kg__kg_regenerate_submit", map[string]any{"repository": samplePocket, "branch": sampleEchoBranch, "allow_dirty": true}, []string{"confirmed_by_sr=true"}},
		} {
			c := callSample(t, s, tc.tool, tc.args)
			if c.status() != "refused" || !c.IsError || !slices.Equal(jstrs(jarr(c.sc, "missing")), tc.missing) {
				t.Errorf("%s %v: %s, want missing %v", tc.tool, tc.args, c.StructuredContent, tc.missing)
			}
		}
		if got := latest(t, "main"); got != "g-np-main-002" {
			t.Errorf("a refused regeneration created %s", got)
		}
		if got := latest(t, sampleEchoBranch); got != "g-np-echo-001" {
			t.Errorf("a refused regeneration created %s", got)
		}
	})

	// Local git verdicts run on g-np-main-002 by id, before main gets new runs.
	t.Run("compare with local git", func(t *testing.T) {
		g := map[string]any{"graph_id": "g-np-main-002"}
		with := func(more map[string]any) map[string]any {
			out := map[string]any{}
			for k, v := range g {
				out[k] = v
			}
			for k, v := range more {
				out[k] = v
			}
			return out
		}
		for _, tc := range []struct {
			name    string
			args    map[string]any
			verdict string
			source  string
		}{
			{"head at the graph commit", with(map[string]any{"local_head": sampleCommitNP002}), "fresh", "local_head"},
			{"abbreviated head", with(map[string]any{"local_head": sampleCommitNP002[:7]}), "fresh", "local_head"},
			{"upper-case head", with(map[string]any{"local_head": strings.ToUpper(sampleCommitNP002)}), "fresh", "local_head"},
			{"by repository and branch", map[string]any{"repository": samplePocket, "branch": "main", "local_head": sampleCommitNP002}, "fresh", "local_head"},
			{"dirty, files unknown", with(map[string]any{"local_head": sampleCommitNP002, "local_dirty": true}), "stale_but_usable", "local_head"},
			{"dirty file without finding", with(map[string]any{"local_head": sampleCommitNP002, "local_dirty_files": []string{"README.md"}}), "stale_but_usable", "local_head"},
			{"dirty file with findings", with(map[string]any{"local_head": sampleCommitNP002, "local_dirty_files": []string{sampleMeetingSvc}}), "unsafe_for_patch_decision", "local_head"},
			{"one commit ahead, no finding touched", with(map[string]any{"local_head": sampleCommitNPDocs}), "stale_but_usable", "local_head"},
			{"ahead through a file with findings", with(map[string]any{"local_head": sampleCommitNPHead}), "stale", "local_head"},
			{"behind the graph", with(map[string]any{"local_head": sampleCommitNP001}), "stale", "local_head"},
			{"unknown commit", with(map[string]any{"local_head": "deadbeefcafe"}), "stale", "local_head"},
			{"head unknown", with(nil), "stale", "unknown"},
			{"local_path at the graph commit", with(map[string]any{"local_path": filepath.Join(root, "np")}), "fresh", "local_path"},
			{"local_path in the second root", with(map[string]any{"local_path": filepath.Join(root2, "np")}), "fresh", "local_path"},
			{"local_path through a symbolic ref", with(map[string]any{"local_path": filepath.Join(root, "np-ref")}), "stale_but_usable", "local_path"},
			{"local_path and local_head agree", with(map[string]any{"local_path": filepath.Join(root, "np"), "local_head": sampleCommitNP002}), "fresh", "local_head"},
			{"local_path and local_head disagree", with(map[string]any{"local_path": filepath.Join(root, "np"), "local_head": sampleCommitNP001}), "unsafe_for_patch_decision", "local_head"},
			{"local_path without .git", with(map[string]any{"local_path": filepath.Join(root, "nogit")}), "stale", "unknown"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c := callSample(t, s, "code-kg__kg_compare_with_local_git", tc.args)
				if c.status() != "ok" || c.IsError || c.sc["verdict"] != tc.verdict || c.sc["patch_allowed"] != (tc.verdict == "fresh") ||
					jstr(c.sc, "local_head_source") != tc.source || len(jarr(c.sc, "reasons")) == 0 || jstr(c.sc, "graph_id") != "g-np-main-002" {
					t.Errorf("got %s, want verdict %s from %s", c.StructuredContent, tc.verdict, tc.source)
				}
			})
		}
		for _, tc := range []struct {
			name, server, path string
		}{
			{"outside the roots", "code-kg", filepath.Join(outside, "np")},
			{"escaping with ..", "code-kg", root + "/../" + filepath.Base(outside) + "/np"},
			{"escaping with .. from inside", "code-kg", root + "/np/../../" + filepath.Base(outside) + "/np"},
			{"a symbolic link out of the root", "code-kg", symlink},
			{"relative", "code-kg", "np"},
			{"relative with ..", "code-kg", "../np"},
			{"no root allow-listed", "cg-noroots", filepath.Join(root, "np")},
		} {
			t.Run("refused "+tc.name, func(t *testing.T) {
				if strings.HasPrefix(tc.name, "escaping") && filepath.Dir(root) != filepath.Dir(outside) {
					t.Skip("the temporary directories do not share a parent")
				}
				c := callSample(t, s, tc.server+"__kg_compare_with_local_git", with(map[string]any{"local_path": tc.path}))
				if c.status() != "refused" || !c.IsError || jstr(c.sc, "refusal") != "local_path_not_allowed" || c.sc["verdict"] != nil {
					t.Errorf("local_path %q: %s", tc.path, c.StructuredContent)
				}
			})
		}
		c := callSample(t, s, "code-kg__kg_compare_with_local_git", with(map[string]any{"local_head": "not-a-commit"}))
		if c.status() != "refused" || !c.IsError {
			t.Errorf("a malformed local_head: %s", c.StructuredContent)
		}
	})

	t.Run("allow_dirty on the dirty branch", func(t *testing.T) {
		plan := callSample(t, s, "code-kg__kg_regenerate_dry_run", map[string]any{"repository": samplePocket, "branch": sampleEchoBranch})
		if plan.status() != "dry_run" || !slices.Contains(jstrs(jarr(plan.sc, "requires")), "allow_dirty=true") || len(jarr(plan.sc, "warnings")) == 0 {
			t.Errorf("plan: %s", plan.StructuredContent)
		}
		c := callSample(t, s, "code-kg__kg_regenerate", map[string]any{"repository": samplePocket, "branch": sampleEchoBranch,
			"dry_run": false, "confirmed_by_sr": true, "allow_dirty": true})
		warnings := jstrs(jarr(c.sc, "warnings"))
		if c.status() != "completed" || c.IsError || jstr(c.sc, "new_graph", "graph_id") != "g-np-echo-002" ||
			len(warnings) == 0 || !strings.Contains(warnings[0], "dirty") || !strings.Contains(warnings[0], "meeting_service.py") {
			t.Fatalf("real run on the dirty branch: %s", c.StructuredContent)
		}
		if got := latest(t, sampleEchoBranch); got != "g-np-echo-002" {
			t.Errorf("latest of the dirty branch is %s, want g-np-echo-002", got)
		}
		if got := latest(t, "main"); got != "g-np-main-002" {
			t.Errorf("a run on %s changed main: %s", sampleEchoBranch, got)
		}
	})

	t.Run("real run then latest and compare", func(t *testing.T) {
		c := callSample(t, s, "code-kg.kg_regenerate", map[string]any{"repository": samplePocket, "branch": "main",
			"dry_run": false, "confirmed_by_sr": true, "reason": "e2e real run"})
		if c.status() != "completed" || c.IsError || jstr(c.sc, "new_graph", "graph_id") != "g-np-main-003" ||
			jstr(c.sc, "previous_graph_id") != "g-np-main-002" || jstr(c.sc, "new_graph", "commit") != sampleCommitNPHead ||
			len(jarr(c.sc, "warnings")) != 0 {
			t.Fatalf("real run on main: %s", c.StructuredContent)
		}
		l := callSample(t, s, "code-kg__kg_latest_graph", map[string]any{"repository": samplePocket, "branch": "main"})
		if jstr(l.sc, "graph", "graph_id") != "g-np-main-003" || jstr(l.sc, "graph", "commit") != sampleCommitNPHead {
			t.Fatalf("kg_latest_graph after the run: %s", l.StructuredContent)
		}
		for _, args := range []map[string]any{
			{"repository": samplePocket, "branch": "main"},
			{"base_graph_id": "g-np-main-002", "head_graph_id": "g-np-main-003"},
			{"head_graph_id": "g-np-main-003"},
		} {
			d := callSample(t, s, "code-kg__kg_compare_runs", args)
			resolved := jfield(jarr(d.sc, "findings_resolved"), "finding_type")
			if d.status() != "ok" || jstr(d.sc, "base", "graph_id") != "g-np-main-002" || jstr(d.sc, "head", "graph_id") != "g-np-main-003" ||
				!slices.Equal(resolved, []string{"bandit_b113_request_without_timeout"}) || len(jarr(d.sc, "findings_added")) != 0 {
				t.Errorf("kg_compare_runs %v: %s", args, d.StructuredContent)
			}
		}
		// With a new latest run, 002 by id plus latest=true is ambiguous, and regenerating it is refused.
		amb := callSample(t, s, "code-kg__kg_latest_graph", map[string]any{"graph_id": "g-np-main-002", "latest": true})
		if amb.status() != "ambiguous" {
			t.Errorf("graph_id of an older run with latest=true: %s", amb.StructuredContent)
		}
		sub := callSample(t, s, "code-kg__kg_regenerate_submit", map[string]any{"repository": samplePocket, "branch": "main", "confirmed_by_sr": true})
		if sub.status() != "completed" || jstr(sub.sc, "new_graph", "graph_id") != "g-np-main-004" || jstr(sub.sc, "previous_graph_id") != "g-np-main-003" {
			t.Errorf("kg_regenerate_submit: %s", sub.StructuredContent)
		}
		if got := latest(t, "main"); got != "g-np-main-004" {
			t.Errorf("latest after submit: %s", got)
		}
	})

	t.Run("invalid arguments answer -32602 through the gateway", func(t *testing.T) {
		sel := map[string]any{"repository": samplePocket, "branch": "main"}
		search := map[string]any{"query": "auth"}
		for _, tc := range []struct {
			tool string
			args map[string]any
		}{
			{"code-kg__kg_list_audit_risks", with(sel, "limit", 0)},
			{"code-kg__kg_list_audit_risks", with(sel, "limit", 101)},
			{"code-kg__kg_list_anomalies", with(sel, "limit", -1)},
			{"code-kg__kg_list_anomalies", with(sel, "limit", 2.5)},
			{"code-kg__kg_file_context", with(with(sel, "path", sampleMeetingSvc), "limit", 101)},
			{"code-kg__kg_impact", with(with(sel, "target", sampleMeetingSvc), "max_depth", 0)},
			{"code-kg__kg_impact", with(with(sel, "target", sampleMeetingSvc), "max_depth", 6)},
			{"code-kg__kg_latest_graph", with(sel, "unknown_field", true)},
			{"code-kg.kg_latest_graph", with(sel, "Branch", "main")},
			{"code-kg__kg_latest_graph", with(sel, "latest", nil)},
			{"code-kg__kg_regenerate", with(sel, "dry_run", "false")},
			{"code-kg__kg_regenerate", with(sel, "confirmed", true)},
			{"code-kg__kg_resolve_finding", map[string]any{"graph_id": "g-np-main-002", "source_tool": "bandit", "path": sampleMeetingSvc}},
			{"code-kg__kg_resolve_finding", map[string]any{"graph_id": "g-np-main-002", "source_tool": "semgrep", "finding_type": "x", "path": "x"}},
			{"code-kg__kg_compare_with_local_git", with(sel, "local_head", strings.Repeat("a", 41))},
			{"doc-kg__doc_kg_search", with(search, "limit", 0)},
			{"doc-kg__doc_kg_search", with(search, "limit", 101)},
			{"doc-kg__doc_kg_list_documents", map[string]any{"limit": 101}},
			{"doc-kg__doc_kg_context_pack", with(search, "max_items", 0)},
			{"doc-kg__doc_kg_context_pack", with(search, "max_items", 11)},
			{"doc-kg__doc_kg_context_pack", with(search, "max_chars", 199)},
			{"doc-kg__doc_kg_context_pack", with(search, "max_chars", 8001)},
			{"doc-kg__doc_kg_search", with(search, "source_app", "slack")},
			{"doc-kg__doc_kg_search", with(search, "caller_app", "someone")},
			{"doc-kg__doc_kg_search", map[string]any{}},
			{"doc-kg.doc_kg_status", map[string]any{"verbose": true}},
		} {
			callInvalid(t, s, tc.tool, tc.args)
		}
		t.Run("an integer sent as a numeric string", func(t *testing.T) {
			for _, tc := range []struct {
				tool string
				args map[string]any
			}{
				{"code-kg__kg_list_anomalies", with(sel, "limit", "5")},
				{"code-kg__kg_impact", with(with(sel, "target", sampleMeetingSvc), "max_depth", "2")},
				{"doc-kg__doc_kg_search", with(search, "limit", "5")},
				{"doc-kg__doc_kg_context_pack", with(search, "max_chars", "500")},
			} {
				callInvalid(t, s, tc.tool, tc.args)
			}
		})
		// The bounds themselves are valid.
		for _, tc := range []struct {
			tool string
			args map[string]any
		}{
			{"code-kg__kg_list_audit_risks", with(sel, "limit", 1)},
			{"code-kg__kg_list_audit_risks", with(sel, "limit", 100)},
			{"code-kg__kg_impact", with(with(sel, "target", sampleMeetingSvc), "max_depth", 5)},
			{"doc-kg__doc_kg_search", with(search, "limit", 100)},
			{"doc-kg__doc_kg_context_pack", with(with(search, "max_chars", 200), "max_items", 10)},
			{"doc-kg__doc_kg_context_pack", with(with(search, "max_chars", 8000), "max_items", 1)},
		} {
			if c := callSample(t, s, tc.tool, tc.args); c.IsError || c.status() != "ok" {
				t.Errorf("%s %v: %s", tc.tool, tc.args, c.StructuredContent)
			}
		}
	})

	t.Run("doc-kg scope rules", func(t *testing.T) {
		notes := "nexus_pocket_notes"
		scopes := []struct {
			name  string
			scope map[string]any
		}{
			{"workspace without source_app", map[string]any{"workspace": "ws-engineering"}},
			{"project without source_app and workspace", map[string]any{"project": "prj-auth"}},
			{"project without workspace", map[string]any{"source_app": notes, "project": "prj-auth"}},
			{"project without source_app", map[string]any{"workspace": "ws-engineering", "project": "prj-auth"}},
			{"workspace of another source", map[string]any{"source_app": "manual", "workspace": "ws-engineering"}},
			{"project of another workspace", map[string]any{"source_app": notes, "workspace": "ws-planning", "project": "prj-auth"}},
		}
		tools := []struct {
			tool string
			args map[string]any
		}{
			{"doc-kg__doc_kg_list_documents", nil},
			{"doc-kg__doc_kg_list_resources", nil},
			{"doc-kg__doc_kg_subgraph", nil},
			{"doc-kg__doc_kg_search", map[string]any{"query": "auth"}},
			{"doc-kg__doc_kg_context_pack", map[string]any{"query": "auth"}},
			{"doc-kg__doc_kg_query", map[string]any{"question": "auth module"}},
		}
		for _, sc := range scopes {
			for _, tool := range tools {
				args := map[string]any{}
				for k, v := range tool.args {
					args[k] = v
				}
				for k, v := range sc.scope {
					args[k] = v
				}
				c := callSample(t, s, tool.tool, args)
				if c.status() != "invalid_scope" || !c.IsError || !strings.Contains(jstr(c.sc, "reason"), "never widened") ||
					c.sc["documents"] != nil || c.sc["results"] != nil || c.sc["items"] != nil || c.sc["nodes"] != nil {
					t.Errorf("%s with %s: %s", tool.tool, sc.name, c.StructuredContent)
				}
			}
		}
		if c := callSample(t, s, "doc-kg__doc_kg_list_projects", map[string]any{"source_app": notes, "workspace": "ws-handbook"}); c.status() != "invalid_scope" {
			t.Errorf("projects of a workspace of another source: %s", c.StructuredContent)
		}
		// A valid narrow scope answers only inside it.
		c := callSample(t, s, "doc-kg__doc_kg_search", map[string]any{"query": "deploy staging production", "source_app": notes, "workspace": "ws-engineering", "project": "prj-deploy"})
		if len(jarr(c.sc, "results")) == 0 {
			t.Errorf("search in prj-deploy: %s", c.StructuredContent)
		}
		for _, r := range jarr(c.sc, "results") {
			if jstr(r, "project") != "prj-deploy" || jstr(r, "workspace") != "ws-engineering" || jstr(r, "source_app") != notes {
				t.Errorf("result %v outside the scope", r)
			}
		}
	})

	t.Run("doc-kg graph_unavailable", func(t *testing.T) {
		for _, tc := range []struct {
			tool   string
			args   map[string]any
			reason string
		}{
			{"doc-kg__doc_kg_list_documents", map[string]any{"source_app": "capture"}, "not_generated"},
			{"doc-kg__doc_kg_list_workspaces", map[string]any{"source_app": "capture"}, "not_generated"},
			{"doc-kg__doc_kg_search", map[string]any{"query": "oauth", "source_app": "capture"}, "not_generated"},
			{"doc-kg__doc_kg_context_pack", map[string]any{"query": "oauth", "source_app": "capture"}, "not_generated"},
			{"doc-kg__doc_kg_subgraph", map[string]any{"source_app": "capture", "workspace": "ws-inbox"}, "not_generated"},
			{"doc-kg__doc_kg_node", map[string]any{"node_id": "doc-capture-oauth-article"}, "not_generated"},
			{"doc-kg__doc_kg_list_documents", map[string]any{"source_app": "echo", "caller_app": "external-app"}, "not_authorized"},
			{"doc-kg__doc_kg_search", map[string]any{"query": "weekly sync", "source_app": "echo", "caller_app": "external-app"}, "not_authorized"},
			{"doc-kg__doc_kg_query", map[string]any{"question": "auth module", "source_app": "echo", "caller_app": "external-app"}, "not_authorized"},
			{"doc-kg__doc_kg_node", map[string]any{"node_id": "doc-echo-incident-auth", "caller_app": "external-app"}, "not_authorized"},
			{"doc-kg__doc_kg_neighbors", map[string]any{"node_id": "doc-echo-incident-auth", "caller_app": "external-app"}, "not_authorized"},
		} {
			c := callSample(t, s, tc.tool, tc.args)
			if c.status() != "graph_unavailable" || jstr(c.sc, "reason") != tc.reason ||
				jstr(c.sc, "recommended_action") != "request_nexus_graph_generation_or_check_permissions" || strings.Contains(string(c.raw), "snippet") {
				t.Errorf("%s %v: %s, want graph_unavailable %s", tc.tool, tc.args, c.StructuredContent, tc.reason)
			}
		}
		// The same node is readable by a caller that is authorized.
		if c := callSample(t, s, "doc-kg__doc_kg_node", map[string]any{"node_id": "doc-echo-incident-auth", "caller_app": "codex"}); c.status() != "ok" {
			t.Errorf("codex on echo: %s", c.StructuredContent)
		}
		// Unscoped, the sources the caller cannot read are left out, and said so.
		c := callSample(t, s, "doc-kg__doc_kg_search", map[string]any{"query": "auth incident weekly sync staging", "caller_app": "external-app", "limit": 100})
		excluded := map[string]string{}
		for _, e := range jarr(c.sc, "scope", "excluded_sources") {
			excluded[jstr(e, "source_app")] = jstr(e, "reason")
		}
		if c.status() != "ok" || excluded["echo"] != "not_authorized" || excluded["capture"] != "not_generated" || len(jarr(c.sc, "results")) == 0 {
			t.Errorf("unscoped search by external-app: %s", c.StructuredContent)
		}
		for _, r := range jarr(c.sc, "results") {
			if src := jstr(r, "source_app"); src == "echo" || src == "capture" {
				t.Errorf("result %v from an excluded source", r)
			}
		}
	})

	t.Run("doc-kg search firsts", func(t *testing.T) {
		for query, want := range map[string]string{
			"auth module bugs":                "doc-auth-refresh-bug",
			"Q3 planning":                     "doc-q3-planning",
			"Q4 planning":                     "doc-q4-planning",
			"production deployment checklist": "doc-deploy-production",
			"deploying to staging":            "doc-deploy-staging",
		} {
			c := callSample(t, s, "doc-kg__doc_kg_search", map[string]any{"query": query, "limit": 3})
			if got := jstr(c.sc, "results", "0", "doc_id"); got != want {
				t.Errorf("search %q: first %q, want %q", query, got, want)
			}
		}
	})

	t.Run("bounded payloads", func(t *testing.T) {
		for _, maxChars := range []int{200, 450, 2000, 8000} {
			for _, maxItems := range []int{1, 3, 10} {
				c := callSample(t, s, "doc-kg__doc_kg_context_pack", map[string]any{"query": "auth deploy planning staging production", "max_chars": maxChars, "max_items": maxItems})
				items := jarr(c.sc, "items")
				used := 0
				for _, it := range items {
					used += len([]rune(jstr(it, "title"))) + len([]rune(jstr(it, "snippet")))
					if len(jarr(it, "relations")) > 5 {
						t.Errorf("an item with %d relations", len(jarr(it, "relations")))
					}
				}
				if len(items) == 0 || len(items) > maxItems || used > maxChars || int(jnum(c.sc, "total_chars")) != used || len(jarr(c.sc, "citations")) != len(items) {
					t.Errorf("max_chars %d max_items %d: %d items, %d chars (total_chars %v)", maxChars, maxItems, len(items), used, c.sc["total_chars"])
				}
			}
		}
		// Without bounds, the defaults apply (5 items, 2000 characters).
		c := callSample(t, s, "doc-kg__doc_kg_context_pack", map[string]any{"query": "auth deploy planning staging production"})
		if len(jarr(c.sc, "items")) > 5 || jnum(c.sc, "total_chars") > 2000 || jnum(c.sc, "max_chars") != 2000 || jnum(c.sc, "max_items") != 5 {
			t.Errorf("default context pack: %s", c.StructuredContent)
		}
		for _, tc := range []struct {
			tool, key string
			args      map[string]any
		}{
			{"doc-kg__doc_kg_list_documents", "documents", map[string]any{}},
			{"doc-kg__doc_kg_search", "results", map[string]any{"query": "auth deploy planning staging production meeting"}},
			{"doc-kg__doc_kg_query", "documents", map[string]any{"question": "staging"}},
			{"doc-kg__doc_kg_subgraph", "", map[string]any{}},
			{"doc-kg__doc_kg_neighbors", "neighbors", map[string]any{"node_id": "ent-auth-module"}},
			{"doc-kg__doc_kg_relations", "relations", map[string]any{"node_id": "ent-auth-module"}},
			{"code-kg__kg_list_anomalies", "anomalies", map[string]any{"repository": samplePocket, "branch": "main"}},
			{"code-kg__kg_list_audit_risks", "risks", map[string]any{"repository": samplePocket, "branch": "main"}},
			{"code-kg__kg_impact", "dependents", map[string]any{"repository": samplePocket, "branch": "main", "target": "shared/config.py", "max_depth": 5}},
			{"code-kg__kg_file_context", "findings", map[string]any{"repository": samplePocket, "branch": "main", "path": sampleMeetingSvc}},
		} {
			for _, limit := range []int{1, 2} {
				args := map[string]any{"limit": limit}
				for k, v := range tc.args {
					args[k] = v
				}
				c := callSample(t, s, tc.tool, args)
				if c.IsError || c.status() != "ok" {
					t.Errorf("%s %v: %s", tc.tool, args, c.StructuredContent)
					continue
				}
				if tc.key == "" { // subgraph: limit counts documents
					docs := 0
					for _, n := range jarr(c.sc, "nodes") {
						if jstr(n, "node_type") == "document" {
							docs++
						}
					}
					if docs != limit || c.sc["truncated"] != true {
						t.Errorf("%s limit %d: %d documents, truncated %v", tc.tool, limit, docs, c.sc["truncated"])
					}
					continue
				}
				list := jarr(c.sc, tc.key)
				if len(list) == 0 || len(list) > limit {
					t.Errorf("%s limit %d: %d %s: %s", tc.tool, limit, len(list), tc.key, c.StructuredContent)
				}
				if r, ok := c.sc["returned"]; ok && int(r.(float64)) != len(list) {
					t.Errorf("%s limit %d: returned %v but %d items", tc.tool, limit, r, len(list))
				}
				if total, ok := c.sc["total"]; ok && int(total.(float64)) > len(list) && c.sc["truncated"] != true {
					t.Errorf("%s limit %d: total %v > %d items but not truncated", tc.tool, limit, total, len(list))
				}
			}
		}
		// Snippets are bounded even when the document is long.
		n := callSample(t, s, "doc-kg__doc_kg_node", map[string]any{"node_id": "doc-auth-refresh-bug"})
		if sn := jstr(n.sc, "node", "snippet"); sn == "" || len([]rune(sn)) > 240 {
			t.Errorf("snippet of %d characters: %q", len([]rune(sn)), sn)
		}
	})

	t.Run("namespacing keeps the graphs apart", func(t *testing.T) {
		for _, name := range []string{"code-kg__doc_kg_status", "doc-kg__kg_latest_graph", "doc-kg.kg_regenerate"} {
			_, rpcErr := s.request("tools/call", map[string]any{"name": name, "arguments": map[string]any{}})
			if rpcErr == nil || rpcErr.Code != -32602 {
				t.Errorf("%s: got %+v, want -32602", name, rpcErr)
			}
		}
		// The child's own name of a tool only one graph has is that tool (README "Names").
		if _, rpcErr := s.request("tools/call", map[string]any{"name": "kg_latest_graph", "arguments": map[string]any{}}); rpcErr != nil && strings.Contains(rpcErr.Message, "unknown tool") {
			t.Errorf("kg_latest_graph, code-kg's own name for its tool: %+v", rpcErr)
		}
	})
}

// writeGitHead creates dir/.git/HEAD (and more files under .git).
func writeGitHead(t *testing.T, dir, head string, more map[string]string) {
	t.Helper()
	files := map[string]string{"HEAD": head}
	for k, v := range more {
		files[k] = v
	}
	for name, content := range files {
		p := filepath.Join(dir, ".git", filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSamplesRegenerationInvalidatesMemory: with memory on, a read is cached
// until a successful real regeneration on code-kg makes the cache stale.
func TestSamplesRegenerationInvalidatesMemory(t *testing.T) {
	t.Parallel()
	h := sampleHome(t, "", nil)
	s := h.serveStdio()
	sel := map[string]any{"repository": samplePocket, "branch": "main"}
	first := callSample(t, s, "code-kg__kg_latest_graph", sel)
	second := callSample(t, s, "code-kg__kg_latest_graph", sel)
	if first.cacheStatus() != "miss" || second.cacheStatus() != "hit" || jstr(second.sc, "graph", "graph_id") != "g-np-main-002" {
		t.Fatalf("memory: first %q, second %q: %s", first.cacheStatus(), second.cacheStatus(), second.StructuredContent)
	}
	// A refused (isError) regeneration changes nothing and keeps the cache.
	callSample(t, s, "code-kg__kg_regenerate_submit", sel)
	if c := callSample(t, s, "code-kg__kg_latest_graph", sel); jstr(c.sc, "graph", "graph_id") != "g-np-main-002" {
		t.Fatalf("after a refused submit: %s", c.StructuredContent)
	}
	run := callSample(t, s, "code-kg__kg_regenerate_submit", map[string]any{"repository": samplePocket, "branch": "main", "confirmed_by_sr": true})
	if run.status() != "completed" {
		t.Fatalf("submit: %s", run.StructuredContent)
	}
	after := callSample(t, s, "code-kg__kg_latest_graph", sel)
	if after.cacheStatus() == "hit" || jstr(after.sc, "graph", "graph_id") != "g-np-main-003" {
		t.Errorf("after a real run, kg_latest_graph answered %q from memory %q", jstr(after.sc, "graph", "graph_id"), after.cacheStatus())
	}
	if n := h.calls()["kg_latest_graph"]; n != 2 {
		t.Errorf("code-kg received %d kg_latest_graph calls, want 2 (one miss before, one after the run)", n)
	}
}

// startSampleHTTP runs `command [sample-server] name --http 127.0.0.1:0` (command
// is built.nexus or built.sample) and returns its /mcp URL, logged on stderr.
func startSampleHTTP(t *testing.T, h *home, command, name string, env ...string) string {
	t.Helper()
	args := []string{name, "--http", "127.0.0.1:0"}
	if command == built.nexus {
		args = append([]string{"sample-server"}, args...)
	}
	cmd := exec.Command(command, args...)
	cmd.Env = append(h.env("NEXUS_SAMPLE_CALL_LOG="+h.log), env...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	stderr := &lockedBuffer{}
	found := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`streamable HTTP on (http://\S+/mcp)`)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			stderr.Write([]byte(sc.Text() + "\n"))
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case url := <-found:
		return url
	case <-time.After(30 * time.Second):
		t.Fatalf("nexus sample-server %s --http did not start:\n%s", name, stderr)
	}
	return ""
}

// TestSamplesOverHTTPThroughNexus runs both samples as streamable-http children:
// code-kg is then Remote and refuses local_path even under an allow-listed root.
func TestSamplesOverHTTPThroughNexus(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	root := t.TempDir()
	writeGitHead(t, filepath.Join(root, "np"), sampleCommitNP002+"\n", nil)
	// code-kg through the CLI (`nexus sample-server --http`), doc-kg as the helper.
	codeURL := startSampleHTTP(t, h, built.nexus, "code-kg", "NEXUS_MCP_LOCAL_REPO_ROOTS="+root)
	docURL := startSampleHTTP(t, h, built.sample, "doc-kg")
	h.writeConfig(map[string]any{"servers": map[string]any{
		"code-kg": map[string]any{"transport": "streamable-http", "url": codeURL},
		"doc-kg":  map[string]any{"transport": "streamable-http", "url": docURL},
	}})
	s := h.serveStdio("--no-memory")
	checkDefaultPolicyListing(t, s.tools())

	c := callSample(t, s, "code-kg__kg_latest_graph", map[string]any{"repository": samplePocket, "branch": "main"})
	if c.IsError || jstr(c.sc, "graph", "graph_id") != "g-np-main-002" {
		t.Errorf("kg_latest_graph over HTTP: %s", c.StructuredContent)
	}
	c = callSample(t, s, "code-kg__kg_compare_with_local_git", map[string]any{"graph_id": "g-np-main-002", "local_path": filepath.Join(root, "np")})
	if c.status() != "refused" || !c.IsError || jstr(c.sc, "refusal") != "local_path_not_allowed" || !strings.Contains(jstr(c.sc, "reason"), "remote HTTP") {
		t.Errorf("local_path over HTTP: %s", c.StructuredContent)
	}
	c = callSample(t, s, "code-kg.kg_compare_with_local_git", map[string]any{"graph_id": "g-np-main-002", "local_head": sampleCommitNP002})
	if c.IsError || c.sc["verdict"] != "fresh" {
		t.Errorf("local_head over HTTP: %s", c.StructuredContent)
	}
	c = callSample(t, s, "doc-kg__doc_kg_search", map[string]any{"query": "Q4 planning", "limit": 2})
	if c.IsError || jstr(c.sc, "results", "0", "doc_id") != "doc-q4-planning" || len(jarr(c.sc, "results")) > 2 {
		t.Errorf("doc_kg_search over HTTP: %s", c.StructuredContent)
	}
	callInvalid(t, s, "doc-kg__doc_kg_search", map[string]any{"query": "x", "limit": 0})
	// The default policy refuses the mutating tool before it reaches the child.
	m := s.requestMsg("tools/call", map[string]any{"name": "code-kg__kg_regenerate", "arguments": map[string]any{"repository": sampleInfra}})
	if !strings.Contains(string(m.raw), "may not call") {
		t.Errorf("kg_regenerate under the default policy was not refused: %s", m.raw)
	}
	calls := h.calls()
	if calls["kg_latest_graph"] != 1 || calls["kg_compare_with_local_git"] != 2 || calls["doc_kg_search"] != 2 || calls["kg_regenerate"] != 0 {
		t.Errorf("calls that reached the HTTP children: %v", calls)
	}
}

// checkDefaultPolicyListing: the samples hold 27 tools, but under the default
// policy (read-only tools only) an agent's tools/list shows only the 25 it may
// call (aggregation.Gateway.visibleTools): the two regeneration tools are hidden.
func checkDefaultPolicyListing(t *testing.T, tools map[string]json.RawMessage) {
	t.Helper()
	for _, wire := range sampleWireNames() {
		_, listed := tools[wire]
		if mutating := sampleMutating[wire[strings.Index(wire, "__")+2:]]; listed == mutating {
			t.Errorf("%s: listed %v under the default policy", wire, listed)
		}
	}
	if len(tools) != 25 {
		t.Errorf("tools/list has %d tools, want the 25 read-only ones: %v", len(tools), mapKeys(tools))
	}
}

// TestDemo runs `nexus demo` end to end.
func TestDemo(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	out, stderr, code := h.nexus("demo")
	if code != 0 {
		t.Fatalf("nexus demo exited %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	if low := strings.ToLower(stderr); strings.Contains(low, "error") || strings.Contains(low, "panic") ||
		strings.Contains(low, "fatal") || strings.Contains(low, "warn") || strings.Contains(low, "fail") {
		t.Errorf("nexus demo wrote an error to stderr:\n%s", stderr)
	}
	must := func(what string, re string) {
		t.Helper()
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("the demo output lacks %s (/%s/):\n%s", what, re, out)
		}
	}
	must("the manifest size", `27 tools from 2 servers`)
	for _, tool := range sampleCodeTools {
		ro := "yes"
		if sampleMutating[tool] {
			ro = "no"
		}
		must("the manifest row of "+tool, `(?m)^\s+code-kg\.`+tool+`\s+code-kg__`+tool+`\s+`+ro+`\s*$`)
	}
	for _, tool := range sampleDocTools {
		must("the manifest row of "+tool, `(?m)^\s+doc-kg\.`+tool+`\s+doc-kg__`+tool+`\s+yes\s*$`)
	}
	must("a successful code-kg read", `(?s)nexus call code-kg\.kg_latest_graph.*?\n\s+ok in [^\n]*\n[^\n]*"graph_id":"g-np-main-002"`)
	must("a successful doc-kg read", `(?s)nexus call doc-kg\.doc_kg_search --args '\{"query":"open bugs[^\n]*\n\s+ok in [^\n]*\n[^\n]*"doc_id":"doc-auth-refresh-bug"`)
	must("the refused kg_regenerate", `(?s)nexus call code-kg\.kg_regenerate --args[^\n]*\n\s+refused by the policy in [^\n]*, without reaching the server\n\s+agent "anonymous" may not call "code-kg\.kg_regenerate"`)
	must("how to grant it", `To grant it: nexus policy allow --agent anonymous code-kg\.kg_regenerate`)
	must("a miss then a hit", `(?s)memory: miss\n[^\n]*\n[^\n]*nexus call doc-kg\.doc_kg_search[^\n]*\n\s+ok in [^\n]*memory: hit`)
	if strings.Contains(out, "error -32") {
		t.Errorf("a demo call failed with a JSON-RPC error:\n%s", out)
	}
	if n := strings.Count(out, "refused by the policy") + strings.Count(out, "answered with an error"); n != 1 {
		t.Errorf("%d calls refused or failed in the demo, want only kg_regenerate:\n%s", n, out)
	}
	// The demo's NEXUS_HOME is throw-away.
	if m := regexp.MustCompile(`NEXUS_HOME=(\S+)\)`).FindStringSubmatch(out); m == nil {
		t.Errorf("the demo does not show its NEXUS_HOME:\n%s", out)
	} else if m[1] == h.dir {
		t.Errorf("the demo used the caller's NEXUS_HOME %s", h.dir)
	} else if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Errorf("the demo left its NEXUS_HOME %s behind (%v)", m[1], err)
	}
}

// TestDemoServe serves the demo gateway over stdio, as Claude Desktop would run it.
func TestDemoServe(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	s := startSession(t, h.env(), built.nexus, "demo", "--serve")
	checkDefaultPolicyListing(t, s.tools())
	m := s.requestMsg("tools/call", map[string]any{"name": "code-kg__kg_regenerate", "arguments": map[string]any{"repository": sampleInfra}})
	if !strings.Contains(string(m.raw), `may not call \"code-kg.kg_regenerate\"`) || !strings.Contains(string(m.raw), "nexus policy allow") {
		t.Errorf("kg_regenerate through demo --serve was not refused with the policy's explanation: %s", m.raw)
	}
	c := callSample(t, s, "code-kg__kg_latest_graph", map[string]any{"repository": samplePocket, "branch": "main"})
	if c.IsError || jstr(c.sc, "graph", "graph_id") != "g-np-main-002" {
		t.Errorf("kg_latest_graph: %s", c.StructuredContent)
	}
	c = callSample(t, s, "doc-kg.doc_kg_search", map[string]any{"query": "Q3 planning", "limit": 3})
	if c.IsError || jstr(c.sc, "results", "0", "doc_id") != "doc-q3-planning" {
		t.Errorf("doc_kg_search: %s", c.StructuredContent)
	}
	s.mu.Lock()
	stdout := string(s.stdout)
	s.mu.Unlock()
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("demo --serve wrote a non-JSON-RPC line on stdout: %q", line)
		}
	}
}
