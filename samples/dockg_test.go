package samples

import (
	"strings"
	"testing"
)

func firstDoc(t *testing.T, b map[string]any, key string) string {
	t.Helper()
	items, _ := b[key].([]any)
	if len(items) == 0 {
		t.Fatalf("no %s in %v", key, b)
	}
	id, _ := items[0].(map[string]any)["doc_id"].(string)
	return id
}

func TestDocKGTools(t *testing.T) {
	s := inProcess(t, NewDocKG(Options{}))
	notes := map[string]any{"source_app": "nexus_pocket_notes"}
	unavailable := func(reason string) func(*testing.T, map[string]any) {
		return func(t *testing.T, b map[string]any) {
			if b["reason"] != reason || b["recommended_action"] != "request_nexus_graph_generation_or_check_permissions" {
				t.Errorf("graph_unavailable %v", b)
			}
		}
	}
	cases := []struct {
		tool    string
		args    map[string]any
		status  string
		isError bool
		check   func(t *testing.T, b map[string]any)
	}{
		{"doc_kg_status", map[string]any{}, "ok", false, func(t *testing.T, b map[string]any) {
			if b["readonly"] != true || len(b["mutating_tools"].([]any)) != 0 || b["schema"] != "nexus_doc_kg_mcp.v1" || b["server"] != "nexus-doc-kg" {
				t.Errorf("status %v", b)
			}
		}},
		{"doc_kg_list_source_apps", map[string]any{"caller_app": "external-app"}, "ok", false, func(t *testing.T, b map[string]any) {
			got := map[string]string{}
			for _, x := range b["source_apps"].([]any) {
				m := x.(map[string]any)
				r, _ := m["reason"].(string)
				got[m["source_app"].(string)] = r
			}
			if got["capture"] != "not_generated" || got["echo"] != "not_authorized" || got["manual"] != "" {
				t.Errorf("sources %v", got)
			}
		}},
		{"doc_kg_list_workspaces", notes, "ok", false, func(t *testing.T, b map[string]any) {
			if b["total"].(float64) != 2 {
				t.Errorf("workspaces %v", b)
			}
		}},
		{"doc_kg_list_workspaces", map[string]any{"source_app": "capture"}, "graph_unavailable", false, unavailable("not_generated")},
		{"doc_kg_list_projects", with(notes, "workspace", "ws-engineering"), "ok", false, nil},
		{"doc_kg_list_projects", with(notes, "workspace", "ws-meetings"), "invalid_scope", true, nil}, // echo's workspace
		{"doc_kg_list_documents", with(notes, "workspace", "ws-engineering", "project", "prj-auth"), "ok", false, func(t *testing.T, b map[string]any) {
			if b["total"].(float64) != 4 {
				t.Errorf("auth documents %v", b["total"])
			}
		}},
		{"doc_kg_list_documents", map[string]any{"workspace": "ws-engineering"}, "invalid_scope", true, nil},
		{"doc_kg_list_documents", with(notes, "project", "prj-auth"), "invalid_scope", true, nil},
		{"doc_kg_list_documents", with(notes, "workspace", "ws-planning", "project", "prj-auth"), "invalid_scope", true, nil},
		{"doc_kg_list_documents", map[string]any{"limit": 3}, "ok", false, func(t *testing.T, b map[string]any) {
			if b["returned"].(float64) != 3 || b["truncated"] != true {
				t.Errorf("limit %v", b)
			}
			excluded := b["scope"].(map[string]any)["excluded_sources"].([]any)
			if len(excluded) != 1 {
				t.Errorf("excluded %v", excluded)
			}
		}},
		{"doc_kg_list_documents", map[string]any{"kind": "capture"}, "ok", false, func(t *testing.T, b map[string]any) {
			if b["total"].(float64) != 0 { // capture has no generated graph: never listed
				t.Errorf("capture documents leaked: %v", b)
			}
		}},
		{"doc_kg_list_documents", map[string]any{"source_app": "echo", "caller_app": "external-app"}, "graph_unavailable", false, unavailable("not_authorized")},
		{"doc_kg_list_resources", notes, "ok", false, func(t *testing.T, b map[string]any) {
			r := b["resources"].([]any)[0].(map[string]any)
			if !strings.HasPrefix(r["uri"].(string), "nexus-doc://nexus_pocket_notes/") || b["total"].(float64) != 4 {
				t.Errorf("resources %v", b)
			}
		}},
		{"doc_kg_subgraph", with(notes, "workspace", "ws-planning", "project", "prj-roadmap"), "ok", false, func(t *testing.T, b map[string]any) {
			if len(b["nodes"].([]any)) < 5 || len(b["edges"].([]any)) < 5 {
				t.Errorf("subgraph %v", b)
			}
		}},
		{"doc_kg_subgraph", map[string]any{"source_app": "capture"}, "graph_unavailable", false, unavailable("not_generated")},
		{"doc_kg_node", map[string]any{"node_id": "doc-auth-refresh-bug"}, "ok", false, nil},
		{"doc_kg_node", map[string]any{"node_id": "ent-q4"}, "ok", false, nil},
		{"doc_kg_node", map[string]any{"node_id": "doc-onboarding-access"}, "ok", false, func(t *testing.T, b map[string]any) {
			if !strings.Contains(b["node"].(map[string]any)["snippet"].(string), "[redacted-credential]") {
				t.Errorf("credential not redacted: %v", b["node"])
			}
		}},
		{"doc_kg_node", map[string]any{"node_id": "doc-capture-dashboard"}, "graph_unavailable", false, unavailable("not_generated")},
		{"doc_kg_node", map[string]any{"node_id": "doc-echo-weekly-0505", "caller_app": "external-app"}, "graph_unavailable", false, unavailable("not_authorized")},
		{"doc_kg_node", map[string]any{"node_id": "doc-nope"}, "not_found", true, nil},
		{"doc_kg_neighbors", map[string]any{"node_id": "ent-production", "caller_app": "external-app"}, "ok", false, func(t *testing.T, b map[string]any) {
			for _, n := range b["neighbors"].([]any) {
				if src := n.(map[string]any)["source_app"]; src == "echo" || src == "capture" {
					t.Errorf("neighbor from an unreadable source: %v", n)
				}
			}
			if b["omitted_unreadable"].(float64) == 0 {
				t.Errorf("no omitted neighbors reported")
			}
		}},
		{"doc_kg_relations", map[string]any{"node_id": "doc-q4-planning", "direction": "out"}, "ok", false, func(t *testing.T, b map[string]any) {
			if n := len(b["relations"].([]any)); n != 4 {
				t.Errorf("out relations %d", n)
			}
		}},
		{"doc_kg_relations", map[string]any{"node_id": "doc-q4-planning", "relation_type": "follows_up", "direction": "in"}, "ok", false, nil},
		{"doc_kg_search", map[string]any{"query": "auth module bugs"}, "ok", false, func(t *testing.T, b map[string]any) {
			if id := firstDoc(t, b, "results"); id != "doc-auth-refresh-bug" {
				t.Errorf("first result %s", id)
			}
			r := b["results"].([]any)[0].(map[string]any)
			if r["title"] == "" || r["snippet"] == "" || r["score"].(float64) <= 0 {
				t.Errorf("citation %v", r)
			}
		}},
		{"doc_kg_search", map[string]any{"query": "bug in the auth module"}, "ok", false, func(t *testing.T, b map[string]any) {
			if id := firstDoc(t, b, "results"); id != "doc-auth-refresh-bug" {
				t.Errorf("paraphrase first result %s", id)
			}
		}},
		{"doc_kg_search", with(notes, "query", "deploying to staging"), "ok", false, func(t *testing.T, b map[string]any) {
			if id := firstDoc(t, b, "results"); id != "doc-deploy-staging" {
				t.Errorf("staging first result %s", id)
			}
		}},
		{"doc_kg_search", with(notes, "query", "production deployment checklist"), "ok", false, func(t *testing.T, b map[string]any) {
			if id := firstDoc(t, b, "results"); id != "doc-deploy-production" {
				t.Errorf("production first result %s", id)
			}
		}},
		{"doc_kg_search", map[string]any{"query": "Q3 planning"}, "ok", false, func(t *testing.T, b map[string]any) {
			if id := firstDoc(t, b, "results"); id != "doc-q3-planning" {
				t.Errorf("Q3 first result %s", id)
			}
		}},
		{"doc_kg_search", map[string]any{"query": "Q4 planning"}, "ok", false, func(t *testing.T, b map[string]any) {
			if id := firstDoc(t, b, "results"); id != "doc-q4-planning" {
				t.Errorf("Q4 first result %s", id)
			}
		}},
		{"doc_kg_search", map[string]any{"query": "auth", "limit": 2}, "ok", false, func(t *testing.T, b map[string]any) {
			if b["returned"].(float64) != 2 || b["truncated"] != true {
				t.Errorf("search limit %v", b)
			}
		}},
		{"doc_kg_search", map[string]any{"query": "refresh token", "source_app": "capture"}, "graph_unavailable", false, unavailable("not_generated")},
		{"doc_kg_search", map[string]any{"query": "staging", "workspace": "ws-engineering"}, "invalid_scope", true, nil},
		{"doc_kg_context_pack", map[string]any{"query": "staging vs production deploy", "max_items": 3, "max_chars": 600}, "ok", false, func(t *testing.T, b map[string]any) {
			items := b["items"].([]any)
			if len(items) == 0 || len(items) > 3 || b["total_chars"].(float64) > 600 {
				t.Errorf("pack %v", b)
			}
			it := items[0].(map[string]any)
			if it["snippet"] == "" || it["relations"] == nil || len(b["citations"].([]any)) != len(items) {
				t.Errorf("pack item %v", it)
			}
		}},
		{"doc_kg_context_pack", map[string]any{"query": "x", "project": "prj-auth"}, "invalid_scope", true, nil},
		{"doc_kg_query", map[string]any{"question": "Which documents mention the auth module?"}, "ok", false, func(t *testing.T, b map[string]any) {
			if b["method"] != "entity_lookup" || len(b["documents"].([]any)) < 4 {
				t.Errorf("query %v", b)
			}
		}},
		{"doc_kg_query", map[string]any{"question": "mail queue delays"}, "ok", false, func(t *testing.T, b map[string]any) {
			if b["method"] != "text_search" {
				t.Errorf("query method %v", b["method"])
			}
		}},
		{"doc_kg_query", map[string]any{"question": "Q4", "source_app": "echo", "caller_app": "external-app"}, "graph_unavailable", false, unavailable("not_authorized")},
	}
	for _, c := range cases {
		t.Run(c.tool, func(t *testing.T) {
			b := s.expect(c.tool, c.args, c.status, c.isError)
			if c.check != nil {
				c.check(t, b)
			}
		})
	}
}

func TestRank(t *testing.T) {
	for in, want := range map[string]string{"deploying": "deploy", "deployment": "deploy", "planning": "plan", "priorities": "priority",
		"bugs": "bug", "access": "access", "releases": "release", "fixes": "fix", "planned": "plan", "processes": "process", "notes": "note"} {
		if got := stem(in); got != want {
			t.Errorf("stem(%q) = %q, want %q", in, got, want)
		}
	}
	long := strings.Repeat("word ", 100) + "needle " + strings.Repeat("tail ", 100)
	sn := snippet(long, "needle", 80)
	if !strings.Contains(sn, "needle") || len([]rune(sn)) > 80 {
		t.Errorf("snippet %q", sn)
	}
}
