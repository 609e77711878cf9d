package main

import (
	"runtime/debug"
	"testing"
)

func TestBuildCommit(t *testing.T) {
	rev := "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"no build info", nil, ""},
		{"not stamped", &debug.BuildInfo{}, ""},
		{"a clean clone", &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}}, " (commit 0123456789ab)"},
		{"a clone with changes", &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}}, " (commit 0123456789ab, with changes not committed)"},
	}
	for _, tc := range tests {
		if got := buildCommit(tc.info); got != tc.want {
			t.Errorf("%s: buildCommit = %q, want %q", tc.name, got, tc.want)
		}
	}
}
