package samples

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/server"
)

// DocKGSchema is the schema doc-kg declares in doc_kg_status.
const DocKGSchema = "nexus_doc_kg_mcp.v1"

// Bounds of doc-kg answers.
const (
	docDefaultLimit = 20
	docMaxLimit     = 100
	snippetChars    = 240
	maxRelations    = 200
)

var (
	callerApps = []string{"codex", "nexus-pocket", "external-app"}
	sourceApps = []string{"nexus_pocket_notes", "echo", "capture", "manual"}
	relTypes   = []string{"mentions", "references", "follows_up", "decided_in"}
)

// docKG is one doc-kg sample server. Everything it serves is read-only.
type docKG struct {
	data *docDataset
}

// scopeArgs are the filters of the contract.
type scopeArgs struct {
	CallerApp string `json:"caller_app"`
	SourceApp string `json:"source_app"`
	Workspace string `json:"workspace"`
	Project   string `json:"project"`
}

var (
	callerProp = pEnum("Application calling on behalf of the user; scopes and rights depend on it. Defaults to codex.", callerApps...)
	scopeSpec  = inputSpec{Props: map[string]prop{
		"caller_app": callerProp,
		"source_app": pEnum("Documentary source.", sourceApps...),
		"workspace":  pString("Workspace id; requires source_app.", 100),
		"project":    pString("Project id; requires source_app and workspace.", 100),
	}}
	callerSpec = inputSpec{Props: map[string]prop{"caller_app": callerProp}}
	docLimit   = pInt("Maximum number of items returned.", 1, docMaxLimit, docDefaultLimit)
)

// NewDocKG returns the doc-kg sample server ("nexus-doc-kg"). Every tool is
// read-only; there is no regeneration tool.
func NewDocKG(opts Options) *server.MCPServer { return newDocKG(opts).s }

func newDocKG(opts Options) *registry {
	k := &docKG{data: newDocDataset()}
	r := newRegistry("nexus-doc-kg", Version,
		"Sample of the Nexus documentary knowledge graph (read-only). workspace requires source_app; project requires "+
			"source_app and workspace; scopes are never widened. Prefer citations to long text.",
		opts.CallLog)
	k.register(r)
	return r
}

