package telemetry

import (
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/aggregation"
)

// TestTimeline: calls land in their minute, errors and refusals are told
// apart, quantiles come within a bucket, and an hour later a minute is empty
// again.
func TestTimeline(t *testing.T) {
	now := time.Date(2026, 12, 3, 18, 0, 30, 0, time.UTC)
	tl := NewTimeline()
	tl.now = func() time.Time { return now }
	call := func(d time.Duration, outcome aggregation.Outcome, mem string) {
		tl.Observe(&aggregation.Call{Method: "tools/call", Duration: d, Outcome: outcome, Memory: mem})
	}
	for i := range 100 {
		call(time.Duration(i+1)*time.Millisecond, aggregation.OutcomeOK, "")
	}
	call(time.Second, aggregation.OutcomeRPCError, "")
	call(time.Millisecond, aggregation.OutcomeRefused, "")
	call(time.Millisecond, aggregation.OutcomeOK, "hit")
	tl.Observe(&aggregation.Call{Method: "prompts/get", Outcome: aggregation.OutcomeRefused})
	now = now.Add(2 * time.Minute)
	call(time.Millisecond, aggregation.OutcomeOK, "")

	pts := tl.Points()
	if len(pts) != TimelineMinutes {
		t.Fatalf("%d points", len(pts))
	}
	p := pts[len(pts)-3]
	if p.Calls != 103 || p.Errors != 1 || p.Refused != 1 || p.Hits != 1 || !p.Minute.Equal(time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC)) {
		t.Errorf("the first minute: %+v", p)
	}
	if p.P50 < 50*time.Millisecond || p.P50 > 50*time.Millisecond*1415/1000 || p.P95 < 95*time.Millisecond || p.P95 > 95*time.Millisecond*1415/1000 {
		t.Errorf("p50 %v p95 %v", p.P50, p.P95)
	}
	if last := pts[len(pts)-1]; last.Calls != 1 || pts[len(pts)-2].Calls != 0 {
		t.Errorf("the last minutes: %+v %+v", pts[len(pts)-2], last)
	}
	hours := tl.Hours()
	if len(hours) != TimelineHours || hours[len(hours)-1].Calls != 104 || !hours[len(hours)-1].Minute.Equal(time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC)) {
		t.Errorf("the hours: %+v", hours[len(hours)-1])
	}
	now = now.Add(time.Hour)
	if h := tl.Hours(); h[len(h)-2].Calls != 104 || h[len(h)-1].Calls != 0 {
		t.Errorf("an hour later, the hours: %+v %+v", h[len(h)-2], h[len(h)-1])
	}
	for _, p := range tl.Points() {
		if p.Calls != 0 {
			t.Errorf("an hour later, a minute still counts %+v", p)
		}
	}
}
