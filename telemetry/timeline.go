package telemetry

import (
	"math"
	"sync"
	"time"

	"github.com/nexus-mcp/nexus/aggregation"
)

// TimelineMinutes is how far back a Timeline sees minute by minute: an hour;
// TimelineHours hour by hour: a day.
const (
	TimelineMinutes = 60
	TimelineHours   = 24
)

// latency buckets of a minute: bucket i holds durations up to
// latencyBase * 2^(i/2); the last holds everything longer. 42 buckets reach
// about 200s, each √2 wider than the one before.
const (
	latencyBuckets = 42
	latencyBase    = 100 * time.Microsecond
)

func latencyBucket(d time.Duration) int {
	if d <= latencyBase {
		return 0
	}
	i := int(math.Ceil(2 * math.Log2(float64(d)/float64(latencyBase))))
	return min(i, latencyBuckets-1)
}

// bucketBound is the upper bound of bucket i.
func bucketBound(i int) time.Duration {
	return time.Duration(float64(latencyBase) * math.Pow(2, float64(i)/2))
}

// minute is one minute's tool calls.
type minute struct {
	at      int64 // unix minute; a slot whose at is not the minute it stands for is empty
	calls   int64
	errors  int64 // tool_error, rpc_error, timeout
	refused int64
	hits    int64 // memory hits (semantic included)
	latency [latencyBuckets]int64
}

// Timeline keeps the last hour of tool calls in per-minute buckets, and the last
// day in per-hour ones: fixed rings, each bucket a few counters and a latency histogram
// (p50/p95 are read from it to within one bucket, ±19%). Its memory does not
// grow with traffic. It is an aggregation.Observer; the console draws it.
type Timeline struct {
	mu  sync.Mutex
	now func() time.Time
	m   [TimelineMinutes]minute
	h   [TimelineHours]minute // the same counters, an hour a bucket
}

// NewTimeline starts an empty timeline.
func NewTimeline() *Timeline { return &Timeline{now: time.Now} }

// Observe counts one finished tools/call, in the minute it finished.
func (t *Timeline) Observe(c *aggregation.Call) {
	if c.Method != "tools/call" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now().Unix()
	count(slot(t.m[:], now/60), c)
	count(slot(t.h[:], now/3600), c)
}

// count adds c to a bucket.
func count(m *minute, c *aggregation.Call) {
	m.calls++
	switch c.Outcome {
	case aggregation.OutcomeRefused:
		m.refused++
		return // never ran: its latency is the policy's, not a call's
	case aggregation.OutcomeOK:
	default:
		m.errors++
	}
	if c.Memory == "hit" || c.Memory == "semantic_hit" {
		m.hits++
	}
	m.latency[latencyBucket(c.Duration)]++
}

// slot is the bucket of period at in ring, emptied when it held an older one.
func slot(ring []minute, at int64) *minute {
	m := &ring[at%int64(len(ring))]
	if m.at != at {
		*m = minute{at: at}
	}
	return m
}

// Point is one minute of a Timeline.
type Point struct {
	Minute                 time.Time
	Calls, Errors, Refused int64
	Hits                   int64
	// P50 and P95 are the latency quantiles of the calls that ran (zero with none).
	P50, P95 time.Duration
}

// Points are the last TimelineMinutes minutes, oldest first, the current minute
// last; a minute without calls is a zero point.
func (t *Timeline) Points() []Point {
	t.mu.Lock()
	defer t.mu.Unlock()
	return points(t.m[:], t.now().Unix(), 60)
}

// Hours are the last TimelineHours hours, oldest first, the current hour last
// (Point.Minute is the hour's start).
func (t *Timeline) Hours() []Point {
	t.mu.Lock()
	defer t.mu.Unlock()
	return points(t.h[:], t.now().Unix(), 3600)
}

// points reads ring, whose buckets are period seconds long, up to the one of now.
func points(ring []minute, now, period int64) []Point {
	n := int64(len(ring))
	cur := now / period
	out := make([]Point, 0, n)
	for at := cur - n + 1; at <= cur; at++ {
		p := Point{Minute: time.Unix(at*period, 0)}
		if m := &ring[((at%n)+n)%n]; m.at == at {
			p.Calls, p.Errors, p.Refused, p.Hits = m.calls, m.errors, m.refused, m.hits
			p.P50, p.P95 = quantile(&m.latency, .5), quantile(&m.latency, .95)
		}
		out = append(out, p)
	}
	return out
}

// quantile reads q from a histogram: the upper bound of the bucket that holds
// the q-th call (an over- rather than an under-estimate).
func quantile(h *[latencyBuckets]int64, q float64) time.Duration {
	var n int64
	for _, c := range h {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(n)))
	var seen int64
	for i, c := range h {
		seen += c
		if seen >= rank {
			return bucketBound(i)
		}
	}
	return bucketBound(latencyBuckets - 1)
}