func (k *docKG) register(r *registry) {
	st := []string{"ok", "graph_unavailable", "invalid_scope", "not_found"}
	list := func(key string) json.RawMessage {
		return outputSchema(st, map[string]string{key: "array", "total": "integer", "returned": "integer", "truncated": "boolean"})
	}

	register(r, toolMeta{name: "doc_kg_status", title: "Doc KG status", readOnly: true,
		description: "API availability, scopes, documentary graphs and limits. Declares readonly=true and mutating_tools=[].",
		in:          callerSpec, out: outputSchema([]string{"ok"}, map[string]string{"server": "string", "schema": "string", "readonly": "boolean", "mutating_tools": "array", "source_apps": "array", "limits": "object"})}, k.status)
	register(r, toolMeta{name: "doc_kg_list_source_apps", title: "List source apps", readOnly: true,
		description: "Documentary sources and whether their graph is available to the caller.",
		in:          callerSpec, out: list("source_apps")}, k.listSourceApps)
	register(r, toolMeta{name: "doc_kg_list_workspaces", title: "List workspaces", readOnly: true,
		description: "Workspaces of one source_app.",
		in:          callerSpec.with(map[string]prop{"source_app": scopeSpec.Props["source_app"], "limit": docLimit}, "source_app"),
		out:         list("workspaces")}, k.listWorkspaces)
	register(r, toolMeta{name: "doc_kg_list_projects", title: "List projects", readOnly: true,
		description: "Projects of one workspace (source_app and workspace are both required).",
		in: callerSpec.with(map[string]prop{"source_app": scopeSpec.Props["source_app"], "workspace": scopeSpec.Props["workspace"], "limit": docLimit},
			"source_app", "workspace"), out: list("projects")}, k.listProjects)
	register(r, toolMeta{name: "doc_kg_list_documents", title: "List documents", readOnly: true,
		description: "Documents the caller may read in a scope, newest first, as citations without bodies.",
		in:          scopeSpec.with(map[string]prop{"kind": pEnum("Only documents of this kind.", "note", "capture", "transcript", "manual_page"), "limit": docLimit}),
		out:         list("documents")}, k.listDocuments)
	register(r, toolMeta{name: "doc_kg_list_resources", title: "List resources", readOnly: true,
		description: "Documentary resources representing a scope: one per project, with a nexus-doc:// URI and a document count.",
		in:          scopeSpec.with(map[string]prop{"limit": docLimit}), out: list("resources")}, k.listResources)
	register(r, toolMeta{name: "doc_kg_subgraph", title: "Subgraph", readOnly: true,
		description: "Nodes (documents of the scope, up to limit, and the entities they link to) and the relations among them.",
		in:          scopeSpec.with(map[string]prop{"limit": docLimit}), out: outputSchema(st, map[string]string{"nodes": "array", "edges": "array", "truncated": "boolean"})}, k.subgraph)
	nodeSpec := callerSpec.with(map[string]prop{"node_id": pString("Node id: a document (doc-...) or an entity (ent-...).", 100)}, "node_id")
	register(r, toolMeta{name: "doc_kg_node", title: "Node", readOnly: true,
		description: "One documentary node the caller may read; documents come with a bounded snippet, not their full text.",
		in:          nodeSpec, out: outputSchema(st, map[string]string{"node": "object"})}, k.node)
	register(r, toolMeta{name: "doc_kg_neighbors", title: "Neighbors", readOnly: true,
		description: "Nodes directly related to a node, restricted to what the caller may read.",
		in:          nodeSpec.with(map[string]prop{"relation_type": pEnum("Only this relation type.", relTypes...), "limit": docLimit}),
		out:         outputSchema(st, map[string]string{"node_id": "string", "neighbors": "array", "truncated": "boolean"})}, k.neighbors)
	register(r, toolMeta{name: "doc_kg_relations", title: "Relations", readOnly: true,
		description: "Relations around a node, by direction, restricted to what the caller may read.",
		in: nodeSpec.with(map[string]prop{
			"direction":     {Type: "string", Description: "Relations leaving the node (out), reaching it (in) or both.", Enum: []string{"in", "out", "both"}, Default: "both"},
			"relation_type": pEnum("Only this relation type.", relTypes...), "limit": docLimit,
		}), out: outputSchema(st, map[string]string{"node_id": "string", "relations": "array", "truncated": "boolean"})}, k.relations)
	searchSpec := scopeSpec.with(map[string]prop{"query": pString("What to look for.", 500), "limit": docLimit}, "query")
	register(r, toolMeta{name: "doc_kg_search", title: "Search documents", readOnly: true,
		description: "Ranked search of the documentary RAG in a scope (term scoring over title and body). Answers citations: doc id, title, snippet, score.",
		in:          searchSpec, out: outputSchema(st, map[string]string{"query": "string", "results": "array", "total": "integer", "returned": "integer", "truncated": "boolean"})}, k.search)
	register(r, toolMeta{name: "doc_kg_context_pack", title: "Context pack", readOnly: true,
		description: "A bounded context pack for a question: the best documents of the scope as citations with snippets and their KG relations, within max_items and max_chars.",
		in: scopeSpec.with(map[string]prop{
			"query":     pString("The question the pack should support.", 500),
			"max_items": pInt("Maximum number of documents in the pack.", 1, 10, 5),
			"max_chars": pInt("Maximum characters of titles and snippets in the pack.", 200, 8000, 2000),
		}, "query"), out: outputSchema(st, map[string]string{"items": "array", "citations": "array", "total_chars": "integer", "truncated": "boolean"})}, k.contextPack)
	register(r, toolMeta{name: "doc_kg_query", title: "Query the KG", readOnly: true,
		description: "Ask the documentary KG in a bounded scope: entities named in the question and the documents linked to them, ranked; falls back to text search (method says which).",
		in: scopeSpec.with(map[string]prop{"question": pString("The question, e.g. which documents mention the auth module.", 500), "limit": docLimit},
			"question"), out: outputSchema(st, map[string]string{"method": "string", "matched_entities": "array", "documents": "array", "relations": "array"})}, k.query)
}

// Access and scope.

func caller(c string) string {
	if c == "" {
		return "codex"
	}
	return c
}

