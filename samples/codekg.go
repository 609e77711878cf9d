package samples

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// maxList caps every list in a code-kg answer, whatever the limit asked.
const maxList = 100

var severities = []string{"high", "medium", "low", "info"}

// codeKG is one code-kg sample server's state. Runs are immutable; the
// slice of runs grows under mu when a real regeneration succeeds.
type codeKG struct {
	opts Options
	mu   sync.RWMutex
	data *codeDataset
}

// selectorArgs is the graph selector of the contract.
type selectorArgs struct {
	Repository string `json:"repository"`
	Branch     string `json:"branch"`
	GraphID    string `json:"graph_id"`
	Latest     *bool  `json:"latest"`
}

var selectorSpec = inputSpec{Props: map[string]prop{
	"repository": pString("Repository, e.g. syl2042/Nexus-Pocket. Needed unless graph_id is given.", 200),
	"branch":     pString("Branch. May be omitted only when the repository has a single branch.", 200),
	"graph_id":   pString("A specific graph run. Must belong to repository/branch when they are given.", 100),
	"latest":     pBool("Select the newest run of the branch. true together with a graph_id that is not the newest run is ambiguous and refused.", true),
}}

func limitProp() prop { return pInt("Maximum number of items returned.", 1, maxList, 20) }

// NewCodeKG returns the code-kg sample server ("nexus-code-kg").
func NewCodeKG(opts Options) *server.MCPServer { return newCodeKG(opts).s }

func newCodeKG(opts Options) *registry {
	k := &codeKG{opts: opts, data: newCodeDataset()}
	r := newRegistry("nexus-code-kg", Version,
		"Sample of the Nexus code knowledge graph. Read-only tools resolve findings by proof tuple; "+
			"kg_regenerate is a dry run unless dry_run=false and confirmed_by_sr=true. Re-read real code before any patch.",
		opts.CallLog)
	k.register(r)
	return r
}

