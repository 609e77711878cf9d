package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/nexus-mcp/nexus/aggregation"
	"github.com/nexus-mcp/nexus/audit"
	"github.com/nexus-mcp/nexus/config"
)

// child is a remote MCP server in this process: echo is read-only, write is
// not (so calls of it are audited).
func child(t *testing.T) string {
	t.Helper()
	s := server.NewMCPServer("fx", "1.0", server.WithToolCapabilities(true))
	echo := mcp.NewTool("echo", mcp.WithDescription("Echoes text."), mcp.WithString("text"),
		mcp.WithReadOnlyHintAnnotation(true), mcp.WithDestructiveHintAnnotation(false))
	s.AddTool(echo, func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("echo:" + r.GetString("text", "")), nil
	})
	write := mcp.NewTool("write", mcp.WithDescription("Changes something."), mcp.WithString("text"),
		mcp.WithReadOnlyHintAnnotation(false), mcp.WithDestructiveHintAnnotation(false))
	s.AddTool(write, func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("wrote:" + r.GetString("text", "")), nil
	})
	srv := httptest.NewServer(server.NewStreamableHTTPServer(s))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// testConfig is a config of one remote child at url, as the file config.json
// in home would hold it.
func testConfig(t *testing.T, home, url string) (*config.Config, string) {
	t.Helper()
	return writeTestConfig(t, home, map[string]any{"servers": map[string]any{"fx": map[string]any{"url": url}}})
}

// writeTestConfig writes doc as home's config.json and loads it.
func writeTestConfig(t *testing.T, home string, doc map[string]any) (*config.Config, string) {
	t.Helper()
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := config.PersonalFile(home)
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load([]string{path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, path
}

func testEnv(t *testing.T, home, path string) Env {
	return Env{
		Home:    home,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Load:    func() (*config.Config, error) { return config.Load([]string{path}, nil) },
		Watched: []string{path},
	}
}

func callText(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var r struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("result %s: %v", raw, err)
	}
	return r.Content[0].Text
}

// TestBuild: the runtime of a config connects to its child, answers calls
// under the default policy (reads only), keeps memory.db private to the
// user, and its audit trail holds the refused write but not the read.
func TestBuild(t *testing.T) {
	home := t.TempDir()
	cfg, path := testConfig(t, home, child(t))
	ctx := context.Background()
	r, err := Build(ctx, cfg, testEnv(t, home, path), Options{Observe: true})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			r.Close()
		}
	}()
	if got := KnownTools(r.Gateway)["fx"]; len(got) != 2 {
		t.Fatalf("known tools of fx: %v, want echo and write", got)
	}
	for _, tt := range []struct{ tool, want string }{
		{"fx__echo", "echo:hi"},
		{"fx__write", `agent "anonymous" may not call "fx.write": denied by built-in default (no allow rule matches; default allows @readonly only). To grant it: nexus policy allow --agent anonymous fx.write`},
	} {
		raw, err := r.Call(ctx, "", tt.tool, json.RawMessage(`{"text":"hi"}`))
		if err != nil {
			t.Fatalf("%s: %v", tt.tool, err)
		}
		if got := callText(t, raw); got != tt.want {
			t.Errorf("%s answered %q, want %q", tt.tool, got, tt.want)
		}
	}
	if fi, err := os.Stat(filepath.Join(home, "memory.db")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("memory.db: %v, %v; want mode 600", fi, err)
	}
	r.Close() // flushes the trail
	closed = true
	store, err := OpenAudit(ctx, cfg, testEnv(t, home, path))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	recs, err := store.Query(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Tool != "fx.write" || !recs[0].Refused {
		t.Fatalf("audit trail %+v: want the refused write only", recs)
	}
}