func (k *docKG) source(id string) *sourceApp {
	for i := range k.data.sources {
		if k.data.sources[i].ID == id {
			return &k.data.sources[i]
		}
	}
	return nil
}

// unavailable says why the caller cannot read a source's graph, or "".
func (k *docKG) unavailable(callerApp, src string) string {
	s := k.source(src)
	switch {
	case s == nil:
		return "source_missing"
	case slices.Contains(s.DeniedTo, caller(callerApp)):
		return "not_authorized"
	case !s.Generated:
		return "not_generated"
	}
	return ""
}

func graphUnavailable(reason, src string) answer {
	body := map[string]any{
		"status":             "graph_unavailable",
		"reason":             reason,
		"recommended_action": "request_nexus_graph_generation_or_check_permissions",
	}
	if src != "" {
		body["source_app"] = src
	}
	return answer{body: body}
}

func invalidScope(msg string) answer {
	return failure("invalid_scope", msg+"; the scope is never widened", nil)
}

// scope is a validated scope: the sources searched and those left out.
type scope struct {
	args     scopeArgs
	sources  []string
	excluded []map[string]any
}

func (s scope) has(d *document) bool {
	return slices.Contains(s.sources, d.SourceApp) &&
		(s.args.Workspace == "" || d.Workspace == s.args.Workspace) &&
		(s.args.Project == "" || d.Proj == s.args.Project)
}

func (s scope) describe() map[string]any {
	return map[string]any{"caller_app": caller(s.args.CallerApp), "source_apps": s.sources, "workspace": s.args.Workspace,
		"project": s.args.Project, "excluded_sources": nonNil(s.excluded)}
}

// resolveScope checks the scope rules. A narrower-than-asked answer is
// possible only when no source_app is given: unavailable sources are then
// left out and listed in excluded_sources, never silently.
func (k *docKG) resolveScope(a scopeArgs) (scope, *answer) {
	sc := scope{args: a}
	if a.Workspace != "" && a.SourceApp == "" {
		f := invalidScope("workspace requires source_app")
		return sc, &f
	}
	if a.Project != "" && (a.SourceApp == "" || a.Workspace == "") {
		f := invalidScope("project requires source_app and workspace")
		return sc, &f
	}
	if a.SourceApp != "" {
		if reason := k.unavailable(a.CallerApp, a.SourceApp); reason != "" {
			f := graphUnavailable(reason, a.SourceApp)
			return sc, &f
		}
		sc.sources = []string{a.SourceApp}
	} else {
		for _, s := range k.data.sources {
			if reason := k.unavailable(a.CallerApp, s.ID); reason != "" {
				sc.excluded = append(sc.excluded, map[string]any{"source_app": s.ID, "reason": reason})
				continue
			}
			sc.sources = append(sc.sources, s.ID)
		}
	}
	if a.Workspace != "" {
		ws := k.workspace(a.SourceApp, a.Workspace)
		if ws == nil {
			f := invalidScope(fmt.Sprintf("workspace %q is not a workspace of source_app %q", a.Workspace, a.SourceApp))
			return sc, &f
		}
		if a.Project != "" && !slices.ContainsFunc(ws.Projects, func(p projectInfo) bool { return p.ID == a.Project }) {
			f := invalidScope(fmt.Sprintf("project %q is not a project of workspace %q", a.Project, a.Workspace))
			return sc, &f
		}
	}
	return sc, nil
}

func (k *docKG) workspace(src, id string) *workspaceInfo {
	for i := range k.data.workspaces {
		if w := &k.data.workspaces[i]; w.SourceApp == src && w.ID == id {
			return w
		}
	}
	return nil
}

func docLimitOr(p *int) int {
	if p == nil {
		return docDefaultLimit
	}
	return *p
}

func listAnswer[T any](key string, items []T, limit int, extra map[string]any) answer {
	total := len(items)
	items, trunc := capped(items, limit)
	body := map[string]any{key: nonNil(items), "total": total, "returned": len(items), "truncated": trunc}
	for k, v := range extra {
		body[k] = v
	}
	return ok(body)
}

