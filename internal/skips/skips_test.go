package skips

import "testing"

func TestSummary(t *testing.T) {
	tests := []struct {
		name  string
		skips []Skip
		want  string
	}{
		{"none", nil, ""},
		{"grouped by need, subtests by their test", []Skip{
			{"PostgreSQL", "set NEXUS_TEST_PG_DSN", "TestReplica/a"},
			{"PostgreSQL", "set NEXUS_TEST_PG_DSN", "TestReplica/b"},
			{"Chromium", "apt-get install chromium", "TestStatusPage"},
			{"PostgreSQL", "set NEXUS_TEST_PG_DSN", "TestAudit"},
		}, "tests: SKIPPED for a missing prerequisite: Chromium (apt-get install chromium): TestStatusPage; PostgreSQL (set NEXUS_TEST_PG_DSN): TestAudit, TestReplica"},
		{"many become a count", []Skip{
			{"keychain", "run under .ci/keyring-session", "TestA"}, {"keychain", "run under .ci/keyring-session", "TestB"},
			{"keychain", "run under .ci/keyring-session", "TestC"}, {"keychain", "run under .ci/keyring-session", "TestD"},
		}, "tests: SKIPPED for a missing prerequisite: keychain (run under .ci/keyring-session): 4 tests"},
	}
	for _, tc := range tests {
		if got := Summary("tests", tc.skips); got != tc.want {
			t.Errorf("%s:\n got  %s\n want %s", tc.name, got, tc.want)
		}
	}
}
