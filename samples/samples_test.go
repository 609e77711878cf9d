package samples

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// session is a real MCP client session on a sample server.
type session struct {
	t *testing.T
	c *client.Client
}

func initialize(t *testing.T, c *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "samples-test", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
}

func inProcess(t *testing.T, srv *server.MCPServer) *session {
	t.Helper()
	c, err := client.NewInProcessClient(srv)
	if err != nil {
		t.Fatalf("in-process client: %v", err)
	}
	initialize(t, c)
	return &session{t: t, c: c}
}

// callRaw calls a tool; args is marshalled as the wire arguments. Every
// answer is checked for the invariants all tools share: structuredContent
// present and equal to the text content, and no credential.
func (s *session) callRaw(name string, args any) (map[string]any, bool, error) {
	s.t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := s.c.CallTool(ctx, req)
	if err != nil {
		return nil, false, err
	}
	if res.StructuredContent == nil {
		s.t.Fatalf("%s: no structuredContent", name)
	}
	if len(res.Content) != 1 {
		s.t.Fatalf("%s: want one text content, got %d", name, len(res.Content))
	}
	text, isText := res.Content[0].(mcp.TextContent)
	if !isText {
		s.t.Fatalf("%s: content is %T", name, res.Content[0])
	}
	for _, bad := range []string{"Bearer", "bearer ", "Authorization", "authorization"} {
		if strings.Contains(text.Text, bad) {
			s.t.Errorf("%s: answer contains %q: %s", name, bad, text.Text)
		}
	}
	var fromText map[string]any
	if err := json.Unmarshal([]byte(text.Text), &fromText); err != nil {
		s.t.Fatalf("%s: text content is not JSON: %v", name, err)
	}
	structured, _ := json.Marshal(res.StructuredContent)
	var fromStructured map[string]any
	_ = json.Unmarshal(structured, &fromStructured)
	if !reflect.DeepEqual(fromText, fromStructured) {
		s.t.Errorf("%s: text and structuredContent differ", name)
	}
	if _, has := fromStructured["status"]; !has {
		s.t.Errorf("%s: answer has no status: %s", name, text.Text)
	}
	return fromStructured, res.IsError, nil
}

func (s *session) call(name string, args map[string]any) (map[string]any, bool) {
	s.t.Helper()
	body, isErr, err := s.callRaw(name, args)
	if err != nil {
		s.t.Fatalf("%s(%v): %v", name, args, err)
	}
	return body, isErr
}

// expect calls a tool and checks the answer's status and isError.
func (s *session) expect(name string, args map[string]any, status string, isError bool) map[string]any {
	s.t.Helper()
	body, gotErr := s.call(name, args)
	if body["status"] != status || gotErr != isError {
		s.t.Fatalf("%s(%v): status %v isError %v, want %s/%v: %v", name, args, body["status"], gotErr, status, isError, body)
	}
	return body
}

func invalidParams(t *testing.T, s *session, name string, args any) {
	t.Helper()
	_, _, err := s.callRaw(name, args)
	if !errors.Is(err, mcp.ErrInvalidParams) {
		t.Fatalf("%s(%v): want JSON-RPC -32602, got %v", name, args, err)
	}
}

