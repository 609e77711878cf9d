package telemetry

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nexus-mcp/nexus/aggregation"
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
