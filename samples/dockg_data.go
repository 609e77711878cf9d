package samples

// The doc-kg sample dataset: read-only, rebuilt for each server by
// newDocDataset so the package holds no shared mutable values.
//
// Facts the tests rely on:
//   - source_app capture has documents but no generated graph: every scope
//     on it answers graph_unavailable (not_generated).
//   - caller_app external-app is not authorized on echo (meeting
//     transcripts): graph_unavailable (not_authorized) when it asks for it.
//   - doc-onboarding-access contains a credential-like line that must come
//     out redacted.

type sourceApp struct {
	ID          string
	Title       string
	Generated   bool     // false: the Nexus graph of this source was never generated
	DeniedTo    []string // caller apps not authorized on this source
	GeneratedAt string
}

type workspaceInfo struct {
	ID, SourceApp, Title string
	Projects             []projectInfo
}

type projectInfo struct{ ID, Title string }

type document struct {
	ID, Kind, Title, Body      string
	SourceApp, Workspace, Proj string
	Tags                       []string
	UpdatedAt                  string
}

type entity struct{ ID, Name, Kind string }

type docRelation struct{ From, To, Type string }

type docDataset struct {
	sources    []sourceApp
	workspaces []workspaceInfo
	docs       []document
	entities   []entity
	relations  []docRelation
}