func citation(d *document) map[string]any {
	return map[string]any{"doc_id": d.ID, "title": d.Title, "kind": d.Kind, "source_app": d.SourceApp,
		"workspace": d.Workspace, "project": d.Proj, "updated_at": d.UpdatedAt}
}

// Tools.

type callerArgs struct {
	CallerApp string `json:"caller_app"`
}

func (k *docKG) sourceList(callerApp string) []map[string]any {
	var out []map[string]any
	for _, s := range k.data.sources {
		n := 0
		for _, d := range k.data.docs {
			if d.SourceApp == s.ID {
				n++
			}
		}
		entry := map[string]any{"source_app": s.ID, "title": s.Title, "graph_status": "available"}
		if reason := k.unavailable(callerApp, s.ID); reason != "" {
			entry["graph_status"], entry["reason"] = "graph_unavailable", reason
		} else {
			entry["documents"], entry["generated_at"] = n, s.GeneratedAt
		}
		out = append(out, entry)
	}
	return out
}

func (k *docKG) status(_ context.Context, a *callerArgs) answer {
	return ok(map[string]any{
		"server": "nexus-doc-kg", "schema": DocKGSchema, "readonly": true, "mutating_tools": []string{},
		"api": "reachable", "caller_app": caller(a.CallerApp), "source_apps": k.sourceList(a.CallerApp),
		"scope_rules": []string{"workspace requires source_app", "project requires source_app and workspace", "a scope is never widened"},
		"limits": map[string]any{"default_limit": docDefaultLimit, "max_limit": docMaxLimit, "snippet_chars": snippetChars,
			"context_pack_max_items": 10, "context_pack_max_chars": 8000},
	})
}

func (k *docKG) listSourceApps(_ context.Context, a *callerArgs) answer {
	return listAnswer("source_apps", k.sourceList(a.CallerApp), docMaxLimit, nil)
}

type listWorkspacesArgs struct {
	CallerApp string `json:"caller_app"`
	SourceApp string `json:"source_app"`
	Limit     *int   `json:"limit"`
}

func (k *docKG) listWorkspaces(_ context.Context, a *listWorkspacesArgs) answer {
	if _, fail := k.resolveScope(scopeArgs{CallerApp: a.CallerApp, SourceApp: a.SourceApp}); fail != nil {
		return *fail
	}
	var out []map[string]any
	for _, w := range k.data.workspaces {
		if w.SourceApp == a.SourceApp {
			out = append(out, map[string]any{"workspace": w.ID, "title": w.Title, "source_app": w.SourceApp, "projects": len(w.Projects)})
		}
	}
	return listAnswer("workspaces", out, docLimitOr(a.Limit), map[string]any{"source_app": a.SourceApp})
}

type listProjectsArgs struct {
	CallerApp string `json:"caller_app"`
	SourceApp string `json:"source_app"`
	Workspace string `json:"workspace"`
	Limit     *int   `json:"limit"`
}

func (k *docKG) listProjects(_ context.Context, a *listProjectsArgs) answer {
	if _, fail := k.resolveScope(scopeArgs{CallerApp: a.CallerApp, SourceApp: a.SourceApp, Workspace: a.Workspace}); fail != nil {
		return *fail
	}
	var out []map[string]any
	for _, p := range k.workspace(a.SourceApp, a.Workspace).Projects {
		out = append(out, map[string]any{"project": p.ID, "title": p.Title, "workspace": a.Workspace, "source_app": a.SourceApp})
	}
	return listAnswer("projects", out, docLimitOr(a.Limit), nil)
}

type listDocumentsArgs struct {
	scopeArgs
	Kind  string `json:"kind"`
	Limit *int   `json:"limit"`
}

