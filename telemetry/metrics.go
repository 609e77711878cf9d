// Package telemetry exports what the gateway does to the usual observability
// systems: Prometheus metrics (Metrics, an aggregation.Observer with a registry of
// its own) and OpenTelemetry traces (Tracing, an OTLP/HTTP exporter). Both read the
// gateway from outside, through its one observation point and its public state, so
// they live together here rather than inside the call chain.
package telemetry

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nexus-mcp/nexus/aggregation"
	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/memory"
)

// Label values that stand for names a label must not carry: an agent the config
// does not name, a tool or server no configured server offers. Label sets stay
// bounded by the config, whatever clients send.
const (
	UnknownAgent = "unknown"
	OtherTool    = "other"
)

// Source is the gateway state read at scrape time.
type Source interface {
	Servers() []aggregation.Status
	Sessions() map[string]int
	Memory() *memory.Memory
}

// Metrics are the gateway's Prometheus metrics, in a registry they own (never the
// global default registry). Call counts, latencies, refusals and memory lookups
// are counted as calls finish (Observe); children, sessions and memory size are
// read from the gateway when scraped.
type Metrics struct {
	reg      *prometheus.Registry
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	child    *prometheus.HistogramVec
	refusals *prometheus.CounterVec
	memory   *prometheus.CounterVec
	state    *stateCollector
	redact   func(string) string
}

