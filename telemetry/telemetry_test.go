package telemetry

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nexus-mcp/nexus/aggregation"
	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/memory/memorytest"
	"github.com/nexus-mcp/nexus/memory/sqlite"
)

// TestLabelsStayBounded: a name the config does not know never becomes a label
// value, whatever a client sends.
func TestLabelsStayBounded(t *testing.T) {
	m := NewMetrics(nil)
	calls := []aggregation.Call{
		{Method: "tools/call", Agent: "coder", KnownAgent: true, Tool: "fx.echo", Server: "fx", Outcome: aggregation.OutcomeOK, Duration: time.Millisecond, Child: time.Millisecond, Memory: "miss"},
		{Method: "tools/call", Agent: "made-up-by-a-client", Requested: "fx__no_such_tool", Outcome: aggregation.OutcomeRPCError, Duration: time.Millisecond},
		{Method: "tools/call", Agent: "another-stranger", Tool: "fx.destroy", Server: "fx", Decided: true, Rule: "no allow rule matches", Origin: "built-in default", Outcome: aggregation.OutcomeRefused},
		{Method: "prompts/get", Agent: "coder", KnownAgent: true, Tool: "fx.greet", Server: "fx", Decided: true, Rule: `deny "fx.*"`, Origin: "policy.agents.coder", Outcome: aggregation.OutcomeRefused},
	}
	for i := range calls {
		m.Observe(&calls[i])
	}
	tests := []struct {
		name  string
		value float64
		want  float64
	}{
		{"coder's echo", testutil.ToFloat64(m.calls.WithLabelValues("fx", "fx.echo", "coder", "ok")), 1},
		{"an unknown tool of an unknown agent", testutil.ToFloat64(m.calls.WithLabelValues("other", "other", "unknown", "rpc_error")), 1},
		{"a stranger refused", testutil.ToFloat64(m.refusals.WithLabelValues("unknown", "built-in default", "no allow rule matches")), 1},
		{"a prompt refused", testutil.ToFloat64(m.refusals.WithLabelValues("coder", "policy.agents.coder", `deny "fx.*"`)), 1},
		{"memory's miss", testutil.ToFloat64(m.memory.WithLabelValues("fx", "miss")), 1},
		{"calls series", float64(testutil.CollectAndCount(m.calls)), 3}, // the prompt is not a tool call
	}
	for _, tt := range tests {
		if tt.value != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, tt.value, tt.want)
		}
	}
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, metric := range f.Metric {
			for _, l := range metric.Label {
				if v := l.GetValue(); strings.Contains(v, "stranger") || strings.Contains(v, "made-up") || strings.Contains(v, "no_such_tool") {
					t.Errorf("%s has label %s=%q", f.GetName(), l.GetName(), v)
				}
			}
		}
	}
}

func TestTracingOffUnlessConfigured(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	tr, err := NewTracing(context.Background(), "", "test")
	if err != nil || tr != nil {
		t.Fatalf("no endpoint: %v, %v; want tracing off", tr, err)
	}
	tr, err = NewTracing(context.Background(), "http://127.0.0.1:4318", "test")
	if err != nil || tr == nil || tr.Endpoint != "http://127.0.0.1:4318/v1/traces" {
		t.Fatalf("with an endpoint: %+v, %v", tr, err)
	}
	_ = tr.Shutdown(context.Background())
}

type memorySource struct{ m *memory.Memory }

func (memorySource) Servers() []aggregation.Status { return nil }
func (memorySource) Sessions() map[string]int      { return nil }
func (s memorySource) Memory() *memory.Memory      { return s.m }

// TestVerificationMetrics: what memory's verification measured is scraped
// per tool: answers verified, refuted, and the refuted rate's interval.
func TestVerificationMetrics(t *testing.T) {
	m := memorytest.OpenMemory(t, memory.Options{Backend: sqlite.File(filepath.Join(t.TempDir(), "memory.db"))})
	m.SetSettings(memory.Settings{TTL: map[string]memory.TTL{"*": {Never: true}}, Verify: memory.Verify{Rate: 1, PerMinute: 10}})
	c := &memorytest.Child{} // a paraphrase's own answer differs: the similarity hit is refuted
	memorytest.Do(t, m, "", memorytest.SearchTool(), memorytest.SearchArgs("postgres connection pool settings", 10), c)
	memorytest.DoVerified(t, m, "", memorytest.SearchTool(), memorytest.SearchArgs("the postgres connection pool settings", 10), c)
	memorytest.WaitFor(t, "the verification", func() bool { return len(m.Measured()) == 1 && m.Measured()[0].SemanticChecks == 1 })

	metrics := NewMetrics(nil)
	metrics.SetSource(memorySource{m})
	const want = `
# HELP nexus_memory_refuted_total Verified answers the child answered differently: false hits (similarity) and stale answers (exact).
# TYPE nexus_memory_refuted_total counter
nexus_memory_refuted_total{kind="similarity",tool="doc-kg.doc_kg_search"} 1
# HELP nexus_memory_verified_total Answers served from memory that verification (memory.verify) also asked of the child, by tool and kind (similarity, exact).
# TYPE nexus_memory_verified_total counter
nexus_memory_verified_total{kind="similarity",tool="doc-kg.doc_kg_search"} 1
`
	if err := testutil.GatherAndCompare(metrics.Registry(), strings.NewReader(want), "nexus_memory_verified_total", "nexus_memory_refuted_total"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(metrics.Registry(), "nexus_memory_refuted_rate_bound"); err != nil || n != 2 {
		t.Errorf("interval bounds: %d series, %v", n, err)
	}
}