// rawTools lists the tools as raw JSON, schemas untouched by client decoding.
func rawTools(t *testing.T, srv *server.MCPServer) []map[string]any {
	t.Helper()
	resp := srv.HandleMessage(context.Background(), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
	b, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Result struct {
			Tools []map[string]any `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out.Result.Tools
}

var wantTools = map[string]map[string]bool{ // server -> tool -> readOnly
	CodeKGName: {
		"kg_latest_graph": true, "kg_graph_summary": true, "kg_list_audit_risks": true, "kg_get_audit_risk": true,
		"kg_list_anomalies": true, "kg_get_anomaly": true, "kg_resolve_finding": true, "kg_file_context": true,
		"kg_impact": true, "kg_compare_runs": true, "kg_compare_with_local_git": true, "kg_regenerate_dry_run": true,
		"kg_regenerate": false, "kg_regenerate_submit": false,
	},
	DocKGName: {
		"doc_kg_status": true, "doc_kg_list_source_apps": true, "doc_kg_list_workspaces": true, "doc_kg_list_projects": true,
		"doc_kg_list_documents": true, "doc_kg_list_resources": true, "doc_kg_subgraph": true, "doc_kg_neighbors": true,
		"doc_kg_node": true, "doc_kg_relations": true, "doc_kg_search": true, "doc_kg_context_pack": true, "doc_kg_query": true,
	},
}

func TestToolDeclarations(t *testing.T) {
	for name, want := range wantTools {
		srv, err := New(name, Options{})
		if err != nil {
			t.Fatal(err)
		}
		tools := rawTools(t, srv)
		if len(tools) != len(want) {
			t.Errorf("%s: %d tools, want %d", name, len(tools), len(want))
		}
		for _, tool := range tools {
			tn, _ := tool["name"].(string)
			readOnly, listed := want[tn]
			if !listed {
				t.Errorf("%s: unexpected tool %s", name, tn)
				continue
			}
			ann, _ := tool["annotations"].(map[string]any)
			if ann["readOnlyHint"] != readOnly || ann["destructiveHint"] != false {
				t.Errorf("%s: annotations %v, want readOnlyHint %v and destructiveHint false", tn, ann, readOnly)
			}
			if readOnly && ann["idempotentHint"] != true {
				t.Errorf("%s: read-only tool not idempotent", tn)
			}
			in, _ := tool["inputSchema"].(map[string]any)
			if in["type"] != "object" || in["additionalProperties"] != false {
				t.Errorf("%s: input schema not closed: %v", tn, in)
			}
			props, _ := in["properties"].(map[string]any)
			for pn, p := range props {
				pm := p.(map[string]any)
				if d, _ := pm["description"].(string); d == "" {
					t.Errorf("%s.%s: no description", tn, pn)
				}
				if pn == "limit" && (pm["minimum"] != 1.0 || pm["maximum"] != 100.0 || pm["default"] != 20.0) {
					t.Errorf("%s.limit: bounds %v", tn, pm)
				}
				if pn == "source_tool" || pn == "caller_app" || pn == "source_app" {
					if _, has := pm["enum"]; !has {
						t.Errorf("%s.%s: no enum", tn, pn)
					}
				}
			}
			if out, _ := tool["outputSchema"].(map[string]any); out["type"] != "object" {
				t.Errorf("%s: no output schema", tn)
			}
			if d, _ := tool["description"].(string); d == "" {
				t.Errorf("%s: no description", tn)
			}
		}
	}
}

func TestNewNames(t *testing.T) {
	if _, err := New("graph-kg", Options{}); err == nil || !strings.Contains(err.Error(), "code-kg") || !strings.Contains(err.Error(), "doc-kg") {
		t.Fatalf("New(unknown) = %v, want an error listing the valid names", err)
	}
	for name, want := range map[string]string{CodeKGName: "nexus-code-kg", DocKGName: "nexus-doc-kg"} {
		srv, _ := New(name, Options{})
		c, err := client.NewInProcessClient(srv)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		req := mcp.InitializeRequest{}
		req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
		res, err := c.Initialize(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if res.ServerInfo.Name != want {
			t.Errorf("%s: server name %q, want %q", name, res.ServerInfo.Name, want)
		}
		_ = c.Close()
	}
}

func TestRootsFromEnv(t *testing.T) {
	sep := string(os.PathListSeparator)
	t.Setenv(EnvLocalRepoRoots, "/home/u/apps"+sep+sep+"relative"+sep+"/srv/repos/../code/")
	got := RootsFromEnv()
	want := []string{"/home/u/apps", "/srv/code"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RootsFromEnv = %v, want %v", got, want)
	}
}

// wrongValue returns a value of the wrong JSON type for a property.
func wrongValue(p map[string]any) any {
	switch p["type"] {
	case "string":
		return 42
	case "integer":
		return "ten"
	case "boolean":
		return "yes"
	default:
		return "not-an-array"
	}
}

// TestInvalidParams: every tool of both servers answers -32602 to an unknown
// field and to an ill-typed field, and the handler never runs.
func TestInvalidParams(t *testing.T) {
	for name := range wantTools {
		var log strings.Builder
		srv, _ := New(name, Options{CallLog: &syncWriter{b: &log}})
		s := inProcess(t, srv)
		for _, tool := range rawTools(t, srv) {
			tn := tool["name"].(string)
			invalidParams(t, s, tn, map[string]any{"bogus": 1})
			props := tool["inputSchema"].(map[string]any)["properties"].(map[string]any)
			for pn, p := range props {
				invalidParams(t, s, tn, map[string]any{pn: wrongValue(p.(map[string]any))})
				invalidParams(t, s, tn, map[string]any{strings.ToUpper(pn[:1]) + pn[1:]: "x"}) // case-folded name
				invalidParams(t, s, tn, map[string]any{pn: nil})
			}
			if _, has := props["limit"]; has {
				invalidParams(t, s, tn, map[string]any{"limit": 0})
				invalidParams(t, s, tn, map[string]any{"limit": 101})
				invalidParams(t, s, tn, map[string]any{"limit": 2.5})
			}
		}
		if strings.Contains(log.String(), "rejected") {
			t.Errorf("%s: call log records renamed calls", name)
		}
	}
	// Enum and required violations are invalid params too.
	s := inProcess(t, NewDocKG(Options{}))
	invalidParams(t, s, "doc_kg_search", map[string]any{"query": "x", "source_app": "slack"})
	invalidParams(t, s, "doc_kg_search", map[string]any{"query": "x", "caller_app": "browser"})
	invalidParams(t, s, "doc_kg_search", map[string]any{})
	invalidParams(t, s, "doc_kg_search", json.RawMessage(`[1,2]`))
	c := inProcess(t, NewCodeKG(Options{}))
	invalidParams(t, c, "kg_resolve_finding", map[string]any{"graph_id": "g-np-main-002", "source_tool": "pylint", "finding_type": "x", "path": "y"})
}

type syncWriter struct {
	b interface{ WriteString(string) (int, error) }
}

func (w *syncWriter) Write(p []byte) (int, error) { return w.b.WriteString(string(p)) }

// TestServeStdio runs Serve over a pipe with a real stdio client and the
// call log file of NEXUS_SAMPLE_CALL_LOG.
func TestServeStdio(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "calls.log")
	t.Setenv(EnvCallLog, logPath)
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var stderr strings.Builder
	go func() { done <- Serve(ctx, DocKGName, "", serverIn, serverOut, &syncWriter{b: &stderr}) }()

	c := client.NewClient(transport.NewIO(clientIn, clientOut, io.NopCloser(strings.NewReader(""))))
	initialize(t, c)
	s := &session{t: t, c: c}
	s.expect("doc_kg_status", map[string]any{}, "ok", false)
	s.expect("doc_kg_list_source_apps", map[string]any{"caller_app": "codex"}, "ok", false)
	invalidParams(t, s, "doc_kg_status", map[string]any{"bogus": true})

	cancel()
	_ = clientOut.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		lines = append(lines, sc.Text())
	}
	want := []string{"doc_kg_status", "doc_kg_list_source_apps", "doc_kg_status"}
	if !reflect.DeepEqual(lines, want) {
		t.Fatalf("call log %v, want %v", lines, want)
	}
}