func (k *codeKG) register(r *registry) {
	graphOut := map[string]string{"graph": "object"}
	listOut := map[string]string{"graph_id": "string", "total": "integer", "returned": "integer", "truncated": "boolean"}

	register(r, toolMeta{name: "kg_latest_graph", title: "Latest code graph", readOnly: true,
		description: "Newest graph run for a selector {repository, branch, graph_id?, latest?}: id, commit, date and counts.",
		in:          selectorSpec, out: outputSchema([]string{"ok"}, graphOut)}, k.latestGraph)
	register(r, toolMeta{name: "kg_graph_summary", title: "Graph summary", readOnly: true,
		description: "Counts and status of one graph: files, nodes, relations, findings by severity and source tool, audit risks, anomalies.",
		in:          selectorSpec, out: outputSchema([]string{"ok"}, map[string]string{"graph": "object", "counts": "object"})}, k.graphSummary)
	register(r, toolMeta{name: "kg_list_audit_risks", title: "List audit risks", readOnly: true,
		description: "AI audit risks of a graph, highest severity first.",
		in: selectorSpec.with(map[string]prop{
			"severity": pEnum("Only risks of this severity.", severities...),
			"limit":    limitProp(),
		}), out: outputSchema([]string{"ok"}, mergeTypes(listOut, map[string]string{"risks": "array"}))}, k.listRisks)
	register(r, toolMeta{name: "kg_get_audit_risk", title: "Get an audit risk", readOnly: true,
		description: "One audit risk with the findings it refers to, as proof tuples.",
		in: inputSpec{Props: map[string]prop{
			"graph_id": pString("Graph run holding the risk (see kg_list_audit_risks).", 100),
			"risk_id":  pString("Risk id, e.g. np-risk-echo-002.", 100),
		}, Required: []string{"graph_id", "risk_id"}},
		out: outputSchema([]string{"ok"}, map[string]string{"risk": "object", "findings": "array"})}, k.getRisk)
	register(r, toolMeta{name: "kg_list_anomalies", title: "List anomalies", readOnly: true,
		description: "Graph anomalies: parse errors, unresolved imports, import cycles, orphan modules. Blocking ones first.",
		in: selectorSpec.with(map[string]prop{
			"kind":          pEnum("Only anomalies of this kind.", "parse_error", "unresolved_import", "import_cycle", "orphan_module"),
			"blocking_only": pBool("Only anomalies that block analysis of their module.", false),
			"limit":         limitProp(),
		}), out: outputSchema([]string{"ok"}, mergeTypes(listOut, map[string]string{"anomalies": "array"}))}, k.listAnomalies)
	register(r, toolMeta{name: "kg_get_anomaly", title: "Get an anomaly", readOnly: true,
		description: "One anomaly with its file context.",
		in: inputSpec{Props: map[string]prop{
			"graph_id":   pString("Graph run holding the anomaly.", 100),
			"anomaly_id": pString("Anomaly id, e.g. np-anom-parse-001.", 100),
		}, Required: []string{"graph_id", "anomaly_id"}},
		out: outputSchema([]string{"ok"}, map[string]string{"anomaly": "object", "file_context": "object"})}, k.getAnomaly)
	register(r, toolMeta{name: "kg_resolve_finding", title: "Resolve a finding", readOnly: true,
		description: "Resolve a finding by proof tuple (graph_id, source_tool, finding_type, path, line); line may be omitted. " +
			"One match answers a Codex action packet (status ready); several answer status ambiguous with the candidates and " +
			"required_disambiguation, never a silent pick; none answers status not_found. Human-readable finding ids are not accepted: they are not reliable KG keys.",
		in: inputSpec{Props: map[string]prop{
			"graph_id":     pString("Graph run of the finding.", 100),
			"source_tool":  pEnum("Tool that produced the finding.", "nexus_kg", "ruff", "bandit", "osv", "audit_ai"),
			"finding_type": pString("Finding type, e.g. bandit_b324_hashlib.", 200),
			"path":         pString("Repository-relative path of the file.", 500),
			"line":         {Type: "integer", Description: "Line of the finding. Without it the 4-tuple is used and may be ambiguous.", Min: 1, Max: 1000000},
			"message":      pString("Exact message, to disambiguate.", 500),
			"dedupe_key":   pString("Dedupe key of a candidate, to disambiguate.", 700),
		}, Required: []string{"graph_id", "source_tool", "finding_type", "path"}},
		out: outputSchema([]string{"ready", "ambiguous", "not_found"}, map[string]string{
			"finding": "object", "file_context": "object", "nearby_relations": "array", "impact": "object",
			"recommended_reads": "array", "recommended_commands": "array", "safety_notes": "array",
			"candidates": "array", "required_disambiguation": "array"})}, k.resolveFinding)
	register(r, toolMeta{name: "kg_file_context", title: "File context", readOnly: true,
		description: "A file's nodes (module and symbols), incoming and outgoing relations, findings and anomalies.",
		in: selectorSpec.with(map[string]prop{
			"path":  pString("Repository-relative path.", 500),
			"limit": limitProp(),
		}, "path"), out: outputSchema([]string{"ok"}, map[string]string{"graph_id": "string", "file": "object", "nodes": "array", "relations": "array", "findings": "array", "anomalies": "array"})}, k.fileContext)
	register(r, toolMeta{name: "kg_impact", title: "Impact", readOnly: true,
		description: "What depends on a file or a symbol (path or path::Symbol), following imports and calls backwards up to max_depth.",
		in: selectorSpec.with(map[string]prop{
			"target":    pString("A path, or path::Symbol.", 600),
			"max_depth": pInt("How many hops of dependents to follow.", 1, 5, 2),
			"limit":     limitProp(),
		}, "target"), out: outputSchema([]string{"ok"}, map[string]string{"graph_id": "string", "target": "string", "dependents": "array", "affected_files": "array", "findings_in_affected_files": "integer", "truncated": "boolean"})}, k.impact)
	register(r, toolMeta{name: "kg_compare_runs", title: "Compare graph runs", readOnly: true,
		description: "Diff of two runs of the same repository: files, relations, findings (by dedupe key) and anomalies added or resolved. " +
			"Without ids, compares the newest run of repository/branch with the one before it; with head_graph_id only, with the run before it.",
		in: inputSpec{Props: map[string]prop{
			"base_graph_id": pString("Older run.", 100),
			"head_graph_id": pString("Newer run.", 100),
			"repository":    selectorSpec.Props["repository"],
			"branch":        selectorSpec.Props["branch"],
		}}, out: outputSchema([]string{"ok"}, map[string]string{"base": "object", "head": "object", "files_added": "array", "files_removed": "array", "findings_added": "array", "findings_resolved": "array"})}, k.compareRuns)
	register(r, toolMeta{name: "kg_compare_with_local_git", title: "Freshness against local git", readOnly: true,
		description: "Verdict on whether the graph may back a patch decision for a local checkout. The local HEAD comes from local_head, " +
			"or from <local_path>/.git/HEAD (local stdio only, under NEXUS_MCP_LOCAL_REPO_ROOTS; refused over remote HTTP); the dirty state from local_dirty/local_dirty_files. " +
			"Verdicts: fresh = HEAD equals the graph commit and the worktree is clean; stale_but_usable = HEAD at most 3 commits ahead without touching files with findings, " +
			"or dirty files that carry no finding; stale = another commit, a larger gap, commits touching files with findings, or HEAD unknown; " +
			"unsafe_for_patch_decision = dirty files that carry findings, or local_head and local_path disagreeing. Do not patch on the KG alone unless fresh.",
		in: selectorSpec.with(map[string]prop{
			"local_head":        pString("Local HEAD commit (7 to 40 hex digits).", 40),
			"local_dirty":       pBool("Whether the local worktree has uncommitted changes.", false),
			"local_dirty_files": pStrings("Repository-relative paths with uncommitted changes.", 200),
			"local_path":        pString("Absolute path of the local checkout (local stdio only, under an allow-listed root).", 1000),
		}), out: outputSchema([]string{"ok"}, map[string]string{"verdict": "string", "graph_id": "string", "graph_commit": "string", "local_head": "string", "reasons": "array", "patch_allowed": "boolean"})}, k.compareWithLocalGit)
	register(r, toolMeta{name: "kg_regenerate_dry_run", title: "Regeneration plan", readOnly: true,
		description: "What a regeneration of the selected branch would do, and which confirmations a real run needs. Changes nothing.",
		in:          selectorSpec, out: outputSchema([]string{"dry_run", "refused", "ambiguous", "not_found"}, regenOut)}, k.regenerateDryRun)
	register(r, toolMeta{name: "kg_regenerate", title: "Regenerate the code graph", readOnly: false,
		description: "Regenerate the graph of a branch through the Nexus API. Dry run by default; a real run needs dry_run=false and confirmed_by_sr=true, " +
			"and allow_dirty=true when the registered worktree is dirty (the answer then carries a warning). Refuses an ambiguous graph selector. " +
			"A real run creates a new graph run; compare it with kg_compare_runs.",
		in: selectorSpec.with(map[string]prop{
			"dry_run":         pBool("Only describe the regeneration.", true),
			"confirmed_by_sr": pBool("The SR Method or a human validated this regeneration.", false),
			"allow_dirty":     pBool("Accept regenerating from a dirty worktree.", false),
			"reason":          pString("Why the graph is regenerated (kept in the run).", 300),
		}), out: outputSchema([]string{"dry_run", "completed", "refused", "ambiguous", "not_found"}, regenOut)}, k.regenerate)
	register(r, toolMeta{name: "kg_regenerate_submit", title: "Submit a regeneration", readOnly: false,
		description: "The real regeneration, for clients that split kg_regenerate_dry_run and kg_regenerate_submit. Needs confirmed_by_sr=true, and allow_dirty=true for a dirty worktree.",
		in: selectorSpec.with(map[string]prop{
			"confirmed_by_sr": pBool("The SR Method or a human validated this regeneration.", false),
			"allow_dirty":     pBool("Accept regenerating from a dirty worktree.", false),
			"reason":          pString("Why the graph is regenerated (kept in the run).", 300),
		}), out: outputSchema([]string{"completed", "refused", "ambiguous", "not_found"}, regenOut)}, k.regenerateSubmit)
}

