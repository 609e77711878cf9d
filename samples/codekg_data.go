package samples

import (
	_ "embed"
	"encoding/json"
	"slices"
)

// The code-kg sample dataset, codekg_data.json, whose keys are the field
// names below in lower camel case (encoding/json matches them regardless of
// case). It is decoded afresh for
// every server by newCodeDataset, so the package holds no mutable state; runs
// are immutable once decoded and regeneration appends new ones.
//
// Facts the tests (and gateway tests) rely on:
//   - syl2042/Nexus-Pocket has two branches, so a selector without branch
//     is ambiguous; main has runs g-np-main-001 (commit a1b2c3d…) and
//     g-np-main-002 (commit e4f5a6b…, latest). Its worktree is clean, at
//     9c8d7e6…, two commits ahead of the latest graph.
//   - feature/echo-sync (g-np-echo-001) has a dirty worktree touching
//     meeting_service.py and transcript_store.py, which carry findings.
//   - syl2042/aurora-infra has one branch (main, g-ai-main-001); its
//     worktree is clean and at the graph's commit.
//   - (bandit, bandit_b324_hashlib, services/echo/app/services/meeting_service.py)
//     matches two findings in the Nexus-Pocket runs (lines 1094 and 1210).

type fileInfo struct {
	Path     string   `json:"path"`
	Language string   `json:"language"`
	Symbols  []string `json:"symbols"`
}

type relation struct {
	From string `json:"from"`
	To   string `json:"to"`
	Kind string `json:"kind"` // imports | calls
}

type finding struct {
	FindingID   string `json:"finding_id"` // human-readable, not a reliable KG key
	DedupeKey   string `json:"dedupe_key"` // its proof tuple, "tool:type:path:line": the same finding across runs
	SourceTool  string `json:"source_tool"`
	FindingType string `json:"finding_type"`
	Path        string `json:"path"`
	Line        int    `json:"line"`
	Message     string `json:"message"`
	Severity    string `json:"severity"`
}

type auditRisk struct {
	RiskID      string   `json:"risk_id"`
	FindingID   string   `json:"finding_id"`
	Title       string   `json:"title"`
	Severity    string   `json:"severity"`
	Category    string   `json:"category"`
	Paths       []string `json:"paths"`
	FindingRefs []string `json:"finding_refs"` // dedupe keys
	Summary     string   `json:"summary"`
}

type anomaly struct {
	AnomalyID string `json:"anomaly_id"`
	Kind      string `json:"kind"` // parse_error | unresolved_import | import_cycle | orphan_module
	Path      string `json:"path"`
	Line      int    `json:"line"`
	Message   string `json:"message"`
	Severity  string `json:"severity"`
	Blocking  bool   `json:"blocking"`
}

// graphRun is one immutable snapshot of a branch.
type graphRun struct {
	ID, Repository, Branch, Commit, CreatedAt, Trigger string
	Files                                              []fileInfo
	Relations                                          []relation
	Findings                                           []finding
	Risks                                              []auditRisk
	Anomalies                                          []anomaly
}

// commit is one entry of a branch history, with the files it changed.
type commit struct {
	SHA     string
	Subject string
	Files   []string
}

// worktree is the server-side checkout registered for a branch (the
// remote_http runtime resolves it from repository + branch, never from a
// client path). Pending is what a regeneration at Head would change.
type worktree struct {
	Head       string
	Dirty      bool
	DirtyFiles []string
	Pending    delta
}

type delta struct {
	AddFiles      []fileInfo
	AddRelations  []relation
	Resolve       []string // dedupe keys
	AddFindings   []finding
	DropAnomalies []string
}

type branchInfo struct {
	Repository string
	Branch     string
	IDPrefix   string
	History    []commit // newest first
	Worktree   worktree
}

type codeDataset struct {
	Branches []*branchInfo
	Runs     []*graphRun // oldest first
}

// codeData is codekg_data.json: the branches with their histories and
// worktrees, and the runs, oldest first.
//
//go:embed codekg_data.json
var codeData string

// newCodeDataset decodes the dataset. The file is part of the binary, so a
// decoding error is a bug in it, which the tests catch.
func newCodeDataset() *codeDataset {
	var d codeDataset
	if err := json.Unmarshal([]byte(codeData), &d); err != nil {
		panic("samples: codekg_data.json: " + err.Error())
	}
	return &d
}

func concat[T any](a, b []T) []T { return append(slices.Clone(a), b...) }

// apply builds the run a regeneration at the worktree head would produce.
func (d delta) apply(prev *graphRun) (files []fileInfo, rels []relation, fs []finding, anoms []anomaly) {
	files = concat(prev.Files, d.AddFiles)
	rels = concat(prev.Relations, d.AddRelations)
	for _, x := range prev.Findings {
		if !slices.Contains(d.Resolve, x.DedupeKey) {
			fs = append(fs, x)
		}
	}
	fs = append(fs, d.AddFindings...)
	for _, a := range prev.Anomalies {
		if !slices.Contains(d.DropAnomalies, a.AnomalyID) {
			anoms = append(anoms, a)
		}
	}
	return files, rels, fs, anoms
}
