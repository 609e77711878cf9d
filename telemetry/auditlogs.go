package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sync"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	logs "go.opentelemetry.io/proto/otlp/logs/v1"
	resource "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"

	"github.com/nexus-mcp/nexus/audit"
)

// AuditLogs sends each audit entry as an OpenTelemetry log record, with OTLP
// over HTTP (protobuf) to the collector the tracing endpoint names: the same
// fields as the audit record (docs/operations.md), one attribute each, the
// record's time as the log's. Entries are batched by a goroutine of its own
// (every second, or at 256 waiting); a collector that is down is logged and
// its batch dropped: a call never waits for it.
type AuditLogs struct {
	url     string
	version string
	client  *http.Client
	log     *slog.Logger

	mu      sync.Mutex
	pending []audit.Entry
	closed  bool
	dropped int

	wake, stop, done chan struct{}
}

const (
	auditLogsEvery = time.Second
	auditLogsBatch = 256
	auditLogsMax   = 10_000
)

// NewAuditLogs sends to the collector at endpoint (its base URL; records go to
// /v1/logs), or to the one the standard OTEL_EXPORTER_OTLP_LOGS_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT variables name; nil when none is set.
func NewAuditLogs(endpoint, version string, log *slog.Logger) (*AuditLogs, error) {
	target := ""
	switch {
	case endpoint != "":
		target = endpoint
	case os.Getenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT") != "":
		target = os.Getenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT") // the full URL, as the standard says
	case os.Getenv(envEndpoint) != "":
		target = os.Getenv(envEndpoint)
	default:
		return nil, nil
	}
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("audit logs endpoint %q: not a URL", target)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/logs"
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &AuditLogs{url: u.String(), version: version, client: &http.Client{Timeout: 10 * time.Second}, log: log,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go a.loop()
	return a, nil
}

// URL is where the records go.
func (a *AuditLogs) URL() string { return a.url }

// Add queues e. It never blocks.
func (a *AuditLogs) Add(e audit.Entry) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	if len(a.pending) >= auditLogsMax {
		a.pending = a.pending[1:]
		a.dropped++
	}
	a.pending = append(a.pending, e)
	if len(a.pending) >= auditLogsBatch {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
}

func (a *AuditLogs) loop() {
	defer close(a.done)
	tick := time.NewTicker(auditLogsEvery)
	defer tick.Stop()
	failing := false
	for {
		stopping := false
		select {
		case <-a.stop:
			stopping = true
		case <-tick.C:
		case <-a.wake:
		}
		a.mu.Lock()
		batch, dropped := a.pending, a.dropped
		a.pending, a.dropped = nil, 0
		a.mu.Unlock()
		if dropped > 0 {
			a.log.Error("audit logs: records dropped: the collector could not keep up", "dropped", dropped, "url", a.url)
		}
		if len(batch) > 0 {
			// Logged once a streak: a collector that takes no logs must not
			// fill the gateway's log.
			if err := a.send(batch); err != nil && !failing {
				a.log.Warn("audit logs: a batch was not sent (and will not be retried); more failures are not logged until one works", "err", err, "records", len(batch))
				failing = true
			} else if err == nil && failing {
				a.log.Info("audit logs: the collector takes them again", "url", a.url)
				failing = false
			}
		}
		if stopping {
			return
		}
	}
}

// Close sends what waits and stops.
func (a *AuditLogs) Close() {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.closed = true
	a.mu.Unlock()
	close(a.stop)
	<-a.done
}

func (a *AuditLogs) send(batch []audit.Entry) error {
	body, err := proto.Marshal(a.request(batch))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	res, err := a.client.Do(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("%s answered %s", a.url, res.Status)
	}
	return nil
}

// request is batch as an OTLP export request: one resource (nexus), one scope,
// a log record per entry.
func (a *AuditLogs) request(batch []audit.Entry) *collogs.ExportLogsServiceRequest {
	str := func(k, v string) *common.KeyValue {
		return &common.KeyValue{Key: k, Value: &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: v}}}
	}
	recs := make([]*logs.LogRecord, 0, len(batch))
	for _, e := range batch {
		recs = append(recs, auditLogRecord(e))
	}
	return &collogs.ExportLogsServiceRequest{ResourceLogs: []*logs.ResourceLogs{{
		Resource: &resource.Resource{Attributes: []*common.KeyValue{str("service.name", "nexus"), str("service.version", a.version)}},
		ScopeLogs: []*logs.ScopeLogs{{Scope: &common.InstrumentationScope{Name: "nexus.audit", Version: audit.Schema},
			LogRecords: recs}},
	}}}
}

// auditLogRecord is one entry as a log record: every field of the entry an
// attribute under its JSON name (numbers as doubles, the arguments as their
// JSON text), the body the decision in words.
func auditLogRecord(e audit.Entry) *logs.LogRecord {
	var fields map[string]any
	b, _ := json.Marshal(e)
	_ = json.Unmarshal(b, &fields)
	attrs := make([]*common.KeyValue, 0, len(fields))
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		var v *common.AnyValue
		switch x := fields[k].(type) {
		case string:
			v = &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: x}}
		case float64:
			v = &common.AnyValue{Value: &common.AnyValue_DoubleValue{DoubleValue: x}}
		default:
			raw, _ := json.Marshal(x)
			v = &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: string(raw)}}
		}
		attrs = append(attrs, &common.KeyValue{Key: k, Value: v})
	}
	rec := &logs.LogRecord{Attributes: attrs, SeverityNumber: logs.SeverityNumber_SEVERITY_NUMBER_INFO, SeverityText: "INFO",
		EventName: "nexus.audit",
		Body:      &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: e.Agent + " " + e.Method + " " + e.Tool + ": " + e.Decision + " (" + e.Rule + "), " + e.Outcome}}}
	if e.Decision == audit.Denied {
		rec.SeverityNumber, rec.SeverityText = logs.SeverityNumber_SEVERITY_NUMBER_WARN, "WARN"
	}
	if t, err := time.Parse(time.RFC3339Nano, e.Time); err == nil {
		rec.TimeUnixNano = uint64(t.UnixNano())
	}
	rec.ObservedTimeUnixNano = uint64(time.Now().UnixNano())
	return rec
}