var regenOut = map[string]string{"graph": "object", "new_graph": "object", "previous_graph_id": "string", "requires": "array", "missing": "array", "warnings": "array", "next": "array"}

func mergeTypes(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// Selection.

func (k *codeKG) snapshot() ([]*branchInfo, []*graphRun) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.data.Branches, slices.Clone(k.data.Runs)
}

func latestOf(runs []*graphRun, b *branchInfo) (latest, previous *graphRun) {
	for _, r := range runs {
		if r.Repository == b.Repository && r.Branch == b.Branch {
			latest, previous = r, latest
		}
	}
	return latest, previous
}

func branchOf(branches []*branchInfo, repo, branch string) *branchInfo {
	for _, b := range branches {
		if b.Repository == repo && b.Branch == branch {
			return b
		}
	}
	return nil
}

func findRun(runs []*graphRun, id string) *graphRun {
	for _, r := range runs {
		if r.ID == id {
			return r
		}
	}
	return nil
}

// resolve applies the graph selector. It never guesses: a repository with
// several branches and no branch, or a graph_id contradicting the other
// fields, is an answer, not a pick.
func (k *codeKG) resolve(sel selectorArgs) (*graphRun, *branchInfo, *answer) {
	branches, runs := k.snapshot()
	if sel.GraphID != "" {
		run := findRun(runs, sel.GraphID)
		if run == nil {
			a := failure("not_found", fmt.Sprintf("no graph run %q", sel.GraphID), nil)
			return nil, nil, &a
		}
		if (sel.Repository != "" && sel.Repository != run.Repository) || (sel.Branch != "" && sel.Branch != run.Branch) {
			a := failure("refused", fmt.Sprintf("graph %s belongs to %s@%s, not to the repository/branch given", run.ID, run.Repository, run.Branch), nil)
			return nil, nil, &a
		}
		b := branchOf(branches, run.Repository, run.Branch)
		if latest, _ := latestOf(runs, b); sel.Latest != nil && *sel.Latest && latest.ID != run.ID {
			a := answer{body: map[string]any{
				"status":     "ambiguous",
				"reason":     fmt.Sprintf("graph_id %s is not the latest run of %s@%s and latest=true was asked", run.ID, run.Repository, run.Branch),
				"candidates": []any{runMeta(run), runMeta(latest)},
			}}
			return nil, nil, &a
		}
		return run, b, nil
	}
	if sel.Repository == "" {
		a := failure("refused", "the graph selector needs repository (and branch) or graph_id", nil)
		return nil, nil, &a
	}
	var inRepo []*branchInfo
	for _, b := range branches {
		if b.Repository == sel.Repository {
			inRepo = append(inRepo, b)
		}
	}
	if len(inRepo) == 0 {
		var repos []string
		for _, b := range branches {
			if !slices.Contains(repos, b.Repository) {
				repos = append(repos, b.Repository)
			}
		}
		a := failure("not_found", fmt.Sprintf("unknown repository %q", sel.Repository), map[string]any{"known_repositories": repos})
		return nil, nil, &a
	}
	var b *branchInfo
	switch {
	case sel.Branch != "":
		b = branchOf(inRepo, sel.Repository, sel.Branch)
		if b == nil {
			a := failure("not_found", fmt.Sprintf("unknown branch %q of %s", sel.Branch, sel.Repository), map[string]any{"known_branches": branchNames(inRepo)})
			return nil, nil, &a
		}
	case len(inRepo) == 1:
		b = inRepo[0]
	default:
		var cands []any
		for _, c := range inRepo {
			latest, _ := latestOf(runs, c)
			cands = append(cands, runMeta(latest))
		}
		a := answer{body: map[string]any{
			"status":                  "ambiguous",
			"reason":                  fmt.Sprintf("%s has several branches; give branch or graph_id", sel.Repository),
			"candidates":              cands,
			"required_disambiguation": []string{"branch", "graph_id"},
		}}
		return nil, nil, &a
	}
	latest, _ := latestOf(runs, b)
	return latest, b, nil
}

