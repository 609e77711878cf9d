package samples

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// The code-kg sample dataset. It is built fresh for every server by
// codeDataset, so the package holds no mutable state; runs are immutable
// once built and regeneration appends new ones.
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

// Commits of syl2042/Nexus-Pocket main, oldest first.
const (
	commitNP001   = "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"
	commitNPSumm  = "7d1e2f3a4b5c6d7e8f90a1b2c3d4e5f607182930"
	commitNP002   = "e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d"
	commitNPDocs  = "5e6f7a8b9c0d1e2f3a4b5c6d7e8f90a1b2c3d4e5"
	commitNPHead  = "9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d"
	commitEcho001 = "b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f80"
	commitAI001   = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c"
)

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
	DedupeKey   string `json:"dedupe_key"`
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
// client path). pending is what a regeneration at Head would change.
type worktree struct {
	Head       string
	Dirty      bool
	DirtyFiles []string
	pending    delta
}

type delta struct {
	addFiles      []fileInfo
	addRelations  []relation
	resolve       []string // dedupe keys
	addFindings   []finding
	dropAnomalies []string
}

type branchInfo struct {
	Repository, Branch string
	idPrefix           string
	history            []commit // newest first
	worktree           worktree
}

type codeDataset struct {
	branches []*branchInfo
	runs     []*graphRun // oldest first
}

// dedupeKey identifies a finding across runs: its proof tuple.
func dedupeKey(tool, typ, p string, line int) string {
	return fmt.Sprintf("%s:%s:%s:%d", tool, typ, p, line)
}

// newFinding builds a finding whose dedupe key is derived from its proof.
func newFinding(tool, typ, p string, line int, sev, msg string) finding {
	base := strings.TrimSuffix(path.Base(p), path.Ext(p))
	return finding{
		FindingID:   strings.ToUpper(fmt.Sprintf("%s-%s-%s", tool, strings.TrimPrefix(typ, tool+"_"), base)),
		DedupeKey:   dedupeKey(tool, typ, p, line),
		SourceTool:  tool,
		FindingType: typ,
		Path:        p,
		Line:        line,
		Message:     msg,
		Severity:    sev,
	}
}

const (
	pMeetingSvc  = "services/echo/app/services/meeting_service.py"
	pMeetingsAPI = "services/echo/app/api/meetings.py"
	pMeetingMdl  = "services/echo/app/models/meeting.py"
	pTranscript  = "services/echo/app/services/transcript_store.py"
	pEchoMain    = "services/echo/app/main.py"
	pSummarySvc  = "services/echo/app/services/summary_service.py"
	pSyncWorker  = "services/echo/app/services/sync_worker.py"
	pTokens      = "services/auth/app/tokens.py"
	pSession     = "services/auth/app/session.py"
	pLogin       = "services/auth/app/api/login.py"
	pAuthReqs    = "services/auth/requirements.txt"
	pNotesSync   = "services/notes/app/sync.py"
	pLegacySync  = "services/notes/app/legacy_sync.py"
	pNoteStorage = "services/notes/app/storage.py"
	pNotesAPI    = "services/notes/app/api/notes.py"
	pConfig      = "shared/config.py"
	pCrypto      = "shared/crypto.py"
	pHTTPClient  = "shared/http_client.py"
	pMigrate     = "scripts/migrate_notes.py"
	pWebClient   = "web/src/api/client.ts"
	pWebPackage  = "web/package.json"
	pReadme      = "README.md"
)

