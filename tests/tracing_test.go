package tests

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is a collector of the test's own: it decodes the OTLP/HTTP protobuf
// requests the gateway sends and keeps their spans.
type otlpReceiver struct {
	mu    sync.Mutex
	spans map[string]span // by span id
	bad   []string
	// audit are the tools of the audit log records received (/v1/logs).
	audit []string
}

type span struct {
	name, traceID, parentID string
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	data, _ := io.ReadAll(body)
	var req coltrace.ExportTraceServiceRequest
	o.mu.Lock()
	defer o.mu.Unlock()
	if r.URL.Path == "/v1/logs" {
		var logs collogs.ExportLogsServiceRequest
		if proto.Unmarshal(data, &logs) != nil {
			http.Error(w, "not an OTLP protobuf logs export", http.StatusBadRequest)
			return
		}
		for _, rl := range logs.ResourceLogs {
			for _, sl := range rl.ScopeLogs {
				for _, rec := range sl.LogRecords {
					for _, kv := range rec.Attributes {
						if kv.Key == "tool" {
							o.audit = append(o.audit, kv.Value.GetStringValue())
						}
					}
				}
			}
		}
		return
	}
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(data, &req) != nil {
		o.bad = append(o.bad, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
		http.Error(w, "not an OTLP protobuf trace export", http.StatusBadRequest)
		return
	}
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				o.spans[hex.EncodeToString(s.SpanId)] = span{name: s.Name, traceID: hex.EncodeToString(s.TraceId), parentID: hex.EncodeToString(s.ParentSpanId)}
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Write(out)
}

func (o *otlpReceiver) byName(traceID, name string) (string, span, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for id, s := range o.spans {
		if s.traceID == traceID && s.name == name {
			return id, s, true
		}
	}
	return "", span{}, false
}

// TestTracesReachACollector: with tracing.endpoint set, a call over HTTP whose
// client sent a traceparent yields spans in that trace (the request, its policy,
// memory and child steps) at a local OTLP receiver, and the HTTP child gets a
// traceparent whose parent is the child step. The call's audit record reaches
// the same collector as a log record.
func TestTracesReachACollector(t *testing.T) {
	t.Parallel()
	recv := &otlpReceiver{spans: map[string]span{}}
	collector := httptest.NewServer(recv)
	defer collector.Close()

	// An HTTP child that keeps the traceparent of each request it gets.
	var mu sync.Mutex
	var childParents []string
	mcpSrv := server.NewMCPServer("remote", "1")
	mcpSrv.AddTool(mcp.NewTool("ping", mcp.WithDescription("Answers pong.")), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("pong"), nil
	})
	streamable := server.NewStreamableHTTPServer(mcpSrv)
	child := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tp := r.Header.Get("traceparent"); tp != "" {
			mu.Lock()
			childParents = append(childParents, tp)
			mu.Unlock()
		}
		streamable.ServeHTTP(w, r)
	}))
	defer child.Close()

	h := newHome(t, map[string]any{
		"servers": map[string]any{"remote": map[string]any{"transport": "streamable-http", "url": child.URL + "/mcp"}},
		"policy":  map[string]any{"default": map[string]any{"allow": []string{"*"}}},
		"tracing": map[string]any{"endpoint": collector.URL},
	})
	s := h.startServe("listening on", "--http", "127.0.0.1:0")

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	c, err := client.NewStreamableHttpClient(s.base+"/mcp", transport.WithHTTPHeaders(map[string]string{
		"traceparent": "00-" + traceID + "-" + parentID + "-01"}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: "2025-11-25", ClientInfo: mcp.Implementation{Name: "tracer", Version: "1"}}}); err != nil {
		t.Fatalf("initialize: %v\n%s", err, s.stderr)
	}
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "remote__ping"}})
	if err != nil || res.IsError || mcp.GetTextFromContent(res.Content[0]) != "pong" {
		t.Fatalf("call: %v %+v\n%s", err, res, s.stderr)
	}
	c.Close()
	s.stop(t) // shutting down sends the spans still batched

	call, callSpan, ok := recv.byName(traceID, "tools/call")
	if !ok {
		recv.mu.Lock()
		t.Fatalf("no tools/call span in the client's trace; received %v (refused requests: %v)\n%s", recv.spans, recv.bad, s.stderr)
	}
	if callSpan.parentID != parentID {
		t.Errorf("the request's span has parent %s, want the client's %s", callSpan.parentID, parentID)
	}
	steps := map[string]string{}
	for _, name := range []string{"policy", "memory", "child"} {
		id, sp, ok := recv.byName(traceID, name)
		if !ok {
			t.Errorf("no %s span in the trace", name)
			continue
		}
		steps[name] = id
		want := call
		if name == "child" {
			want = steps["memory"] // memory calls the child
		}
		if sp.parentID != want {
			t.Errorf("the %s span's parent is %s, want %s", name, sp.parentID, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	wantHeader := "00-" + traceID + "-" + steps["child"] + "-01"
	found := false
	for _, tp := range childParents {
		found = found || tp == wantHeader
	}
	if !found {
		t.Errorf("the HTTP child never got traceparent %s; it got %v", wantHeader, childParents)
	}
	// The audit record of the call went to the same collector as a log record.
	recv.mu.Lock()
	if strings.Join(recv.audit, ",") != "remote.ping" {
		t.Errorf("audit log records received for %v, want remote.ping", recv.audit)
	}
	recv.mu.Unlock()
	if strings.Contains(strings.Join(recv.bad, ","), "/v1/traces") {
		t.Errorf("the receiver refused exports: %v", recv.bad)
	}
}
