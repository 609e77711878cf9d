package replay

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReplay replays each dataset of testdata through a gateway, sessions
// alone and as one team, and prints the table docs/memory.md shows. It
// fails when an answer is served that the real tool did not give at that
// point, when a call is counted twice, or when the children answered a
// call memory says it saved.
func TestReplay(t *testing.T) {
	files, err := filepath.Glob("testdata/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no traces: %v", err)
	}
	var table strings.Builder
	table.WriteString("| dataset | mode | sessions | calls (reads) | saved exact within / across | saved similar within / across | wrong exact / similar | output chars saved | call through the gateway, median: forwarded / from memory | time saved |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, f := range files {
		calls, err := Load(f)
		if err != nil {
			t.Fatal(err)
		}
		if raceEnabled && os.Getenv("NEXUS_REPLAY_FULL") == "" {
			// The race detector makes the in-process gateway several times
			// slower; the suite replays a quarter of each dataset's sessions
			// under it, and the table in docs/memory.md comes from the full
			// replay without it.
			calls = firstSessions(calls, 4)
		}
		for _, team := range []bool{false, true} {
			mode := "sessions alone"
			if team {
				mode = "one team"
			}
			r, err := Replay(context.Background(), calls, t.TempDir(), team)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&table, "| %s | %s | %d | %d (%d) | %d / %d | %d / %d | %d / %d | %d | %s / %s | %s |\n",
				calls[0].Dataset, mode, r.Sessions, r.Calls, r.Reads, r.ExactWithin, r.ExactAcross,
				r.SimilarWithin, r.SimilarAcross, r.WrongExact, r.WrongSimilar, r.CharsSaved,
				median(r.Forwarded), median(r.Served), r.TimeSaved.Round(time.Microsecond))
			if r.Calls != len(calls) || r.Saved() > r.Reads {
				t.Errorf("%s %s: %d calls replayed of %d, %d saved of %d reads", f, mode, r.Calls, len(calls), r.Saved(), r.Reads)
			}
			if r.ChildCalls != int64(r.Calls-r.Saved()) {
				t.Errorf("%s %s: the children answered %d calls, want %d (%d calls, %d saved)", f, mode, r.ChildCalls, r.Calls-r.Saved(), r.Calls, r.Saved())
			}
			if len(r.SimilarRewrites) > 0 {
				t.Logf("%s %s: similarity hits by rewrite: %v", calls[0].Dataset, mode, fmtCounts(r.SimilarRewrites))
			}
			for _, ex := range r.similarExamples {
				t.Logf("  similar: %s", ex)
			}
			for _, w := range r.wrongSamples {
				t.Logf("  wrong: %s", w)
			}
			if r.WrongExact+r.WrongSimilar > 0 {
				t.Errorf("%s %s: %d wrong answers served (exact %d, similar %d)", calls[0].Dataset, mode,
					r.WrongExact+r.WrongSimilar, r.WrongExact, r.WrongSimilar)
			}
		}
	}
	t.Log("\n" + table.String())
}

// firstSessions is the calls of the first 1/part of the sessions in calls
// (sessions follow one another), at least one.
func firstSessions(calls []Call, part int) []Call {
	var sessions []string
	for _, c := range calls {
		if len(sessions) == 0 || sessions[len(sessions)-1] != c.Session {
			sessions = append(sessions, c.Session)
		}
	}
	keep := map[string]bool{}
	for _, s := range sessions[:max(len(sessions)/part, 1)] {
		keep[s] = true
	}
	var out []Call
	for _, c := range calls {
		if keep[c.Session] {
			out = append(out, c)
		}
	}
	return out
}

// median is the middle duration of ds, rounded to the microsecond ("-":
// none).
func median(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Microsecond).String()
}

func fmtCounts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