// newCodeDataset builds the sample dataset.
func newCodeDataset() *codeDataset {
	files := []fileInfo{
		{pMeetingSvc, "python", []string{"MeetingService", "MeetingService.create_meeting", "MeetingService.fingerprint_transcript", "MeetingService.export_minutes"}},
		{pMeetingsAPI, "python", []string{"create_meeting_route", "list_meetings_route"}},
		{pMeetingMdl, "python", []string{"Meeting"}},
		{pTranscript, "python", []string{"TranscriptStore", "TranscriptStore.save"}},
		{pEchoMain, "python", []string{"create_app"}},
		{pTokens, "python", []string{"issue_token", "verify_token", "refresh_token"}},
		{pSession, "python", []string{"SessionManager", "SessionManager.rotate"}},
		{pLogin, "python", []string{"login_route"}},
		{pAuthReqs, "requirements", nil},
		{pNotesSync, "python", []string{"sync_notes", "resolve_conflict"}},
		{pNoteStorage, "python", []string{"NoteStorage", "NoteStorage.search"}},
		{pNotesAPI, "python", []string{"list_notes_route"}},
		{pConfig, "python", []string{"load_settings"}},
		{pCrypto, "python", []string{"hash_password", "legacy_md5_digest"}},
		{pHTTPClient, "python", []string{"fetch_json"}},
		{pMigrate, "python", []string{"main"}},
		{pWebClient, "typescript", []string{"apiFetch"}},
		{pWebPackage, "json", nil},
		{pReadme, "markdown", nil},
	}
	rels := []relation{
		{pEchoMain, pMeetingsAPI, "imports"},
		{pMeetingsAPI, pMeetingSvc, "imports"},
		{pMeetingsAPI + "::create_meeting_route", pMeetingSvc + "::MeetingService.create_meeting", "calls"},
		{pMeetingSvc, pMeetingMdl, "imports"},
		{pMeetingSvc, pTranscript, "imports"},
		{pMeetingSvc, pCrypto, "imports"},
		{pMeetingSvc + "::MeetingService.create_meeting", pMeetingSvc + "::MeetingService.fingerprint_transcript", "calls"},
		{pMeetingSvc + "::MeetingService.create_meeting", pTranscript + "::TranscriptStore.save", "calls"},
		{pTranscript, pConfig, "imports"},
		{pLogin, pTokens, "imports"},
		{pLogin, pSession, "imports"},
		{pLogin + "::login_route", pTokens + "::issue_token", "calls"},
		{pSession, pTokens, "imports"},
		{pTokens, pSession, "imports"},
		{pSession + "::SessionManager.rotate", pTokens + "::refresh_token", "calls"},
		{pTokens, pConfig, "imports"},
		{pTokens, pCrypto, "imports"},
		{pNotesAPI, pNotesSync, "imports"},
		{pNotesAPI, pNoteStorage, "imports"},
		{pNotesAPI + "::list_notes_route", pNoteStorage + "::NoteStorage.search", "calls"},
		{pNotesSync, pNoteStorage, "imports"},
		{pNotesSync, pHTTPClient, "imports"},
		{pNotesSync, pLegacySync, "imports"},
		{pNotesSync + "::sync_notes", pHTTPClient + "::fetch_json", "calls"},
		{pNoteStorage, pConfig, "imports"},
		{pHTTPClient, pConfig, "imports"},
		{pMigrate, pNoteStorage, "imports"},
	}
	f := newFinding
	common := []finding{
		f("bandit", "bandit_b324_hashlib", pMeetingSvc, 1094, "high", "Use of weak SHA1 hash for security. Consider usedforsecurity=False."),
		f("bandit", "bandit_b324_hashlib", pMeetingSvc, 1210, "high", "Use of weak MD5 hash for security. Consider usedforsecurity=False."),
		f("bandit", "bandit_b105_hardcoded_password_string", pConfig, 42, "medium", "Possible hardcoded password: 'changeme'."),
		f("bandit", "bandit_b113_request_without_timeout", pHTTPClient, 18, "medium", "Call to requests without timeout."),
		f("bandit", "bandit_b303_md5", pCrypto, 27, "high", "Use of insecure MD2, MD4, MD5, or SHA1 hash function."),
		f("bandit", "bandit_b608_hardcoded_sql_expressions", pNoteStorage, 66, "high", "Possible SQL injection vector through string-based query construction."),
		f("ruff", "ruff_f401_unused_import", pEchoMain, 3, "low", "`os` imported but unused."),
		f("ruff", "ruff_e722_bare_except", pNotesSync, 88, "medium", "Do not use bare `except`."),
		f("ruff", "ruff_b006_mutable_argument_default", pSession, 54, "medium", "Do not use mutable data structures for argument defaults."),
		f("ruff", "ruff_f401_unused_import", pLogin, 5, "low", "`json` imported but unused."),
		f("ruff", "ruff_e501_line_too_long", pNoteStorage, 12, "info", "Line too long (131 > 120)."),
		f("osv", "osv_pypi_vulnerability", pAuthReqs, 7, "high", "pyjwt 2.3.0 is affected by a sample advisory (GHSA-sample-0001, algorithm confusion); fixed in 2.4.0."),
		f("osv", "osv_npm_vulnerability", pWebPackage, 14, "medium", "axios 0.21.1 is affected by a sample advisory (GHSA-sample-0002, SSRF); fixed in 0.21.2."),
		f("nexus_kg", "nexus_kg_parse_error", pMigrate, 57, "high", "SyntaxError: unexpected indent."),
		f("nexus_kg", "nexus_kg_import_cycle", pSession, 3, "medium", "Import cycle: session -> tokens -> session."),
		f("audit_ai", "audit_ai_token_refresh_race", pTokens, 77, "high", "refresh_token rotates the refresh token without invalidating the previous one."),
		f("audit_ai", "audit_ai_missing_authz_check", pMeetingsAPI, 31, "high", "create_meeting_route does not check workspace membership."),
		f("audit_ai", "audit_ai_pii_in_logs", pTranscript, 45, "medium", "Transcript text is logged at INFO level."),
		f("audit_ai", "audit_ai_unbounded_query", pNotesAPI, 22, "medium", "list_notes_route returns every note without a page limit."),
	}
	only001 := []finding{
		f("ruff", "ruff_f841_unused_variable", pNotesSync, 131, "low", "Local variable `conflict` is assigned to but never used."),
		f("ruff", "ruff_f401_unused_import", pLegacySync, 2, "low", "`time` imported but unused."),
	}
	only002 := []finding{
		f("nexus_kg", "nexus_kg_unresolved_import", pNotesSync, 4, "high", "Import `services.notes.app.legacy_sync` cannot be resolved."),
		f("bandit", "bandit_b324_hashlib", pSummarySvc, 40, "medium", "Use of weak SHA1 hash for security. Consider usedforsecurity=False."),
	}
	risks := []auditRisk{
		{"np-risk-auth-001", "AUTH-REFRESH-RACE", "Refresh token replay window", "high", "security", []string{pTokens, pSession},
			[]string{dedupeKey("audit_ai", "audit_ai_token_refresh_race", pTokens, 77)}, "A stolen refresh token stays valid after rotation; rotate and revoke atomically."},
		{"np-risk-echo-002", "ECHO-WEAK-HASH", "Weak hashing of transcript fingerprints", "high", "security", []string{pMeetingSvc},
			[]string{dedupeKey("bandit", "bandit_b324_hashlib", pMeetingSvc, 1094), dedupeKey("bandit", "bandit_b324_hashlib", pMeetingSvc, 1210)}, "SHA1 and MD5 fingerprints are used to deduplicate transcripts across workspaces."},
		{"np-risk-echo-003", "ECHO-AUTHZ", "Missing workspace authorization on meeting creation", "high", "security", []string{pMeetingsAPI, pMeetingSvc},
			[]string{dedupeKey("audit_ai", "audit_ai_missing_authz_check", pMeetingsAPI, 31)}, "Any authenticated user can create meetings in any workspace."},
		{"np-risk-notes-004", "NOTES-SQLI", "SQL built by string formatting in note storage", "high", "security", []string{pNoteStorage},
			[]string{dedupeKey("bandit", "bandit_b608_hardcoded_sql_expressions", pNoteStorage, 66)}, "NoteStorage.search interpolates the query text into SQL."},
		{"np-risk-shared-005", "SHARED-DEFAULT-PASSWORD", "Hard-coded default password in settings", "medium", "configuration", []string{pConfig},
			[]string{dedupeKey("bandit", "bandit_b105_hardcoded_password_string", pConfig, 42)}, "load_settings falls back to 'changeme' when the variable is unset."},
		{"np-risk-echo-006", "ECHO-PII-LOGS", "Transcript content in logs", "medium", "privacy", []string{pTranscript},
			[]string{dedupeKey("audit_ai", "audit_ai_pii_in_logs", pTranscript, 45)}, "Transcripts may contain personal data and are logged verbatim."},
		{"np-risk-notes-007", "NOTES-UNBOUNDED", "Unbounded notes listing", "low", "runtime", []string{pNotesAPI},
			[]string{dedupeKey("audit_ai", "audit_ai_unbounded_query", pNotesAPI, 22)}, "Large accounts load every note in one response."},
	}
	anomalies := []anomaly{
		{"np-anom-parse-001", "parse_error", pMigrate, 57, "SyntaxError: unexpected indent; the module is absent from the graph's symbols.", "high", true},
		{"np-anom-cycle-002", "import_cycle", pSession, 3, "services.auth.app.session and services.auth.app.tokens import each other.", "medium", false},
		{"np-anom-orphan-003", "orphan_module", pWebClient, 1, "No module imports web/src/api/client.ts.", "low", false},
	}
	unresolved := anomaly{"np-anom-import-004", "unresolved_import", pNotesSync, 4, "Import services.notes.app.legacy_sync does not resolve: the module was removed.", "high", true}

	legacy := fileInfo{pLegacySync, "python", []string{"legacy_merge"}}
	summary := fileInfo{pSummarySvc, "python", []string{"SummaryService", "SummaryService.summarize"}}

	run001 := &graphRun{
		ID: "g-np-main-001", Repository: "syl2042/Nexus-Pocket", Branch: "main", Commit: commitNP001,
		CreatedAt: "2026-05-04T08:00:00Z", Trigger: "scheduled",
		Files:     append(slices.Clone(files), legacy),
		Relations: append(slices.Clone(rels), relation{pLegacySync, pNoteStorage, "imports"}),
		Findings:  concat(common, only001),
		Risks:     risks,
		Anomalies: anomalies,
	}
	run002 := &graphRun{
		ID: "g-np-main-002", Repository: "syl2042/Nexus-Pocket", Branch: "main", Commit: commitNP002,
		CreatedAt: "2026-05-11T08:00:00Z", Trigger: "scheduled",
		Files: append(slices.Clone(files), summary),
		Relations: append(slices.Clone(rels),
			relation{pSummarySvc, pMeetingSvc, "imports"},
			relation{pMeetingsAPI, pSummarySvc, "imports"}),
		Findings:  concat(common, only002),
		Risks:     risks,
		Anomalies: append(slices.Clone(anomalies), unresolved),
	}
	worker := fileInfo{pSyncWorker, "python", []string{"SyncWorker", "SyncWorker.run"}}
	echo001 := &graphRun{
		ID: "g-np-echo-001", Repository: "syl2042/Nexus-Pocket", Branch: "feature/echo-sync", Commit: commitEcho001,
		CreatedAt: "2026-05-12T14:30:00Z", Trigger: "scheduled",
		Files:     append(slices.Clone(run002.Files), worker),
		Relations: append(slices.Clone(run002.Relations), relation{pSyncWorker, pMeetingSvc, "imports"}, relation{pSyncWorker, pTranscript, "imports"}),
		Findings:  concat(run002.Findings, []finding{f("ruff", "ruff_e722_bare_except", pSyncWorker, 61, "medium", "Do not use bare `except`.")}),
		Risks:     risks,
		Anomalies: run002.Anomalies,
	}

	infraFiles := []fileInfo{
		{"deploy/docker-compose.yml", "yaml", []string{"services.api", "services.worker"}},
		{"deploy/nginx.conf", "nginx", nil},
		{"scripts/deploy.sh", "shell", []string{"deploy_staging", "deploy_production"}},
		{"scripts/backup.sh", "shell", []string{"backup_db"}},
		{"ansible/roles/app/tasks/main.yml", "yaml", nil},
		{"ansible/site.yml", "yaml", nil},
	}
	infra := &graphRun{
		ID: "g-ai-main-001", Repository: "syl2042/aurora-infra", Branch: "main", Commit: commitAI001,
		CreatedAt: "2026-05-10T06:00:00Z", Trigger: "scheduled",
		Files: infraFiles,
		Relations: []relation{
			{"scripts/deploy.sh", "deploy/docker-compose.yml", "references"},
			{"ansible/site.yml", "ansible/roles/app/tasks/main.yml", "imports"},
			{"deploy/docker-compose.yml", "deploy/nginx.conf", "references"},
		},
		Findings: []finding{
			f("audit_ai", "audit_ai_unpinned_image", "deploy/docker-compose.yml", 9, "medium", "The api service pulls the :latest image tag."),
			f("nexus_kg", "nexus_kg_parse_error", "ansible/roles/app/tasks/main.yml", 23, "high", "YAML error: mapping values are not allowed here."),
			f("audit_ai", "audit_ai_production_without_confirmation", "scripts/deploy.sh", 48, "high", "deploy_production runs without an interactive confirmation."),
		},
		Risks: []auditRisk{{"ai-risk-deploy-001", "INFRA-PROD-DEPLOY", "Production deploy without confirmation", "high", "operations", []string{"scripts/deploy.sh"},
			[]string{"audit_ai:audit_ai_production_without_confirmation:scripts/deploy.sh:48"}, "A mistyped target deploys straight to production."}},
		Anomalies: []anomaly{{"ai-anom-parse-001", "parse_error", "ansible/roles/app/tasks/main.yml", 23, "YAML error: mapping values are not allowed here.", "high", true}},
	}

	return &codeDataset{
		branches: []*branchInfo{
			{Repository: "syl2042/Nexus-Pocket", Branch: "main", idPrefix: "g-np-main",
				history: []commit{
					{commitNPHead, "notes: add a timeout to the shared HTTP client", []string{pHTTPClient}},
					{commitNPDocs, "docs: README wording", []string{pReadme}},
					{commitNP002, "notes: drop legacy sync module", []string{pLegacySync, pNotesSync}},
					{commitNPSumm, "echo: summary service", []string{pSummarySvc, pMeetingsAPI}},
					{commitNP001, "auth: session rotation", []string{pSession, pTokens}},
				},
				worktree: worktree{Head: commitNPHead, pending: delta{
					resolve: []string{dedupeKey("bandit", "bandit_b113_request_without_timeout", pHTTPClient, 18)},
				}}},
			{Repository: "syl2042/Nexus-Pocket", Branch: "feature/echo-sync", idPrefix: "g-np-echo",
				history: []commit{{commitEcho001, "echo: background sync worker", []string{pSyncWorker}}},
				worktree: worktree{Head: commitEcho001, Dirty: true, DirtyFiles: []string{pMeetingSvc, pTranscript},
					pending: delta{resolve: []string{dedupeKey("audit_ai", "audit_ai_pii_in_logs", pTranscript, 45)}}}},
			{Repository: "syl2042/aurora-infra", Branch: "main", idPrefix: "g-ai-main",
				history:  []commit{{commitAI001, "deploy: staging and production targets", []string{"scripts/deploy.sh"}}},
				worktree: worktree{Head: commitAI001}},
		},
		runs: []*graphRun{run001, run002, echo001, infra},
	}
}

func concat[T any](a, b []T) []T { return append(slices.Clone(a), b...) }

// apply builds the run a regeneration at the worktree head would produce.
func (d delta) apply(prev *graphRun) (files []fileInfo, rels []relation, fs []finding, anoms []anomaly) {
	files = concat(prev.Files, d.addFiles)
	rels = concat(prev.Relations, d.addRelations)
	for _, x := range prev.Findings {
		if !slices.Contains(d.resolve, x.DedupeKey) {
			fs = append(fs, x)
		}
	}
	fs = append(fs, d.addFindings...)
	for _, a := range prev.Anomalies {
		if !slices.Contains(d.dropAnomalies, a.AnomalyID) {
			anoms = append(anoms, a)
		}
	}
	return files, rels, fs, anoms
}