// TestBuildNoMemory: a runtime built without memory creates no memory.db.
func TestBuildNoMemory(t *testing.T) {
	home := t.TempDir()
	cfg, path := testConfig(t, home, child(t))
	r, err := Build(context.Background(), cfg, testEnv(t, home, path), Options{NoMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if _, err := os.Stat(filepath.Join(home, "memory.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("memory.db: %v, want none", err)
	}
}

// TestAudited: the trail keeps every refusal and every allowed call of a
// tool that is not read-only; allowed reads are only counted.
func TestAudited(t *testing.T) {
	for _, tt := range []struct {
		name string
		call aggregation.Call
		want bool
	}{
		{"undecided", aggregation.Call{}, false},
		{"allowed read", aggregation.Call{Decided: true, Allowed: true, ReadOnly: true}, false},
		{"allowed write", aggregation.Call{Decided: true, Allowed: true}, true},
		{"refused read", aggregation.Call{Decided: true, ReadOnly: true}, true},
		{"refused write", aggregation.Call{Decided: true}, true},
	} {
		if got := audited(&tt.call); got != tt.want {
			t.Errorf("%s: audited %v, want %v", tt.name, got, tt.want)
		}
	}
}

// serveHTTP runs Serve over HTTP on a free loopback port until the test
// ends, and returns the /mcp URL and Serve's result.
func serveHTTP(t *testing.T, opts ServeOptions) (string, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	opts.HTTPAddr = "127.0.0.1:0"
	opts.Listening = func(name string, a net.Addr) {
		if name == "http" {
			addr <- a
		}
	}
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after its context ended")
		}
	})
	select {
	case a := <-addr:
		return fmt.Sprintf("http://%s/mcp", a), done
	case err := <-done:
		t.Fatalf("Serve: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not listen")
	}
	return "", nil
}

// TestServeHTTP: an MCP client reaches the child through a served gateway,
// and the gateway announces itself in run/ while it serves.
func TestServeHTTP(t *testing.T) {
	home := t.TempDir()
	cfg, path := testConfig(t, home, child(t))
	url, _ := serveHTTP(t, ServeOptions{Env: testEnv(t, home, path), Config: cfg, Gateway: Options{NoMemory: true, NoWait: true, Observe: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.NewStreamableHttpClient(url)
	if err == nil {
		t.Cleanup(func() { c.Close() })
		err = c.Start(ctx)
	}
	if err == nil {
		_, err = c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
			ProtocolVersion: mcp.LATEST_PROTOCOL_VERSION, ClientInfo: mcp.Implementation{Name: "test", Version: "1"}}})
	}
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"text": "over http"}}})
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := res.Content[0].(mcp.TextContent); !ok || tc.Text != "echo:over http" {
		t.Fatalf("fx__echo answered %+v", res.Content)
	}
	if _, err := readRunEntry(runFile(home, os.Getpid())); err != nil {
		t.Errorf("the serving gateway is not announced: %v", err)
	}
}

// TestServeRefusesUnauthenticatedExposure: serving HTTP beyond loopback with
// no agent tokens is a usage error unless asked for, before anything starts.
func TestServeRefusesUnauthenticatedExposure(t *testing.T) {
	home := t.TempDir()
	cfg, path := testConfig(t, home, child(t))
	for _, tt := range []struct {
		name string
		opts ServeOptions
	}{
		{"open address", ServeOptions{HTTPAddr: "0.0.0.0:0"}},
		{"not an address", ServeOptions{HTTPAddr: "8765"}},
		{"tool names", ServeOptions{Gateway: Options{ToolNames: "camel"}}},
		{"name length", ServeOptions{Gateway: Options{MaxNameLength: 3}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Env, tt.opts.Config = testEnv(t, home, path), cfg
			err := Serve(context.Background(), tt.opts)
			var ue UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("Serve: %v, want a UsageError", err)
			}
		})
	}
}

// TestServeStdio: over stdio, a client's initialize and tools/list are
// answered on the pipes Serve is given (tools/list shows what the agent may
// call), and Serve returns when its context ends.
func TestServeStdio(t *testing.T) {
	home := t.TempDir()
	cfg, path := testConfig(t, home, child(t))
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ServeOptions{Env: testEnv(t, home, path), Config: cfg, Gateway: Options{NoMemory: true},
			Stdin: inR, Stdout: outW})
	}()
	dec := json.NewDecoder(outR)
	ask := func(id int, method string, params any) map[string]any {
		t.Helper()
		req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if _, err := inW.Write(append(req, '\n')); err != nil {
			t.Fatal(err)
		}
		var resp map[string]any
		if err := dec.Decode(&resp); err != nil {
			t.Fatal(err)
		}
		return resp
	}
	init := ask(1, "initialize", map[string]any{"protocolVersion": mcp.LATEST_PROTOCOL_VERSION, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "test", "version": "1"}})
	if init["result"] == nil {
		t.Fatalf("initialize: %v", init)
	}
	if _, err := inW.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	list := ask(2, "tools/list", map[string]any{})
	tools, _ := list["result"].(map[string]any)["tools"].([]any)
	if len(tools) != 1 || tools[0].(map[string]any)["name"] != "fx__echo" {
		t.Fatalf("tools/list: %v, want fx__echo alone (the default policy hides fx__write)", list)
	}
	go io.Copy(io.Discard, outR) // what the gateway still says while it stops
	cancel()
	inW.Close()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}