func branchNames(bs []*branchInfo) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Branch)
	}
	return out
}

func runMeta(r *graphRun) map[string]any {
	return map[string]any{
		"graph_id": r.ID, "repository": r.Repository, "branch": r.Branch, "commit": r.Commit,
		"created_at": r.CreatedAt, "trigger": r.Trigger, "state": "complete",
		"files": len(r.Files), "findings": len(r.Findings),
	}
}

func proof(r *graphRun, f finding) map[string]any {
	return map[string]any{
		"graph_id": r.ID, "source_tool": f.SourceTool, "finding_type": f.FindingType, "path": f.Path,
		"line": f.Line, "message": f.Message, "severity": f.Severity, "dedupe_key": f.DedupeKey, "finding_id": f.FindingID,
	}
}

func capped[T any](items []T, limit int) ([]T, bool) {
	if limit <= 0 || limit > maxList {
		limit = maxList
	}
	if len(items) > limit {
		return items[:limit], true
	}
	return items, false
}

func limitOr(p *int) int {
	if p == nil {
		return 20
	}
	return *p
}

// Read-only tools.

func (k *codeKG) latestGraph(_ context.Context, a *selectorArgs) answer {
	run, _, fail := k.resolve(*a)
	if fail != nil {
		return *fail
	}
	return ok(map[string]any{"graph": runMeta(run)})
}

func (k *codeKG) graphSummary(_ context.Context, a *selectorArgs) answer {
	run, _, fail := k.resolve(*a)
	if fail != nil {
		return *fail
	}
	nodes := 0
	for _, f := range run.Files {
		nodes += 1 + len(f.Symbols)
	}
	bySev, byTool := map[string]int{}, map[string]int{}
	for _, f := range run.Findings {
		bySev[f.Severity]++
		byTool[f.SourceTool]++
	}
	blocking := 0
	for _, an := range run.Anomalies {
		if an.Blocking {
			blocking++
		}
	}
	return ok(map[string]any{"graph": runMeta(run), "counts": map[string]any{
		"files": len(run.Files), "nodes": nodes, "relations": len(run.Relations),
		"findings": len(run.Findings), "findings_by_severity": bySev, "findings_by_source_tool": byTool,
		"audit_risks": len(run.Risks), "anomalies": len(run.Anomalies), "blocking_anomalies": blocking,
	}})
}

type listRisksArgs struct {
	selectorArgs
	Severity string `json:"severity"`
	Limit    *int   `json:"limit"`
}

