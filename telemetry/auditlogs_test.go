package telemetry

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/nexus-mcp/nexus/audit"
)

// TestAuditLogs: audit entries reach an OTLP/HTTP collector at /v1/logs as log
// records carrying every field of the record, the record's time as theirs.
func TestAuditLogs(t *testing.T) {
	var mu sync.Mutex
	var got []*collogs.ExportLogsServiceRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := &collogs.ExportLogsServiceRequest{}
		if r.URL.Path != "/v1/logs" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(body, req) != nil {
			t.Errorf("a request to %s %s", r.URL.Path, r.Header.Get("Content-Type"))
		}
		mu.Lock()
		got = append(got, req)
		mu.Unlock()
	}))
	defer srv.Close()
	a, err := NewAuditLogs(srv.URL, "test", nil)
	if err != nil || a == nil {
		t.Fatal(a, err)
	}
	at := time.Date(2026, 12, 3, 18, 4, 5, 123456000, time.UTC)
	r := audit.Record{Time: at, Agent: "coder", Method: "tools/call", Tool: "fs.delete", Server: "fs", Refused: true,
		Rule: `deny "fs.delete"`, Origin: "policy.agents.coder", Revision: "0123456789ab", Outcome: "refused", Duration: 40 * time.Microsecond}
	a.Add(r.Entry())
	a.Close()
	if len(got) != 1 {
		t.Fatalf("%d requests", len(got))
	}
	rl := got[0].ResourceLogs[0]
	rec := rl.ScopeLogs[0].LogRecords[0]
	attrs := map[string]string{}
	for _, kv := range rec.Attributes {
		attrs[kv.Key] = kv.Value.GetStringValue()
		if kv.Key == "duration_ms" && kv.Value.GetDoubleValue() != 0.04 {
			t.Errorf("duration_ms %v", kv.Value)
		}
	}
	for k, want := range map[string]string{"schema": audit.Schema, "agent": "coder", "tool": "fs.delete", "decision": "denied",
		"rule": `deny "fs.delete"`, "policy": "policy.agents.coder", "policy_revision": "0123456789ab", "cache": "none", "outcome": "refused", "session": ""} {
		if v, ok := attrs[k]; !ok || v != want {
			t.Errorf("attribute %s = %q (present %v), want %q", k, v, ok, want)
		}
	}
	if len(rec.Attributes) != 19 {
		t.Errorf("%d attributes, want the record's 19 fields", len(rec.Attributes))
	}
	if rec.TimeUnixNano != uint64(at.UnixNano()) || rec.SeverityText != "WARN" || rl.Resource.Attributes[0].Value.GetStringValue() != "nexus" {
		t.Errorf("the record: %v", rec)
	}
}