// NewMetrics builds the metrics; the gateway's state is read from src (set later
// with SetSource when the gateway is built after the metrics). Every label value
// that comes from a config or a child (server, tool, agent, the policy and rule of
// a refusal) passes redact first, the wire's redactor: a tool named after a secret
// must not put it in a scrape. nil keeps values as they are.
func NewMetrics(redact func(string) string) *Metrics {
	if redact == nil {
		redact = func(s string) string { return s }
	}
	buckets := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nexus_calls_total",
			Help: "Tool calls by server, tool, agent and outcome (ok, tool_error, rpc_error, refused, timeout)."},
			[]string{"server", "tool", "agent", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "nexus_call_duration_seconds",
			Help: "Whole tool calls, from the request to the answer, by server and tool.", Buckets: buckets},
			[]string{"server", "tool"}),
		child: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "nexus_child_call_duration_seconds",
			Help: "The child's part of tool calls that reached it, by server and tool.", Buckets: buckets},
			[]string{"server", "tool"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nexus_refusals_total",
			Help: "Requests the policy refused, by agent, the policy the rule is in (origin) and the rule."},
			[]string{"agent", "origin", "rule"}),
		memory: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nexus_memory_lookups_total",
			Help: "What memory did for tool calls, by server and result (hit, semantic_hit, miss, bypass)."},
			[]string{"server", "result"}),
		state:  &stateCollector{redact: redact},
		redact: redact,
	}
	m.reg.MustRegister(m.calls, m.duration, m.child, m.refusals, m.memory, m.state,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// SetSource tells the metrics which gateway to read when scraped. Call it once,
// before serving Handler.
func (m *Metrics) SetSource(src Source) { m.state.src = src }

// Registry is the metrics' own registry (for tests and for more collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format (GET /metrics).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Observe counts one finished call (aggregation.Observer).
//
// Label values stay a bounded set: the tool and server are those the call matched
// in the manifest (a name that matched nothing is OtherTool), the agent one the
// config names (else UnknownAgent), each redacted.
func (m *Metrics) Observe(c *aggregation.Call) {
	agent := UnknownAgent
	if c.KnownAgent {
		agent = m.redact(c.Agent)
	}
	if c.Outcome == aggregation.OutcomeRefused {
		m.refusals.WithLabelValues(agent, m.redact(c.Origin), m.redact(c.Rule)).Inc()
	}
	if c.Method != "tools/call" {
		return
	}
	server, tool := OtherTool, OtherTool
	if c.Server != "" {
		server = m.redact(c.Server)
	}
	if c.Tool != "" {
		tool = m.redact(c.Tool)
	}
	m.calls.WithLabelValues(server, tool, agent, string(c.Outcome)).Inc()
	m.duration.WithLabelValues(server, tool).Observe(c.Duration.Seconds())
	if c.Child > 0 {
		m.child.WithLabelValues(server, tool).Observe(c.Child.Seconds())
	}
	if c.Memory != "" {
		m.memory.WithLabelValues(server, c.Memory).Inc()
	}
}

// stateCollector reads the gateway's state when scraped: children by state and
// their restarts, sessions by front, memory's size.
type stateCollector struct {
	src    Source
	redact func(string) string
}

var (
	serversDesc  = prometheus.NewDesc("nexus_servers", "Configured servers by state (ready, connecting, retrying, restarting, failed).", []string{"state"}, nil)
	serverUpDesc = prometheus.NewDesc("nexus_server_up", "1 when the server is ready, else 0.", []string{"server"}, nil)
	restartsDesc = prometheus.NewDesc("nexus_server_restarts_total", "Times the server exited and was started again.", []string{"server"}, nil)
	toolsDesc    = prometheus.NewDesc("nexus_server_tools", "Tools the server offers.", []string{"server"}, nil)
	upstreamDesc = prometheus.NewDesc("nexus_server_upstream_sessions", "Upstream sessions (connections, or processes) the server has open: 1 for a shared server that is up, one per client session for a \"client\" server.", []string{"server"}, nil)
	sessionsDesc = prometheus.NewDesc("nexus_sessions", "Live client sessions by front (stdio, http).", []string{"front"}, nil)
	entriesDesc  = prometheus.NewDesc("nexus_memory_entries", "Results memory holds.", nil, nil)
	bytesDesc    = prometheus.NewDesc("nexus_memory_bytes", "Bytes of the results memory holds.", nil, nil)
	verifiedDesc = prometheus.NewDesc("nexus_memory_verified_total", "Answers served from memory that verification (memory.verify) also asked of the child, by tool and kind (similarity, exact).", []string{"tool", "kind"}, nil)
	refutedDesc  = prometheus.NewDesc("nexus_memory_refuted_total", "Verified answers the child answered differently: false hits (similarity) and stale answers (exact).", []string{"tool", "kind"}, nil)
	intervalDesc = prometheus.NewDesc("nexus_memory_refuted_rate_bound", "The 95% Wilson interval of the refuted rate, by tool, kind and bound (low, high).", []string{"tool", "kind", "bound"}, nil)
)

func (s *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{serversDesc, serverUpDesc, restartsDesc, toolsDesc, upstreamDesc, sessionsDesc, entriesDesc, bytesDesc,
		verifiedDesc, refutedDesc, intervalDesc} {
		ch <- d
	}
}

func (s *stateCollector) Collect(ch chan<- prometheus.Metric) {
	if s.src == nil {
		return
	}
	byState := map[aggregation.State]int{aggregation.StateReady: 0, aggregation.StateConnecting: 0,
		aggregation.StateRetrying: 0, aggregation.StateRestarting: 0, aggregation.StateFailed: 0, aggregation.StateNeedsLogin: 0, aggregation.StateIdle: 0}
	for _, st := range s.src.Servers() {
		byState[st.State]++
		up := 0.0
		if st.State == aggregation.StateReady {
			up = 1
		}
		name := s.redact(st.Name)
		ch <- prometheus.MustNewConstMetric(serverUpDesc, prometheus.GaugeValue, up, name)
		ch <- prometheus.MustNewConstMetric(restartsDesc, prometheus.CounterValue, float64(st.Restarts), name)
		ch <- prometheus.MustNewConstMetric(toolsDesc, prometheus.GaugeValue, float64(st.Tools), name)
		upstream := float64(st.UpstreamSessions)
		if st.Sessions != config.SessionsClient {
			upstream = up
		}
		ch <- prometheus.MustNewConstMetric(upstreamDesc, prometheus.GaugeValue, upstream, name)
	}
	for state, n := range byState {
		ch <- prometheus.MustNewConstMetric(serversDesc, prometheus.GaugeValue, float64(n), string(state))
	}
	for front, n := range s.src.Sessions() {
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(n), front)
	}
	if mem := s.src.Memory(); mem != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if st, err := mem.Stats(ctx); err == nil {
			ch <- prometheus.MustNewConstMetric(entriesDesc, prometheus.GaugeValue, float64(st.Entries))
			ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.GaugeValue, float64(st.Bytes))
		}
		for _, x := range mem.Measured() {
			tool := s.redact(x.Tool)
			for _, k := range []struct {
				kind              string
				verified, refuted int64
				rate              memory.Interval
			}{{"similarity", x.SemanticChecks, x.FalseHits, x.FalseHitRate}, {"exact", x.ExactChecks, x.Stale, x.StaleRate}} {
				if k.verified == 0 {
					continue
				}
				ch <- prometheus.MustNewConstMetric(verifiedDesc, prometheus.CounterValue, float64(k.verified), tool, k.kind)
				ch <- prometheus.MustNewConstMetric(refutedDesc, prometheus.CounterValue, float64(k.refuted), tool, k.kind)
				ch <- prometheus.MustNewConstMetric(intervalDesc, prometheus.GaugeValue, k.rate.Low, tool, k.kind, "low")
				ch <- prometheus.MustNewConstMetric(intervalDesc, prometheus.GaugeValue, k.rate.High, tool, k.kind, "high")
			}
		}
	}
}