func (k *codeKG) listRisks(_ context.Context, a *listRisksArgs) answer {
	run, _, fail := k.resolve(a.selectorArgs)
	if fail != nil {
		return *fail
	}
	var out []map[string]any
	for _, sev := range severities {
		for _, r := range run.Risks {
			if r.Severity == sev && (a.Severity == "" || a.Severity == sev) {
				out = append(out, map[string]any{"graph_id": run.ID, "risk_id": r.RiskID, "finding_id": r.FindingID,
					"title": r.Title, "severity": r.Severity, "category": r.Category, "paths": r.Paths})
			}
		}
	}
	total := len(out)
	out, trunc := capped(out, limitOr(a.Limit))
	return ok(map[string]any{"graph_id": run.ID, "total": total, "returned": len(out), "truncated": trunc, "risks": nonNil(out)})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

type getRiskArgs struct {
	GraphID string `json:"graph_id"`
	RiskID  string `json:"risk_id"`
}

func (k *codeKG) getRisk(_ context.Context, a *getRiskArgs) answer {
	run, _, fail := k.resolve(selectorArgs{GraphID: a.GraphID})
	if fail != nil {
		return *fail
	}
	for _, r := range run.Risks {
		if r.RiskID != a.RiskID {
			continue
		}
		var fs []map[string]any
		for _, f := range run.Findings {
			if slices.Contains(r.FindingRefs, f.DedupeKey) {
				fs = append(fs, proof(run, f))
			}
		}
		return ok(map[string]any{"graph_id": run.ID, "risk": r, "findings": nonNil(fs),
			"next": []string{"kg_resolve_finding with one finding's proof tuple", "kg_file_context on the risk's paths"}})
	}
	return failure("not_found", fmt.Sprintf("no audit risk %q in graph %s", a.RiskID, run.ID), nil)
}

type listAnomaliesArgs struct {
	selectorArgs
	Kind         string `json:"kind"`
	BlockingOnly bool   `json:"blocking_only"`
	Limit        *int   `json:"limit"`
}

func (k *codeKG) listAnomalies(_ context.Context, a *listAnomaliesArgs) answer {
	run, _, fail := k.resolve(a.selectorArgs)
	if fail != nil {
		return *fail
	}
	var out []anomaly
	for _, blocking := range []bool{true, false} {
		for _, an := range run.Anomalies {
			if an.Blocking == blocking && (a.Kind == "" || an.Kind == a.Kind) && (!a.BlockingOnly || an.Blocking) {
				out = append(out, an)
			}
		}
	}
	total := len(out)
	out, trunc := capped(out, limitOr(a.Limit))
	return ok(map[string]any{"graph_id": run.ID, "total": total, "returned": len(out), "truncated": trunc, "anomalies": nonNil(out)})
}

type getAnomalyArgs struct {
	GraphID   string `json:"graph_id"`
	AnomalyID string `json:"anomaly_id"`
}

func (k *codeKG) getAnomaly(_ context.Context, a *getAnomalyArgs) answer {
	run, _, fail := k.resolve(selectorArgs{GraphID: a.GraphID})
	if fail != nil {
		return *fail
	}
	for _, an := range run.Anomalies {
		if an.AnomalyID == a.AnomalyID {
			return ok(map[string]any{"graph_id": run.ID, "anomaly": an, "file_context": fileContext(run, an.Path, 10)})
		}
	}
	return failure("not_found", fmt.Sprintf("no anomaly %q in graph %s", a.AnomalyID, run.ID), nil)
}

// fileContext is a bounded view of one file; nil when the graph lacks it.
func fileContext(run *graphRun, p string, limit int) map[string]any {
	idx := slices.IndexFunc(run.Files, func(f fileInfo) bool { return f.Path == p })
	if idx < 0 {
		return nil
	}
	file := run.Files[idx]
	nodes := []string{file.Path}
	for _, s := range file.Symbols {
		nodes = append(nodes, file.Path+"::"+s)
	}
	var rels []relation
	for _, r := range run.Relations {
		if fileOf(r.From) == p || fileOf(r.To) == p {
			rels = append(rels, r)
		}
	}
	var fs []map[string]any
	for _, f := range run.Findings {
		if f.Path == p {
			fs = append(fs, proof(run, f))
		}
	}
	var anoms []anomaly
	for _, an := range run.Anomalies {
		if an.Path == p {
			anoms = append(anoms, an)
		}
	}
	rels, truncRels := capped(rels, limit)
	fs, truncFs := capped(fs, limit)
	return map[string]any{
		"file": file, "nodes": nodes, "relations": nonNil(rels), "findings": nonNil(fs), "anomalies": nonNil(anoms),
		"truncated": truncRels || truncFs,
	}
}

func fileOf(node string) string {
	p, _, _ := strings.Cut(node, "::")
	return p
}

type fileContextArgs struct {
	selectorArgs
	Path  string `json:"path"`
	Limit *int   `json:"limit"`
}

func (k *codeKG) fileContext(_ context.Context, a *fileContextArgs) answer {
	run, _, fail := k.resolve(a.selectorArgs)
	if fail != nil {
		return *fail
	}
	fc := fileContext(run, a.Path, limitOr(a.Limit))
	if fc == nil {
		return failure("not_found", fmt.Sprintf("no file %q in graph %s", a.Path, run.ID), nil)
	}
	fc["graph_id"] = run.ID
	return ok(fc)
}

type impactArgs struct {
	selectorArgs
	Target   string `json:"target"`
	MaxDepth *int   `json:"max_depth"`
	Limit    *int   `json:"limit"`
}

// impactOf walks relations backwards from target: a node depends on the
// target when it imports or calls it, or anything inside it for a file.
func impactOf(run *graphRun, target string, maxDepth, limit int) (map[string]any, bool) {
	known := false
	for _, f := range run.Files {
		if f.Path == target || slices.ContainsFunc(f.Symbols, func(s string) bool { return f.Path+"::"+s == target }) {
			known = true
		}
	}
	if !known {
		return nil, false
	}
	matches := func(node, t string) bool { return node == t || (!strings.Contains(t, "::") && fileOf(node) == t) }
	type dep struct {
		Node  string `json:"node"`
		Depth int    `json:"depth"`
		Via   string `json:"via"`
	}
	var deps []dep
	seen := map[string]bool{target: true}
	frontier := []string{target}
	for depth := 1; depth <= maxDepth && len(frontier) > 0; depth++ {
		var next []string
		for _, t := range frontier {
			for _, r := range run.Relations {
				if matches(r.To, t) && !seen[r.From] && fileOf(r.From) != fileOf(target) {
					seen[r.From] = true
					deps = append(deps, dep{r.From, depth, r.Kind})
					next = append(next, r.From)
				}
			}
		}
		frontier = next
	}
	var files []string
	for _, d := range deps {
		if f := fileOf(d.Node); !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	n := 0
	for _, f := range run.Findings {
		if slices.Contains(files, f.Path) {
			n++
		}
	}
	deps, trunc := capped(deps, limit)
	return map[string]any{"graph_id": run.ID, "target": target, "max_depth": maxDepth, "dependents": nonNil(deps),
		"affected_files": nonNil(files), "findings_in_affected_files": n, "truncated": trunc}, true
}

func (k *codeKG) impact(_ context.Context, a *impactArgs) answer {
	run, _, fail := k.resolve(a.selectorArgs)
	if fail != nil {
		return *fail
	}
	depth := 2
	if a.MaxDepth != nil {
		depth = *a.MaxDepth
	}
	out, found := impactOf(run, a.Target, depth, limitOr(a.Limit))
	if !found {
		return failure("not_found", fmt.Sprintf("no file or symbol %q in graph %s", a.Target, run.ID), nil)
	}
	return ok(out)
}

type resolveArgs struct {
	GraphID     string `json:"graph_id"`
	SourceTool  string `json:"source_tool"`
	FindingType string `json:"finding_type"`
	Path        string `json:"path"`
	Line        *int   `json:"line"`
	Message     string `json:"message"`
	DedupeKey   string `json:"dedupe_key"`
}

func (k *codeKG) resolveFinding(_ context.Context, a *resolveArgs) answer {
	run, _, fail := k.resolve(selectorArgs{GraphID: a.GraphID})
	if fail != nil {
		return *fail
	}
	var matches []finding
	for _, f := range run.Findings {
		if f.SourceTool == a.SourceTool && f.FindingType == a.FindingType && f.Path == a.Path &&
			(a.Line == nil || f.Line == *a.Line) && (a.Message == "" || f.Message == a.Message) &&
			(a.DedupeKey == "" || f.DedupeKey == a.DedupeKey) {
			matches = append(matches, f)
		}
	}
	switch len(matches) {
	case 0:
		return answer{body: map[string]any{"status": "not_found",
			"reason":   "no finding matches the proof tuple in this graph; it may be fixed, or the line moved: retry without line or check kg_compare_runs",
			"graph_id": run.ID}, isError: true}
	case 1:
	default:
		var cands []map[string]any
		for _, f := range matches {
			cands = append(cands, proof(run, f))
		}
		return answer{body: map[string]any{"status": "ambiguous", "candidates": cands,
			"required_disambiguation": []string{"line", "message", "dedupe_key"}}}
	}
	f := matches[0]
	fc := fileContext(run, f.Path, 10)
	imp, _ := impactOf(run, f.Path, 2, 20)
	rels, _ := fc["relations"].([]relation)
	delete(fc, "relations") // carried once, as nearby_relations
	lo, hi := max(1, f.Line-15), f.Line+15
	cmd := map[string]string{
		"bandit":   "bandit -q " + f.Path,
		"ruff":     "ruff check " + f.Path,
		"osv":      "osv-scanner --lockfile " + f.Path,
		"nexus_kg": "python -m py_compile " + f.Path,
		"audit_ai": "git log -n 5 --oneline -- " + f.Path,
	}[f.SourceTool]
	return answer{body: map[string]any{
		"status":            "ready",
		"finding":           proof(run, f),
		"file_context":      fc,
		"nearby_relations":  nonNil(rels),
		"impact":            imp,
		"recommended_reads": []string{fmt.Sprintf("%s:%d-%d", f.Path, lo, hi)},
		"recommended_commands": []string{
			fmt.Sprintf("git diff %s..HEAD -- %s", run.Commit[:12], f.Path), cmd,
		},
		"safety_notes": []string{
			fmt.Sprintf("The graph is a snapshot of commit %s: re-read the real code before any patch.", run.Commit[:12]),
			"Call kg_compare_with_local_git first; do not patch on the KG alone unless the verdict is fresh.",
			"If the finding is a false positive, document it instead of changing code blindly.",
		},
	}}
}

type compareRunsArgs struct {
	BaseGraphID string `json:"base_graph_id"`
	HeadGraphID string `json:"head_graph_id"`
	Repository  string `json:"repository"`
	Branch      string `json:"branch"`
}

func (k *codeKG) compareRuns(_ context.Context, a *compareRunsArgs) answer {
	branches, runs := k.snapshot()
	var base, head *graphRun
	switch {
	case a.HeadGraphID != "":
		if head = findRun(runs, a.HeadGraphID); head == nil {
			return failure("not_found", fmt.Sprintf("no graph run %q", a.HeadGraphID), nil)
		}
	default:
		run, _, fail := k.resolve(selectorArgs{Repository: a.Repository, Branch: a.Branch})
		if fail != nil {
			return *fail
		}
		head = run
	}
	if a.BaseGraphID != "" {
		if base = findRun(runs, a.BaseGraphID); base == nil {
			return failure("not_found", fmt.Sprintf("no graph run %q", a.BaseGraphID), nil)
		}
	} else {
		b := branchOf(branches, head.Repository, head.Branch)
		for _, r := range runs {
			if r == head {
				break
			}
			if r.Repository == b.Repository && r.Branch == b.Branch {
				base = r
			}
		}
		if base == nil {
			return failure("not_found", fmt.Sprintf("graph %s has no earlier run on %s@%s to compare with", head.ID, head.Repository, head.Branch), nil)
		}
	}
	if base.Repository != head.Repository {
		return failure("refused", "runs of different repositories cannot be compared", nil)
	}
	return ok(diffRuns(base, head))
}

func diffRuns(base, head *graphRun) map[string]any {
	paths := func(r *graphRun) []string {
		var out []string
		for _, f := range r.Files {
			out = append(out, f.Path)
		}
		return out
	}
	bp, hp := paths(base), paths(head)
	var added, removed []string
	for _, p := range hp {
		if !slices.Contains(bp, p) {
			added = append(added, p)
		}
	}
	for _, p := range bp {
		if !slices.Contains(hp, p) {
			removed = append(removed, p)
		}
	}
	keyed := func(r *graphRun) map[string]finding {
		m := map[string]finding{}
		for _, f := range r.Findings {
			m[f.DedupeKey] = f
		}
		return m
	}
	bf, hf := keyed(base), keyed(head)
	var fAdded, fResolved []map[string]any
	unchanged := 0
	for _, f := range head.Findings {
		if _, was := bf[f.DedupeKey]; was {
			unchanged++
		} else {
			fAdded = append(fAdded, proof(head, f))
		}
	}
	for _, f := range base.Findings {
		if _, still := hf[f.DedupeKey]; !still {
			fResolved = append(fResolved, proof(base, f))
		}
	}
	anomIDs := func(r *graphRun) []string {
		var out []string
		for _, a := range r.Anomalies {
			out = append(out, a.AnomalyID)
		}
		return out
	}
	ba, ha := anomIDs(base), anomIDs(head)
	var aAdded, aResolved []string
	for _, id := range ha {
		if !slices.Contains(ba, id) {
			aAdded = append(aAdded, id)
		}
	}
	for _, id := range ba {
		if !slices.Contains(ha, id) {
			aResolved = append(aResolved, id)
		}
	}
	fAdded, t1 := capped(fAdded, maxList)
	fResolved, t2 := capped(fResolved, maxList)
	return map[string]any{
		"base": runMeta(base), "head": runMeta(head),
		"files_added": nonNil(added), "files_removed": nonNil(removed),
		"relations":      map[string]int{"base": len(base.Relations), "head": len(head.Relations)},
		"findings_added": nonNil(fAdded), "findings_resolved": nonNil(fResolved), "findings_unchanged": unchanged,
		"anomalies_added": nonNil(aAdded), "anomalies_resolved": nonNil(aResolved),
		"truncated": t1 || t2,
	}
}

// Regeneration.

type regenerateArgs struct {
	selectorArgs
	DryRun        *bool  `json:"dry_run"`
	ConfirmedBySR bool   `json:"confirmed_by_sr"`
	AllowDirty    bool   `json:"allow_dirty"`
	Reason        string `json:"reason"`
}

// regenTarget resolves the branch to regenerate. Regeneration is refused
// for any selector that does not name exactly the newest run of one branch.
func (k *codeKG) regenTarget(sel selectorArgs) (*graphRun, *branchInfo, *answer) {
	run, b, fail := k.resolve(sel)
	if fail != nil {
		if fail.body["status"] == "ambiguous" {
			fail.body["status"] = "refused"
			fail.body["refusal"] = "ambiguous_graph"
			fail.isError = true
		}
		return nil, nil, fail
	}
	if _, runs := k.snapshot(); sel.GraphID != "" {
		if latest, _ := latestOf(runs, b); latest.ID != run.ID {
			a := failure("refused", fmt.Sprintf("graph %s is not the newest run of %s@%s (%s is): the graph to regenerate is ambiguous", run.ID, b.Repository, b.Branch, latest.ID),
				map[string]any{"refusal": "ambiguous_graph", "candidates": []any{runMeta(run), runMeta(latest)}})
			return nil, nil, &a
		}
	}
	return run, b, nil
}

func plan(run *graphRun, b *branchInfo) map[string]any {
	requires := []string{"dry_run=false", "confirmed_by_sr=true"}
	var warnings []string
	if b.Worktree.Dirty {
		requires = append(requires, "allow_dirty=true")
		warnings = append(warnings, fmt.Sprintf("the registered worktree of %s@%s is dirty (%s): the new graph would include uncommitted changes",
			b.Repository, b.Branch, strings.Join(b.Worktree.DirtyFiles, ", ")))
	}
	if b.Worktree.Head == run.Commit && !b.Worktree.Dirty {
		warnings = append(warnings, "the worktree is at the graph's commit: the new run would match the current one")
	}
	return map[string]any{
		"status": "dry_run", "graph": runMeta(run),
		"would_regenerate": map[string]any{"repository": b.Repository, "branch": b.Branch, "from_commit": run.Commit, "to_commit": b.Worktree.Head,
			"worktree_dirty": b.Worktree.Dirty, "dirty_files": nonNil(b.Worktree.DirtyFiles),
			"expected_findings_resolved": len(b.Worktree.Pending.Resolve), "expected_findings_added": len(b.Worktree.Pending.AddFindings)},
		"requires": requires, "warnings": nonNil(warnings),
		"next": []string{"kg_regenerate with dry_run=false and confirmed_by_sr=true (or kg_regenerate_submit)", "then kg_compare_runs"},
	}
}

func (k *codeKG) regenerateDryRun(_ context.Context, a *selectorArgs) answer {
	run, b, fail := k.regenTarget(*a)
	if fail != nil {
		return *fail
	}
	return answer{body: plan(run, b)}
}

// regenerate is the compatible tool: a dry run unless dry_run=false, so a
// client that sends only confirmations still changes nothing.
func (k *codeKG) regenerate(_ context.Context, a *regenerateArgs) answer {
	if a.DryRun != nil && !*a.DryRun {
		return k.submit(a.selectorArgs, a.ConfirmedBySR, a.AllowDirty, a.Reason)
	}
	run, b, fail := k.regenTarget(a.selectorArgs)
	if fail != nil {
		return *fail
	}
	p := plan(run, b)
	p["note"] = "dry run (dry_run defaults to true): nothing was regenerated"
	return answer{body: p}
}

type submitArgs struct {
	selectorArgs
	ConfirmedBySR bool   `json:"confirmed_by_sr"`
	AllowDirty    bool   `json:"allow_dirty"`
	Reason        string `json:"reason"`
}

func (k *codeKG) regenerateSubmit(_ context.Context, a *submitArgs) answer {
	return k.submit(a.selectorArgs, a.ConfirmedBySR, a.AllowDirty, a.Reason)
}

// submit performs a real regeneration once every confirmation is present.
// The check and the append happen under one lock, so two concurrent submits
// both create runs, each diffable against the one before it.
func (k *codeKG) submit(sel selectorArgs, confirmed, allowDirty bool, reason string) answer {
	run, b, fail := k.regenTarget(sel)
	if fail != nil {
		return *fail
	}
	var missing []string
	if !confirmed {
		missing = append(missing, "confirmed_by_sr=true")
	}
	if b.Worktree.Dirty && !allowDirty {
		missing = append(missing, "allow_dirty=true")
	}
	if len(missing) > 0 {
		return failure("refused", "a real regeneration needs every confirmation: "+strings.Join(missing, ", "),
			map[string]any{"missing": missing, "graph": runMeta(run)})
	}
	k.mu.Lock()
	prev, _ := latestOf(k.data.Runs, b)
	n := 0
	for _, r := range k.data.Runs {
		if r.Repository == b.Repository && r.Branch == b.Branch {
			n++
		}
	}
	next := &graphRun{
		ID: fmt.Sprintf("%s-%03d", b.IDPrefix, n+1), Repository: b.Repository, Branch: b.Branch,
		Commit: b.Worktree.Head, CreatedAt: time.Now().UTC().Format(time.RFC3339), Trigger: "kg_regenerate",
		Risks: prev.Risks,
	}
	next.Files, next.Relations, next.Findings, next.Anomalies = b.Worktree.Pending.apply(prev)
	k.data.Runs = append(k.data.Runs, next)
	k.mu.Unlock()

	var warnings []string
	if b.Worktree.Dirty {
		warnings = append(warnings, fmt.Sprintf("regenerated from a dirty worktree (%s): the graph includes uncommitted changes and may not match any commit",
			strings.Join(b.Worktree.DirtyFiles, ", ")))
	}
	body := map[string]any{
		"status": "completed", "new_graph": runMeta(next), "previous_graph_id": prev.ID,
		"warnings": nonNil(warnings),
		"next":     []string{fmt.Sprintf("kg_compare_runs with base_graph_id=%s and head_graph_id=%s", prev.ID, next.ID)},
	}
	if reason != "" {
		body["reason"] = reason
	}
	return answer{body: body}
}