func (k *docKG) listDocuments(_ context.Context, a *listDocumentsArgs) answer {
	sc, fail := k.resolveScope(a.scopeArgs)
	if fail != nil {
		return *fail
	}
	var docs []*document
	for i := range k.data.docs {
		if d := &k.data.docs[i]; sc.has(d) && (a.Kind == "" || d.Kind == a.Kind) {
			docs = append(docs, d)
		}
	}
	slices.SortStableFunc(docs, func(x, y *document) int {
		if c := strings.Compare(y.UpdatedAt, x.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(x.ID, y.ID)
	})
	var out []map[string]any
	for _, d := range docs {
		out = append(out, citation(d))
	}
	return listAnswer("documents", out, docLimitOr(a.Limit), map[string]any{"scope": sc.describe()})
}

type limitScopeArgs struct {
	scopeArgs
	Limit *int `json:"limit"`
}

func (k *docKG) listResources(_ context.Context, a *limitScopeArgs) answer {
	sc, fail := k.resolveScope(a.scopeArgs)
	if fail != nil {
		return *fail
	}
	var out []map[string]any
	for _, w := range k.data.workspaces {
		if !slices.Contains(sc.sources, w.SourceApp) || (a.Workspace != "" && w.ID != a.Workspace) {
			continue
		}
		for _, p := range w.Projects {
			if a.Project != "" && p.ID != a.Project {
				continue
			}
			n := 0
			for _, d := range k.data.docs {
				if d.SourceApp == w.SourceApp && d.Workspace == w.ID && d.Proj == p.ID {
					n++
				}
			}
			out = append(out, map[string]any{
				"uri":  fmt.Sprintf("nexus-doc://%s/%s/%s", w.SourceApp, w.ID, p.ID),
				"name": w.Title + " / " + p.Title, "mime_type": "application/vnd.nexus.doc-kg-scope+json",
				"source_app": w.SourceApp, "workspace": w.ID, "project": p.ID, "documents": n,
			})
		}
	}
	return listAnswer("resources", out, docLimitOr(a.Limit), map[string]any{"scope": sc.describe()})
}

// visible says whether a node may be shown to the caller; entities are
// shared vocabulary, documents follow their source's access.
func (k *docKG) visible(callerApp, id string) (doc *document, ent *entity, reason string) {
	for i := range k.data.docs {
		if d := &k.data.docs[i]; d.ID == id {
			return d, nil, k.unavailable(callerApp, d.SourceApp)
		}
	}
	for i := range k.data.entities {
		if e := &k.data.entities[i]; e.ID == id {
			return nil, e, ""
		}
	}
	return nil, nil, "unknown"
}

func nodeView(d *document, e *entity) map[string]any {
	if d != nil {
		n := citation(d)
		n["node_id"], n["node_type"], n["tags"], n["snippet"] = d.ID, "document", d.Tags, snippet(d.Body, "", snippetChars)
		delete(n, "doc_id")
		return n
	}
	return map[string]any{"node_id": e.ID, "node_type": "entity", "name": e.Name, "kind": e.Kind}
}

func (k *docKG) subgraph(_ context.Context, a *limitScopeArgs) answer {
	sc, fail := k.resolveScope(a.scopeArgs)
	if fail != nil {
		return *fail
	}
	in := map[string]bool{}
	var nodes []map[string]any
	docs := 0
	truncated := false
	for i := range k.data.docs {
		d := &k.data.docs[i]
		if !sc.has(d) {
			continue
		}
		if docs == docLimitOr(a.Limit) {
			truncated = true
			break
		}
		docs++
		in[d.ID] = true
		nodes = append(nodes, nodeView(d, nil))
	}
	var edges []docRelation
	for _, r := range k.data.relations {
		if !in[r.From] {
			continue
		}
		if _, e, _ := k.visible(sc.args.CallerApp, r.To); e != nil && !in[r.To] {
			in[r.To] = true
			nodes = append(nodes, nodeView(nil, e))
		}
		if in[r.To] {
			edges = append(edges, r)
		}
	}
	edges, t := capped(edges, maxRelations)
	return ok(map[string]any{"scope": sc.describe(), "nodes": nonNil(nodes), "edges": edgeViews(edges), "truncated": truncated || t})
}

func edgeViews(rs []docRelation) []map[string]any {
	out := []map[string]any{}
	for _, r := range rs {
		out = append(out, map[string]any{"from": r.From, "to": r.To, "type": r.Type})
	}
	return out
}

type nodeArgs struct {
	CallerApp string `json:"caller_app"`
	NodeID    string `json:"node_id"`
}

func (k *docKG) checkNode(callerApp, id string) (*document, *entity, *answer) {
	d, e, reason := k.visible(callerApp, id)
	switch reason {
	case "":
		return d, e, nil
	case "unknown":
		f := failure("not_found", fmt.Sprintf("no documentary node %q", id), nil)
		return nil, nil, &f
	}
	f := graphUnavailable(reason, d.SourceApp)
	return nil, nil, &f
}

func (k *docKG) node(_ context.Context, a *nodeArgs) answer {
	d, e, fail := k.checkNode(a.CallerApp, a.NodeID)
	if fail != nil {
		return *fail
	}
	return ok(map[string]any{"node": nodeView(d, e)})
}

type relationsArgs struct {
	CallerApp    string `json:"caller_app"`
	NodeID       string `json:"node_id"`
	Direction    string `json:"direction"`
	RelationType string `json:"relation_type"`
	Limit        *int   `json:"limit"`
}

// around lists the relations of a node the caller may see, and how many
// were left out because their other end is not readable.
func (k *docKG) around(a *relationsArgs) ([]docRelation, int) {
	var out []docRelation
	hidden := 0
	for _, r := range k.data.relations {
		if a.RelationType != "" && r.Type != a.RelationType {
			continue
		}
		var other string
		switch {
		case r.From == a.NodeID && a.Direction != "in":
			other = r.To
		case r.To == a.NodeID && a.Direction != "out":
			other = r.From
		default:
			continue
		}
		if _, _, reason := k.visible(a.CallerApp, other); reason != "" {
			hidden++
			continue
		}
		out = append(out, r)
	}
	return out, hidden
}

func (k *docKG) relations(_ context.Context, a *relationsArgs) answer {
	if _, _, fail := k.checkNode(a.CallerApp, a.NodeID); fail != nil {
		return *fail
	}
	rels, hidden := k.around(a)
	rels, trunc := capped(rels, docLimitOr(a.Limit))
	return ok(map[string]any{"node_id": a.NodeID, "direction": cmpOr(a.Direction, "both"), "relations": edgeViews(rels),
		"omitted_unreadable": hidden, "truncated": trunc})
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

type neighborsArgs struct {
	CallerApp    string `json:"caller_app"`
	NodeID       string `json:"node_id"`
	RelationType string `json:"relation_type"`
	Limit        *int   `json:"limit"`
}

func (k *docKG) neighbors(_ context.Context, a *neighborsArgs) answer {
	if _, _, fail := k.checkNode(a.CallerApp, a.NodeID); fail != nil {
		return *fail
	}
	rels, hidden := k.around(&relationsArgs{CallerApp: a.CallerApp, NodeID: a.NodeID, RelationType: a.RelationType})
	var out []map[string]any
	seen := map[string]bool{}
	for _, r := range rels {
		other, dir := r.To, "out"
		if r.To == a.NodeID {
			other, dir = r.From, "in"
		}
		if seen[other] {
			continue
		}
		seen[other] = true
		d, e, _ := k.visible(a.CallerApp, other)
		n := nodeView(d, e)
		delete(n, "snippet")
		n["relation"], n["direction"] = r.Type, dir
		out = append(out, n)
	}
	out, trunc := capped(out, docLimitOr(a.Limit))
	return ok(map[string]any{"node_id": a.NodeID, "neighbors": nonNil(out), "omitted_unreadable": hidden, "truncated": trunc})
}

type searchArgs struct {
	scopeArgs
	Query string `json:"query"`
	Limit *int   `json:"limit"`
}

func (k *docKG) ranked(sc scope, query string) []scored {
	var cands []document
	for i := range k.data.docs {
		if sc.has(&k.data.docs[i]) {
			cands = append(cands, k.data.docs[i])
		}
	}
	return rankDocs(k.data.docs, cands, query)
}

func hitView(h scored, query string, chars int) map[string]any {
	c := citation(h.doc)
	c["score"], c["snippet"] = h.score, snippet(h.doc.Body, query, chars)
	return c
}

func (k *docKG) search(_ context.Context, a *searchArgs) answer {
	sc, fail := k.resolveScope(a.scopeArgs)
	if fail != nil {
		return *fail
	}
	hits := k.ranked(sc, a.Query)
	var out []map[string]any
	for _, h := range hits {
		out = append(out, hitView(h, a.Query, snippetChars))
	}
	return listAnswer("results", out, docLimitOr(a.Limit), map[string]any{"query": a.Query, "scope": sc.describe()})
}

type contextPackArgs struct {
	scopeArgs
	Query    string `json:"query"`
	MaxItems *int   `json:"max_items"`
	MaxChars *int   `json:"max_chars"`
}

func (k *docKG) contextPack(_ context.Context, a *contextPackArgs) answer {
	sc, fail := k.resolveScope(a.scopeArgs)
	if fail != nil {
		return *fail
	}
	maxItems, maxChars := 5, 2000
	if a.MaxItems != nil {
		maxItems = *a.MaxItems
	}
	if a.MaxChars != nil {
		maxChars = *a.MaxChars
	}
	hits := k.ranked(sc, a.Query)
	var items []map[string]any
	var cites []string
	used, truncated := 0, len(hits) > maxItems
	for _, h := range hits {
		if len(items) == maxItems {
			break
		}
		room := maxChars - used - len([]rune(h.doc.Title))
		if room < 60 {
			truncated = true
			break
		}
		item := hitView(h, a.Query, min(snippetChars, room))
		used += len([]rune(h.doc.Title)) + len([]rune(item["snippet"].(string)))
		rels, _ := k.around(&relationsArgs{CallerApp: sc.args.CallerApp, NodeID: h.doc.ID})
		rels, _ = capped(rels, 5)
		item["relations"] = edgeViews(rels)
		items = append(items, item)
		cites = append(cites, h.doc.ID)
	}
	return ok(map[string]any{"query": a.Query, "scope": sc.describe(), "items": nonNil(items), "citations": nonNil(cites),
		"total_chars": used, "max_chars": maxChars, "max_items": maxItems, "truncated": truncated})
}

type queryArgs struct {
	scopeArgs
	Question string `json:"question"`
	Limit    *int   `json:"limit"`
}

func (k *docKG) query(_ context.Context, a *queryArgs) answer {
	sc, fail := k.resolveScope(a.scopeArgs)
	if fail != nil {
		return *fail
	}
	qt := tokens(a.Question)
	var matched []entity
	for _, e := range k.data.entities {
		nt := tokens(e.Name)
		if len(nt) > 0 && !slices.ContainsFunc(nt, func(t string) bool { return !slices.Contains(qt, t) }) {
			matched = append(matched, e)
		}
	}
	hits := k.ranked(sc, a.Question)
	method := "text_search"
	var rels []docRelation
	if len(matched) > 0 {
		method = "entity_lookup"
		linked := map[string]bool{}
		for _, r := range k.data.relations {
			for _, e := range matched {
				if r.To == e.ID {
					linked[r.From] = true
					rels = append(rels, r)
				}
			}
		}
		// Every linked document of the scope, the ones the text also
		// matches first.
		var cands []document
		for i := range k.data.docs {
			if d := &k.data.docs[i]; linked[d.ID] && sc.has(d) {
				cands = append(cands, *d)
			}
		}
		byScore := map[string]float64{}
		for _, h := range hits {
			byScore[h.doc.ID] = h.score
		}
		hits = hits[:0]
		for i := range cands {
			hits = append(hits, scored{&cands[i], byScore[cands[i].ID]})
		}
		slices.SortStableFunc(hits, func(x, y scored) int {
			if x.score != y.score {
				if x.score > y.score {
					return -1
				}
				return 1
			}
			return strings.Compare(x.doc.ID, y.doc.ID)
		})
		kept := rels[:0]
		for _, r := range rels {
			if d, _, reason := k.visible(sc.args.CallerApp, r.From); reason == "" && sc.has(d) {
				kept = append(kept, r)
			}
		}
		rels = kept
	}
	var docs []map[string]any
	for _, h := range hits {
		docs = append(docs, hitView(h, a.Question, snippetChars))
	}
	total := len(docs)
	docs, trunc := capped(docs, docLimitOr(a.Limit))
	rels, _ = capped(rels, maxRelations)
	var ents []map[string]any
	for i := range matched {
		ents = append(ents, nodeView(nil, &matched[i]))
	}
	return ok(map[string]any{"question": a.Question, "method": method, "scope": sc.describe(), "matched_entities": nonNil(ents),
		"documents": nonNil(docs), "relations": edgeViews(rels), "total": total, "truncated": trunc})
}