func newDocDataset() *docDataset {
	d := func(id, kind, src, ws, prj, updated, title, body string, tags ...string) document {
		return document{ID: id, Kind: kind, Title: title, Body: body, SourceApp: src, Workspace: ws, Proj: prj, Tags: tags, UpdatedAt: updated}
	}
	const (
		notes, echo, capture, manual = "nexus_pocket_notes", "echo", "capture", "manual"
	)
	return &docDataset{
		sources: []sourceApp{
			{ID: notes, Title: "Nexus Pocket notes", Generated: true, GeneratedAt: "2026-05-12T03:00:00Z"},
			{ID: echo, Title: "Echo meeting transcripts", Generated: true, DeniedTo: []string{"external-app"}, GeneratedAt: "2026-05-12T03:10:00Z"},
			{ID: capture, Title: "Capture clippings and screenshots", Generated: false},
			{ID: manual, Title: "Manual handbook pages", Generated: true, GeneratedAt: "2026-05-11T22:00:00Z"},
		},
		workspaces: []workspaceInfo{
			{"ws-engineering", notes, "Engineering", []projectInfo{{"prj-auth", "Auth service"}, {"prj-deploy", "Deployment"}}},
			{"ws-planning", notes, "Planning", []projectInfo{{"prj-roadmap", "Roadmap"}, {"prj-budget", "Budget"}}},
			{"ws-meetings", echo, "Meetings", []projectInfo{{"prj-weekly-sync", "Weekly sync"}, {"prj-incident-reviews", "Incident reviews"}}},
			{"ws-inbox", capture, "Inbox", []projectInfo{{"prj-clippings", "Clippings"}}},
			{"ws-handbook", manual, "Handbook", []projectInfo{{"prj-runbooks", "Runbooks"}, {"prj-onboarding", "Onboarding"}}},
		},
		docs: []document{
			d("doc-auth-refresh-bug", "note", notes, "ws-engineering", "prj-auth", "2026-05-06",
				"Auth module bug: refresh tokens are not revoked",
				"The auth module rotates refresh tokens but never revokes the previous one, so a leaked refresh token keeps working after rotation. "+
					"Reproduced on staging with two parallel refresh calls. Fix plan: revoke and rotate in one transaction in tokens.py, add a replay test, "+
					"then deploy behind the auth_rotation flag.", "auth", "bug", "security"),
			d("doc-auth-login-timeout", "note", notes, "ws-engineering", "prj-auth", "2026-05-03",
				"Login timeouts after session rotation",
				"Users get a 401 a few seconds after login when SessionManager.rotate races with the first API call. "+
					"The auth service answers before the new session is persisted. Workaround: retry once on 401 in the web client. Root cause is tracked with the refresh token bug.",
				"auth", "bug"),
			d("doc-auth-password-reset", "note", notes, "ws-engineering", "prj-auth", "2026-04-22",
				"Password reset emails delayed",
				"Password reset emails leave the queue up to ten minutes late because the mail worker shares a pool with exports. "+
					"Not an auth module defect: the fix is a dedicated queue for transactional mail.", "auth", "email"),
			d("doc-auth-sso-design", "note", notes, "ws-engineering", "prj-auth", "2026-04-15",
				"SSO design for the auth service",
				"Single sign-on will use an OIDC provider. The auth service keeps issuing its own short-lived access tokens after the OIDC login; "+
					"refresh stays internal. Open questions: account linking and workspace invitations.", "auth", "design", "sso"),
			d("doc-deploy-staging", "note", notes, "ws-engineering", "prj-deploy", "2026-05-08",
				"Deploying to staging",
				"Staging deploys run scripts/deploy.sh deploy_staging from the main branch. The staging database is reseeded nightly, "+
					"smoke tests run after every staging deploy, and anyone on the team may deploy to staging without approval.", "deploy", "staging"),
			d("doc-deploy-production", "note", notes, "ws-engineering", "prj-deploy", "2026-05-09",
				"Production deployment checklist",
				"Production deploys need a green staging run, a database backup taken the same day, a named approver, and the change window "+
					"(Tuesday or Thursday morning). Run deploy_production with the release tag, watch the error dashboard for thirty minutes, keep the rollback command ready.",
				"deploy", "production"),
			d("doc-deploy-env-diff", "note", notes, "ws-engineering", "prj-deploy", "2026-05-02",
				"Staging vs production configuration differences",
				"Staging runs one replica with a seeded database and verbose logs; production runs three replicas, real customer data and warning-level logs. "+
					"Feature flags default to on in staging and off in production.", "deploy", "staging", "production"),
			d("doc-deploy-rollback", "note", notes, "ws-engineering", "prj-deploy", "2026-04-30",
				"Rollback procedure after a failed release",
				"Roll back by redeploying the previous release tag; never restore the database unless the migration was destructive. "+
					"Announce the rollback in the incident channel and open an incident review.", "deploy", "rollback"),
			d("doc-q3-planning", "note", notes, "ws-planning", "prj-roadmap", "2026-06-20",
				"Q3 planning: roadmap priorities",
				"Q3 priorities: offline sync for notes, meeting summaries in Echo, and paying down auth debt. Hiring is frozen in Q3. "+
					"Success metric: sync conflicts below one percent.", "planning", "q3", "roadmap"),
			d("doc-q4-planning", "note", notes, "ws-planning", "prj-roadmap", "2026-09-18",
				"Q4 planning: roadmap and hiring",
				"Q4 priorities: single sign-on, the mobile capture app, and hiring two backend engineers. Offline sync moves to maintenance. "+
					"Budget review happens before the Q4 kickoff.", "planning", "q4", "roadmap", "hiring"),
			d("doc-q4-okrs", "note", notes, "ws-planning", "prj-roadmap", "2026-09-25",
				"Q4 OKRs draft",
				"Objective: make sign-in painless. Key results: SSO for three pilot customers, login error rate halved. "+
					"Objective: grow the team. Key result: two backend hires onboarded by December.", "okr", "q4"),
			d("doc-q3-retro", "note", notes, "ws-planning", "prj-roadmap", "2026-09-30",
				"Q3 retrospective",
				"Shipped in Q3: offline sync beta and Echo summaries. Slipped: auth debt, pushed to Q4 after the mass logout incident. "+
					"Lesson: freeze staging less often.", "retro", "q3"),
			d("doc-budget-2026", "note", notes, "ws-planning", "prj-budget", "2026-01-12",
				"Infrastructure budget 2026",
				"Hosting for production is two thirds of the infrastructure budget; staging is capped at one small node. "+
					"Backups and monitoring are budgeted separately.", "budget", "infrastructure"),
			d("doc-echo-weekly-0428", "transcript", echo, "ws-meetings", "prj-weekly-sync", "2026-04-28",
				"Weekly sync 28 April: staging freeze",
				"Transcript. Lea: staging is frozen until the migration lands. Marc: then nobody deploys to staging this week. "+
					"Decision: freeze staging until Thursday; production release moves to next week.", "weekly", "staging"),
			d("doc-echo-weekly-0505", "transcript", echo, "ws-meetings", "prj-weekly-sync", "2026-05-05",
				"Weekly sync 5 May: auth incident follow-up",
				"Transcript. Sam: the refresh token bug explains the mass logout. Lea: we revoke and rotate together, tests first. "+
					"Decision: fix the auth module before any new production deploy.", "weekly", "auth"),
			d("doc-echo-weekly-0512", "transcript", echo, "ws-meetings", "prj-weekly-sync", "2026-05-12",
				"Weekly sync 12 May: Q4 planning kickoff",
				"Transcript. Marc: next quarter needs SSO and two hires. Lea: then the roadmap must include onboarding time. "+
					"Decision: draft the OKRs by Friday.", "weekly", "planning", "q4"),
			d("doc-echo-planning-q3", "transcript", echo, "ws-meetings", "prj-weekly-sync", "2026-06-18",
				"Planning meeting: Q3 scope cut",
				"Transcript. Sam: offline sync and summaries fit the quarter, SSO does not. Marc: cut it. Decision: SSO moves to Q4.",
				"planning", "q3"),
			d("doc-echo-incident-staging", "transcript", echo, "ws-meetings", "prj-incident-reviews", "2026-04-24",
				"Incident review: staging database wiped",
				"Transcript. The nightly reseed ran against the wrong host and wiped the staging database. No production impact. "+
					"Action: the reseed job checks the environment name before running.", "incident", "staging"),
			d("doc-echo-incident-auth", "transcript", echo, "ws-meetings", "prj-incident-reviews", "2026-05-04",
				"Incident review: mass logout after auth deploy",
				"Transcript. After the auth deploy every user was logged out: old refresh tokens were rejected while new ones were not yet issued. "+
					"Action: staged rollout for auth changes and a canary in production.", "incident", "auth", "production"),
			d("doc-capture-oauth-article", "capture", capture, "ws-inbox", "prj-clippings", "2026-05-01",
				"Clipped article: refresh token rotation best practices",
				"Rotate refresh tokens on every use and detect reuse: a reused refresh token means theft, revoke the whole family.", "auth", "article"),
			d("doc-capture-dashboard", "capture", capture, "ws-inbox", "prj-clippings", "2026-05-04",
				"Screenshot: production error dashboard",
				"Screenshot of the production error dashboard during the mass logout: 401 rate at forty percent for twelve minutes.", "production", "screenshot"),
			d("doc-runbook-deploy", "manual_page", manual, "ws-handbook", "prj-runbooks", "2026-03-30",
				"Runbook: deploy a release to production",
				"1. Check the staging smoke tests. 2. Take a backup. 3. Run deploy_production with the tag. 4. Watch dashboards. "+
					"5. Roll back with the previous tag if the error rate doubles.", "runbook", "deploy", "production"),
			d("doc-runbook-oncall", "manual_page", manual, "ws-handbook", "prj-runbooks", "2026-02-14",
				"Runbook: on-call handover",
				"Hand over open incidents, silenced alerts and pending deploys. The incoming on-call confirms access to production dashboards.", "runbook", "oncall"),
			d("doc-runbook-db-backup", "manual_page", manual, "ws-handbook", "prj-runbooks", "2026-02-20",
				"Runbook: database backups and restore",
				"Production backups run hourly and are kept thirty days; staging is never backed up because it is reseeded. Restores need two people.",
				"runbook", "database"),
			d("doc-onboarding-dev", "manual_page", manual, "ws-handbook", "prj-onboarding", "2026-01-20",
				"Developer onboarding: local setup",
				"Clone the repositories under the apps directory, run the bootstrap script, and ask for staging access. Production access comes after two weeks.",
				"onboarding"),
			d("doc-onboarding-access", "manual_page", manual, "ws-handbook", "prj-onboarding", "2026-01-21",
				"Access requests and permissions",
				"Request access through the admin portal, never by sharing credentials. An old note pasted a header like Authorization: Bearer sample0000notasecret "+
					"and was purged; credentials in documents are redacted.", "onboarding", "access"),
		},
		entities: []entity{
			{"ent-auth-module", "auth module", "component"},
			{"ent-refresh-token", "refresh token", "concept"},
			{"ent-staging", "staging", "environment"},
			{"ent-production", "production", "environment"},
			{"ent-q3", "Q3", "period"},
			{"ent-q4", "Q4", "period"},
			{"ent-sso", "single sign-on", "feature"},
			{"ent-hiring", "hiring", "topic"},
			{"ent-database", "database", "component"},
		},
		relations: []docRelation{
			{"doc-auth-refresh-bug", "ent-auth-module", "mentions"},
			{"doc-auth-refresh-bug", "ent-refresh-token", "mentions"},
			{"doc-auth-login-timeout", "ent-auth-module", "mentions"},
			{"doc-auth-login-timeout", "doc-auth-refresh-bug", "references"},
			{"doc-auth-password-reset", "ent-auth-module", "mentions"},
			{"doc-auth-sso-design", "ent-sso", "mentions"},
			{"doc-auth-sso-design", "ent-auth-module", "mentions"},
			{"doc-deploy-staging", "ent-staging", "mentions"},
			{"doc-deploy-production", "ent-production", "mentions"},
			{"doc-deploy-production", "doc-deploy-staging", "references"},
			{"doc-deploy-production", "doc-runbook-deploy", "references"},
			{"doc-deploy-env-diff", "ent-staging", "mentions"},
			{"doc-deploy-env-diff", "ent-production", "mentions"},
			{"doc-deploy-rollback", "doc-deploy-production", "follows_up"},
			{"doc-q3-planning", "ent-q3", "mentions"},
			{"doc-q4-planning", "ent-q4", "mentions"},
			{"doc-q4-planning", "ent-hiring", "mentions"},
			{"doc-q4-planning", "ent-sso", "mentions"},
			{"doc-q4-planning", "doc-q3-planning", "follows_up"},
			{"doc-q4-okrs", "doc-q4-planning", "follows_up"},
			{"doc-q4-okrs", "ent-q4", "mentions"},
			{"doc-q3-retro", "doc-q3-planning", "follows_up"},
			{"doc-q3-retro", "ent-q3", "mentions"},
			{"doc-budget-2026", "ent-production", "mentions"},
			{"doc-echo-weekly-0428", "ent-staging", "mentions"},
			{"doc-echo-weekly-0505", "doc-echo-incident-auth", "follows_up"},
			{"doc-echo-weekly-0505", "ent-auth-module", "mentions"},
			{"doc-auth-refresh-bug", "doc-echo-weekly-0505", "decided_in"},
			{"doc-echo-weekly-0512", "ent-q4", "mentions"},
			{"doc-q4-okrs", "doc-echo-weekly-0512", "decided_in"},
			{"doc-echo-planning-q3", "ent-q3", "mentions"},
			{"doc-q3-planning", "doc-echo-planning-q3", "decided_in"},
			{"doc-echo-incident-staging", "ent-staging", "mentions"},
			{"doc-echo-incident-staging", "ent-database", "mentions"},
			{"doc-echo-incident-auth", "ent-auth-module", "mentions"},
			{"doc-echo-incident-auth", "ent-production", "mentions"},
			{"doc-capture-oauth-article", "ent-refresh-token", "mentions"},
			{"doc-capture-dashboard", "ent-production", "mentions"},
			{"doc-runbook-deploy", "ent-production", "mentions"},
			{"doc-runbook-db-backup", "ent-database", "mentions"},
			{"doc-runbook-db-backup", "ent-production", "mentions"},
			{"doc-onboarding-dev", "ent-staging", "mentions"},
			{"doc-runbook-oncall", "ent-production", "mentions"},
		},
	}
}
