package canon

import (
	"slices"
	"testing"
)

func TestSame(t *testing.T) {
	for _, tc := range []struct {
		a, b  string
		same  bool
		rules []string // when same: the rewrites that tell them apart
	}{
		// Meaning-preserving rewrites, each named.
		{"how do I rotate api keys", "how to rotate api keys", true, []string{"how-to"}},
		{"how can we rotate the API keys", "how to rotate api keys", true, []string{"article", "how-to"}},
		{"how does token refresh work", "how token refresh works", true, []string{"auxiliary", "inflection"}},
		{"open bugs in the auth module", "show me open bugs in the authentication module", true, []string{"imperative", "synonym"}},
		{"which queues does the notifier consume", "queues the notifier consumes", true, []string{"auxiliary", "inflection", "question-form"}},
		{"services called by the gateway", "services the gateway calls", true, []string{"inflection", "passive"}},
		{"the gateway is monitored by prometheus", "prometheus monitors the gateway", true, []string{"inflection", "passive"}},
		{"who was mentored by alice", "who did alice mentor", true, []string{"auxiliary", "inflection", "passive"}},
		{"dependencies of the plugin", "the plugin's dependencies", true, []string{"of-form", "possessive"}},
		{"services calling the auth service", "services that call the auth service", true, []string{"inflection", "relative-clause", "relative-pronoun"}},
		{"functions having doc comments", "functions with doc comments", true, []string{"synonym"}},
		{"services that have no owner", "services without an owner", true, []string{"article", "relative-pronoun", "synonym"}},
		{"when the build breaks, notify slack", "notify slack when the build breaks", true, []string{"clause-order"}},
		{"tests for the tokenizer", "tokenizer tests", true, []string{"article", "compound"}},
		{"top ten slow queries", "top 10 slow queries", true, []string{"number-word"}},
		{"Open bugs!", "open bugs", true, []string{"spelling"}},
		{"open bugs", "open bugs", true, nil},
		{"flaky tests in the CI pipeline", "CI pipeline flaky tests", true, []string{"article", "compound"}},
		{"examples of list comprehensions in python", "python list comprehension examples", true, []string{"compound", "inflection", "of-form"}},
		{"README of the cli package", "the cli package's README", true, []string{"of-form", "possessive"}},
		{"tickets related to the outage", "tickets about the outage", true, []string{"inflection", "synonym"}},
		{"who owns the billing service", "owner of the billing service", true, []string{"agent-noun", "inflection"}},
		{"who owns the billing service", "who is the owner of the billing service", true, []string{"agent-noun", "article", "inflection", "question-form"}},
		{"who calls validateToken", "callers of validateToken", true, []string{"agent-noun", "inflection", "synonym"}},
		{"who supervises alice", "who is supervising alice", true, []string{"agent-noun", "inflection"}},
		{"rust borrow checker explained", "explanation of the rust borrow checker", true, []string{"article", "imperative", "inflection"}},
		{"kubernetes autoscaling docs", "docs on kubernetes autoscaling", true, []string{"compound"}},
		{"get the logs of the worker", "worker logs", true, []string{"article", "imperative", "of-form"}},
		{"who approved the budget request", "approver of the budget request", true, []string{"agent-noun", "inflection"}},
		{"engineers who are not in the office", "engineers not in the office", true, []string{"relative-clause", "relative-pronoun"}},
		{"endpoints that are slower than 200ms", "endpoints slower than 200ms", true, []string{"relative-clause", "relative-pronoun"}},
		{"services that do not use tls", "services not using tls", true, []string{"auxiliary", "relative-clause", "relative-pronoun", "synonym"}},
		{"flights from paris to london", "paris to london flights", true, []string{"compound"}},
		{"tomorrow's meetings", "meetings tomorrow", true, []string{"possessive"}},
		{"this week's standups", "standups this week", true, []string{"possessive"}},
		{"all open bugs", "every open bug", true, []string{"inflection", "synonym"}},
		{"changes since v2.3", "changes since version 2.3", true, []string{"version-prefix"}},
		{"api v2 changes", "api version 2 changes", true, []string{"version-prefix"}},
		{"services that are in staging", "services in staging", true, []string{"relative-clause", "relative-pronoun"}},
		{"last week's incidents", "incidents last week", true, []string{"possessive"}},
		{"who uses the logger", "users of the logger", true, []string{"agent-noun", "inflection", "synonym"}},
		{"tickets with more than 10 votes", "tickets having over 10 votes", true, []string{"synonym"}},
		{"when was the cache layer added", "when did the cache layer get added", true, []string{"auxiliary", "passive"}},

		// What always counts.
		{"why did the nightly backup fail", "when did the nightly backup fail", false, nil},
		{"where is the config loaded", "when is the config loaded", false, nil},
		{"why is the build slow", "how is the build slow", false, nil},
		{"functions renderTemplate invokes", "functions invoking renderTemplate", false, nil},
		{"classes BaseHandler extends", "classes extending BaseHandler", false, nil},
		{"packages the logger depends on", "packages that depend on the logger", false, nil},
		{"exported functions having doc comments", "exported functions lacking doc comments", false, nil},
		{"tests that fail", "tests that do not fail", false, nil},
		{"all handlers except the health check", "all handlers other than the health check", true, []string{"synonym"}},
		{"all handlers except the health check", "all handlers including the health check", false, nil},
		{"top 5 slow queries", "top 10 slow queries", false, nil},
		{"release notes for v1.2", "release notes for v1.3", false, nil},
		{"cheapest flights to tokyo", "cheap flights to tokyo", false, nil},
		{"flights from paris to london", "flights from london to paris", false, nil},
		{"files in the shared drive", "files outside the shared drive", false, nil},
		{"who calls validateToken", "what does validateToken call", false, nil},
		{"files that are imported", "files that import", false, nil},
		{"modules that were loaded", "modules that loaded", false, nil},
		{"users of the group", "user groups", false, nil},
		{"search cluster runbook", "cluster runbook", false, nil},
		{"larger instances", "large instances", false, nil},
		{"generic handlers", "general handlers", false, nil},
		{"what reads the config", "read the config", false, nil},
		{"what changed in the API", "changes in the API", false, nil},
		{"deployer config", "deployment config", false, nil},
		{"logs of the k8s operator", "logs of the k8s operation", false, nil},
		// A compound leaves its relation unsaid; two stated ones must agree.
		{"docs for the user", "the user's docs", false, nil},
		{"tests for the parser", "tests in the parser", false, nil},
		{"tickets in the backlog", "the backlog's tickets", false, nil},
		{"flights from tokyo", "tokyo flights", false, nil},
		{"who does alice supervise", "supervisor of alice", false, nil},
		{"who supervises alice", "who does alice supervise", false, nil},
		// "get" is a verb only where its object says so; "a" may be a letter.
		{"get requests to the API", "requests to the API", false, nil},
		{"vitamin a", "vitamin", false, nil},
		{"plan a or b", "plan or b", false, nil},
		{"option A", "an option", false, nil},
		{"flights from paris to london", "london to paris flights", false, nil},
		{"v2 tickets", "2 tickets", false, nil},
		{"version 2 tickets", "2 tickets", false, nil},
		{"bugs in the fix", "bugs for the fix", false, nil},
		{"the team's members", "members in the team", false, nil},
		{"who reports to alice", "reporter of alice", false, nil},
		{"meetings tomorrow", "yesterday's meetings", false, nil},
		{"engineers who are not on call", "engineers on call", false, nil},
		{"endpoints that are slower than 200ms", "endpoints faster than 200ms", false, nil},
		{"more than 5 retries", "at least 5 retries", false, nil},
		{"files that get deleted", "files that delete", false, nil},
		{"who reviewed the PR", "who did the PR review", false, nil},
		{"services not using tls", "services using tls", false, nil},
		{"a plan for the outage", "plan for the outage", true, []string{"article"}},
	} {
		rules, ok := Same(tc.a, tc.b)
		if ok != tc.same {
			t.Errorf("Same(%q, %q) = %v, want %v (forms %q / %q)", tc.a, tc.b, ok, tc.same, Normalize(tc.a), Normalize(tc.b))
			continue
		}
		if ok && !slices.Equal(rules, tc.rules) {
			t.Errorf("Same(%q, %q): rewrites %q, want %q", tc.a, tc.b, rules, tc.rules)
		}
		// Symmetric.
		if _, back := Same(tc.b, tc.a); back != ok {
			t.Errorf("Same(%q, %q) = %v but reversed %v", tc.a, tc.b, ok, back)
		}
	}
}

func TestSignificant(t *testing.T) {
	for _, tc := range []struct{ a, b, want string }{
		{"postgres connection pool settings", "postgres connection pool options", ""},
		{"why did the backup fail", "when did the backup fail", "when"},
		{"tests that fail", "tests that never fail", "never"},
		{"top 5 queries", "top 10 queries", "10"},
		{"config in staging", "config for staging", "for"},
		{"tests of the parser", "parser tests", "of"},
	} {
		if got := Significant(Normalize(tc.a), Normalize(tc.b)); got != tc.want {
			t.Errorf("Significant(%q, %q) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}
}
