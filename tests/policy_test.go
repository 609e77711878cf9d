package tests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// The policy tests run the two sample servers (code-kg and doc-kg) behind the gateway
// and use their call log (NEXUS_SAMPLE_CALL_LOG) to prove that a refused call never
// reached the child.

// polNP selects the Nexus-Pocket main branch in code-kg.
var polNP = map[string]any{"repository": "syl2042/Nexus-Pocket", "branch": "main"}

// polCodeReadOnly are code-kg's read-only tools with valid arguments.
var polCodeReadOnly = map[string]map[string]any{
	"kg_latest_graph":           polNP,
	"kg_graph_summary":          {"graph_id": "g-np-main-001"},
	"kg_list_audit_risks":       polNP,
	"kg_get_audit_risk":         {"graph_id": "g-np-main-002", "risk_id": "np-risk-echo-002"},
	"kg_list_anomalies":         polNP,
	"kg_get_anomaly":            {"graph_id": "g-np-main-002", "anomaly_id": "np-anom-import-004"},
	"kg_resolve_finding":        {"graph_id": "g-np-main-002", "source_tool": "ruff", "finding_type": "ruff_e722_bare_except", "path": "services/notes/app/sync.py"},
	"kg_file_context":           with(polNP, "path", "services/notes/app/sync.py"),
	"kg_impact":                 with(polNP, "target", "shared/config.py", "max_depth", 1),
	"kg_compare_runs":           polNP,
	"kg_compare_with_local_git": polNP,
	"kg_regenerate_dry_run":     polNP,
}

// polCodeMutating are code-kg's tools that are not read-only.
var polCodeMutating = []string{"kg_regenerate", "kg_regenerate_submit"}

// polDocTools are doc-kg's tools (all read-only) with valid arguments.
var polDocTools = map[string]map[string]any{
	"doc_kg_status":           {},
	"doc_kg_list_source_apps": {},
	"doc_kg_list_workspaces":  {"source_app": "nexus_pocket_notes"},
	"doc_kg_list_projects":    {"source_app": "nexus_pocket_notes", "workspace": "ws-engineering"},
	"doc_kg_list_documents":   {"source_app": "nexus_pocket_notes", "workspace": "ws-engineering", "project": "prj-auth"},
	"doc_kg_list_resources":   {"source_app": "nexus_pocket_notes"},
	"doc_kg_subgraph":         {"source_app": "nexus_pocket_notes", "workspace": "ws-planning", "project": "prj-roadmap"},
	"doc_kg_neighbors":        {"node_id": "ent-production"},
	"doc_kg_node":             {"node_id": "doc-auth-refresh-bug"},
	"doc_kg_relations":        {"node_id": "doc-q4-planning", "direction": "out"},
	"doc_kg_search":           {"query": "auth"},
	"doc_kg_context_pack":     {"query": "staging vs production deploy"},
	"doc_kg_query":            {"question": "Which documents mention the auth module?"},
}

// polReadOnlyWire is what tools/list shows an agent under the built-in default: every
// doc-kg tool and code-kg's read-only tools, by wire name.
func polReadOnlyWire() []string {
	var out []string
	for name := range polCodeReadOnly {
		out = append(out, "code-kg__"+name)
	}
	for name := range polDocTools {
		out = append(out, "doc-kg__"+name)
	}
	sort.Strings(out)
	return out
}

// polConfig is a config running both sample servers with the call log of h, plus
// the given top-level keys (policy, agents, ...). annotations, when set, maps a server to
// its "annotations" entry.
func polConfig(h *home, extra map[string]any, annotations map[string]any) map[string]any {
	servers := map[string]any{}
	for _, name := range []string{"code-kg", "doc-kg"} {
		s := map[string]any{"command": built.sample, "args": []string{name},
			"env": map[string]string{"NEXUS_SAMPLE_CALL_LOG": h.log}}
		if a, ok := annotations[name]; ok {
			s["annotations"] = a
		}
		servers[name] = s
	}
	cfg := map[string]any{"servers": servers}
	for k, v := range extra {
		cfg[k] = v
	}
	return cfg
}

func polHome(t *testing.T, extra map[string]any, annotations map[string]any) *home {
	t.Helper()
	h := newHome(t, nil)
	h.writeConfig(polConfig(h, extra, annotations))
	return h
}

func polGrant(agent string, allow ...string) map[string]any {
	return map[string]any{"agents": map[string]any{agent: map[string]any{"allow": allow}}}
}

// polRefused checks the text of a refused call: it names the agent, the canonical
// tool, the rule and how to grant the tool.
func polRefused(t *testing.T, what string, isError bool, text, agent, tool, rule string) {
	t.Helper()
	if !isError {
		t.Errorf("%s: want a refusal (isError), got %q", what, text)
		return
	}
	for _, want := range []string{
		fmt.Sprintf("agent %q may not call %q", agent, tool),
		rule,
		"To grant it: ",
		"--agent " + agent,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("%s: the refusal lacks %q:\n%s", what, want, text)
		}
	}
}

// polDefaultRule is the rule text of a refusal under the built-in default.
const polDefaultRule = "denied by built-in default (no allow rule matches; default allows @readonly only)"

func polSortedKeys[V any](m map[string]V) []string {
	out := mapKeys(m)
	sort.Strings(out)
	return out
}

// polStartSession is startSession with a chosen clientInfo name.
func polStartSession(t *testing.T, env []string, clientName string, command string, args ...string) *session {
	t.Helper()
	s := polStartRaw(t, env, command, args...)
	res, rpcErr := s.request("initialize", map[string]any{
		"protocolVersion": "2025-11-25",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": clientName, "version": "1"},
	})
	if rpcErr != nil {
		t.Fatalf("initialize: %+v\nstderr:\n%s", rpcErr, s.stderr)
	}
	_ = res
	s.notify("notifications/initialized", nil)
	return s
}

// polStartRaw starts a process as a session without initializing it.
func polStartRaw(t *testing.T, env []string, command string, args ...string) *session {
	t.Helper()
	s := &session{t: t, stderr: &lockedBuffer{}, pending: map[string]chan message{},
		noteC: make(chan struct{}, 1), done: make(chan struct{})}
	s.cmd = exec.Command(command, args...)
	s.cmd.Env = withRace(env)
	s.cmd.Stderr = s.stderr
	var err error
	if s.in, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go s.read(out)
	t.Cleanup(s.close)
	return s
}

// polHTTPCall calls a tool over HTTP and returns isError and the text.
func polHTTPCall(t *testing.T, c *client.Client, name string, args map[string]any) (bool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}})
	if err != nil {
		t.Fatalf("calling %s over HTTP: %v", name, err)
	}
	var parts []string
	for _, c := range res.Content {
		parts = append(parts, mcp.GetTextFromContent(c))
	}
	return res.IsError, strings.Join(parts, "\n")
}

func polHTTPTools(t *testing.T, c *client.Client) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list over HTTP: %v", err)
	}
	var out []string
	for _, tool := range res.Tools {
		out = append(out, tool.Name)
	}
	sort.Strings(out)
	return out
}

func polTokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// polRefusalLogged checks that serve's stderr holds the audit line of a refusal.
func polRefusalLogged(t *testing.T, stderr *lockedBuffer, agent, tool, rule string) {
	t.Helper()
	eventually(t, 5*time.Second, "the audit line of the refusal of "+tool+" for "+agent, func() bool {
		for _, line := range strings.Split(stderr.String(), "\n") {
			if strings.Contains(line, "call refused") && strings.Contains(line, "agent="+agent+" ") &&
				strings.Contains(line, "tool="+tool+" ") && strings.Contains(line, "rule="+rule) {
				return true
			}
		}
		return false
	})
}

// polClient is one client of a gateway under test, over either front: what the
// policy tests ask of it.
type polClient struct {
	tools  func() []string
	call   func(name string, args map[string]any) (isError bool, text string)
	stderr *lockedBuffer
}

// polStdio is a stdio client of a gateway of h started with args.
func polStdio(h *home, args ...string) polClient {
	s := h.serveStdio(args...)
	return polClient{
		tools: func() []string { return polSortedKeys(s.tools()) },
		call: func(name string, args map[string]any) (bool, string) {
			r := s.call(name, args)
			return r.IsError, r.text()
		},
		stderr: s.stderr,
	}
}

// polHTTP is an HTTP client, calling itself clientName, of a gateway of h
// started with args.
func polHTTP(t *testing.T, h *home, clientName string, args ...string) polClient {
	t.Helper()
	url, stderr := h.serveHTTP(args...)
	c, err := httpClientNamed(t, url, "", clientName)
	if err != nil {
		t.Fatalf("initialize over HTTP: %v\n%s", err, stderr)
	}
	return polClient{
		tools:  func() []string { return polHTTPTools(t, c) },
		call:   func(name string, args map[string]any) (bool, string) { return polHTTPCall(t, c, name, args) },
		stderr: stderr,
	}
}

// TestPolicyDefault: an agent without a policy sees and calls every doc-kg tool and
// the read-only code-kg tools, and is refused the two mutating ones, which never
// reach the child; the refusal says how to grant it. On stdio without --agent the
// agent is the clientInfo hint ("e2e-test", which has no policy); over HTTP with no
// tokens configured everyone is anonymous, so a client calling itself "coder"
// does not get coder's policy.
func TestPolicyDefault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		front, agent string
		connect      func(t *testing.T, h *home) polClient
	}{
		{"stdio", "e2e-test", func(t *testing.T, h *home) polClient { return polStdio(h, "--no-memory") }},
		{"http", "anonymous", func(t *testing.T, h *home) polClient { return polHTTP(t, h, "coder", "--no-memory") }},
	} {
		t.Run(tc.front, func(t *testing.T) {
			t.Parallel()
			h := polHome(t, map[string]any{"policy": polGrant("coder", "@readonly", "code-kg.kg_regenerate")}, nil)
			c := tc.connect(t, h)
			if got, want := c.tools(), polReadOnlyWire(); !slices.Equal(got, want) {
				t.Fatalf("tools/list of an agent without policy:\n got %v\nwant %v", got, want)
			}
			for name, args := range polCodeReadOnly {
				if isErr, text := c.call("code-kg__"+name, args); isErr {
					t.Errorf("code-kg.%s: %s", name, text)
				}
			}
			for name, args := range polDocTools {
				// Both spellings of the name reach the tool.
				if isErr, text := c.call("doc-kg."+name, args); isErr {
					t.Errorf("doc-kg.%s: %s", name, text)
				}
			}
			for _, name := range polCodeMutating {
				for _, spelling := range []string{"code-kg__" + name, "code-kg." + name} {
					isErr, text := c.call(spelling, polNP)
					polRefused(t, spelling, isErr, text, tc.agent, "code-kg."+name, polDefaultRule)
					if !strings.Contains(text, "nexus policy allow --agent "+tc.agent+" code-kg."+name) {
						t.Errorf("%s: the refusal should say how to grant it:\n%s", spelling, text)
					}
				}
			}
			calls := h.calls()
			for name := range polCodeReadOnly {
				if calls[name] != 1 {
					t.Errorf("the child received %s %d times, want 1", name, calls[name])
				}
			}
			for name := range polDocTools {
				if calls[name] != 1 {
					t.Errorf("the child received %s %d times, want 1", name, calls[name])
				}
			}
			for _, name := range polCodeMutating {
				if calls[name] != 0 {
					t.Errorf("a refused call reached the child: %s received %d times", name, calls[name])
				}
			}
			polRefusalLogged(t, c.stderr, tc.agent, "code-kg.kg_regenerate", `"no allow rule matches"`)
			polRefusalLogged(t, c.stderr, tc.agent, "code-kg.kg_regenerate_submit", `"no allow rule matches"`)
		})
	}
}

// TestPolicyGrantStdio: an agent granted code-kg.kg_regenerate can call it, whichever
// way it is identified on stdio; other agents still cannot; deny beats allow.
func TestPolicyGrantStdio(t *testing.T) {
	t.Parallel()
	h := polHome(t, map[string]any{"policy": map[string]any{"agents": map[string]any{
		"coder": map[string]any{"allow": []string{"@readonly", "code-kg.kg_regenerate"}},
		"wild":  map[string]any{"allow": []string{"*"}, "deny": []string{"code-kg.*"}},
	}}}, nil)
	granted := 0
	expectGranted := func(t *testing.T, s *session) {
		t.Helper()
		tools := s.tools()
		if _, ok := tools["code-kg__kg_regenerate"]; !ok {
			t.Errorf("coder's tools/list lacks code-kg__kg_regenerate")
		}
		if _, ok := tools["code-kg__kg_regenerate_submit"]; ok {
			t.Errorf("coder's tools/list shows code-kg__kg_regenerate_submit, which it was not granted")
		}
		if len(tools) != 26 {
			t.Errorf("coder sees %d tools, want 26: %v", len(tools), polSortedKeys(tools))
		}
		r := s.call("code-kg__kg_regenerate", polNP)
		if r.IsError {
			t.Errorf("granted call refused: %s", r.text())
		}
		granted++
		r = s.call("code-kg.kg_regenerate_submit", polNP)
		polRefused(t, "kg_regenerate_submit for coder", r.IsError, r.text(), "coder", "code-kg.kg_regenerate_submit",
			"denied by policy.agents.coder in "+filepath.Join(h.dir, "config.json")+" (no allow rule matches; policy.agents.coder allows @readonly, code-kg.kg_regenerate only)")
	}
	expectRefused := func(t *testing.T, s *session, agent string) {
		t.Helper()
		if _, ok := s.tools()["code-kg__kg_regenerate"]; ok {
			t.Errorf("%s's tools/list shows code-kg__kg_regenerate", agent)
		}
		r := s.call("code-kg__kg_regenerate", polNP)
		polRefused(t, "kg_regenerate for "+agent, r.IsError, r.text(), agent, "code-kg.kg_regenerate", polDefaultRule)
	}

	t.Run("serve --agent", func(t *testing.T) {
		expectGranted(t, h.serveStdio("--no-memory", "--agent", "coder"))
	})
	t.Run("NEXUS_AGENT", func(t *testing.T) {
		expectGranted(t, startSession(t, h.env("NEXUS_AGENT=coder"), built.nexus, "serve", "--no-memory"))
	})
	t.Run("clientInfo hint", func(t *testing.T) {
		expectGranted(t, polStartSession(t, h.env(), "coder", built.nexus, "serve", "--no-memory"))
	})
	t.Run("another agent", func(t *testing.T) {
		expectRefused(t, h.serveStdio("--no-memory", "--agent", "reviewer"), "reviewer")
	})
	t.Run("--agent wins over the clientInfo hint", func(t *testing.T) {
		expectRefused(t, polStartSession(t, h.env(), "coder", built.nexus, "serve", "--no-memory", "--agent", "reviewer"), "reviewer")
	})
	t.Run("NEXUS_AGENT wins over the clientInfo hint", func(t *testing.T) {
		expectRefused(t, polStartSession(t, h.env("NEXUS_AGENT=reviewer"), "coder", built.nexus, "serve", "--no-memory"), "reviewer")
	})
	t.Run("deny beats allow", func(t *testing.T) {
		s := h.serveStdio("--no-memory", "--agent", "wild")
		var want []string
		for name := range polDocTools {
			want = append(want, "doc-kg__"+name)
		}
		sort.Strings(want)
		if got := polSortedKeys(s.tools()); !slices.Equal(got, want) {
			t.Errorf("allow * deny code-kg.*: tools/list\n got %v\nwant %v", got, want)
		}
		if r := s.call("doc-kg__doc_kg_search", polDocTools["doc_kg_search"]); r.IsError {
			t.Errorf("doc-kg under allow *: %s", r.text())
		}
		for _, name := range []string{"kg_latest_graph", "kg_regenerate"} {
			r := s.call("code-kg__"+name, polNP)
			polRefused(t, name+" for wild", r.IsError, r.text(), "wild", "code-kg."+name, `(deny "code-kg.*")`)
			if !strings.Contains(r.text(), "nexus policy revoke --agent wild 'code-kg.*'") {
				t.Errorf("the refusal should say to revoke the deny glob:\n%s", r.text())
			}
		}
		polRefusalLogged(t, s.stderr, "wild", "code-kg.kg_latest_graph", `"deny \"code-kg.*\""`)
	})
	calls := h.calls()
	if calls["kg_regenerate"] != granted {
		t.Errorf("the child received kg_regenerate %d times, want %d (the granted calls only)", calls["kg_regenerate"], granted)
	}
	if calls["kg_regenerate_submit"] != 0 || calls["kg_latest_graph"] != 0 {
		t.Errorf("refused calls reached the child: %v", calls)
	}
}

// TestPolicyHTTPTokens: over HTTP the bearer token is the identity; a wrong or missing
// token gets 401; clientInfo is never an identity.
func TestPolicyHTTPTokens(t *testing.T) {
	t.Parallel()
	h := polHome(t, map[string]any{"policy": polGrant("coder", "@readonly", "code-kg.kg_regenerate")}, nil)
	coderToken, stderr, code := h.nexus("agent", "add", "coder")
	coderToken = strings.TrimSpace(coderToken)
	if code != 0 || !strings.HasPrefix(coderToken, "nxs_") {
		t.Fatalf("agent add coder: %d %q %s", code, coderToken, stderr)
	}
	if _, stderr, code := h.nexus("agent", "add", "reviewer"); code != 0 {
		t.Fatalf("agent add reviewer: %d %s", code, stderr)
	}
	// agent add kept the rest of the config.
	var cfg map[string]any
	raw, _ := os.ReadFile(filepath.Join(h.dir, "config.json"))
	if err := json.Unmarshal(raw, &cfg); err != nil || cfg["servers"] == nil || cfg["policy"] == nil {
		t.Fatalf("agent add lost keys of config.json: %v\n%s", err, raw)
	}
	// A third agent whose token the test knows, written as an operator would.
	agents := cfg["agents"].(map[string]any)
	agents["ops"] = map[string]any{"tokenSha256": polTokenHash("nxs_ops-token")}
	h.writeConfig(cfg)

	url, serveErr := h.serveHTTP("--no-memory")
	post := func(header string) int {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"coder","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct{ name, header string }{
		{"missing token", ""},
		{"wrong token", "Bearer nxs_wrong"},
		{"the hash instead of the token", "Bearer " + polTokenHash(coderToken)},
		{"other case", "Bearer " + strings.ToUpper(coderToken)},
		{"a prefix of the token", "Bearer " + coderToken[:len(coderToken)-1]},
		{"not bearer", "Basic " + coderToken},
		{"empty bearer", "Bearer "},
	} {
		if got := post(tc.header); got != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", tc.name, got)
		}
	}
	if _, err := httpClientNamed(t, url, "", "coder"); err == nil {
		t.Errorf("a client without a token (calling itself coder) was served")
	}

	coder, err := httpClientNamed(t, url, coderToken, "someone-else")
	if err != nil {
		t.Fatalf("coder's token refused: %v\n%s", err, serveErr)
	}
	if tools := polHTTPTools(t, coder); !slices.Contains(tools, "code-kg__kg_regenerate") || slices.Contains(tools, "code-kg__kg_regenerate_submit") || len(tools) != 26 {
		t.Errorf("coder's tools/list over HTTP: %v", tools)
	}
	if isErr, text := polHTTPCall(t, coder, "code-kg__kg_regenerate", polNP); isErr {
		t.Errorf("coder's granted call over HTTP refused: %s", text)
	}
	isErr, text := polHTTPCall(t, coder, "code-kg.kg_regenerate_submit", polNP)
	polRefused(t, "kg_regenerate_submit for coder over HTTP", isErr, text, "coder", "code-kg.kg_regenerate_submit", "denied by policy.agents.coder")

	for _, tc := range []struct{ agent, token string }{{"ops", "nxs_ops-token"}} {
		// Another agent, even one that calls itself "coder", gets its own (default) policy.
		c, err := httpClientNamed(t, url, tc.token, "coder")
		if err != nil {
			t.Fatalf("%s's token refused: %v", tc.agent, err)
		}
		if got, want := polHTTPTools(t, c), polReadOnlyWire(); !slices.Equal(got, want) {
			t.Errorf("%s's tools/list over HTTP:\n got %v\nwant %v", tc.agent, got, want)
		}
		isErr, text := polHTTPCall(t, c, "code-kg__kg_regenerate", polNP)
		polRefused(t, "kg_regenerate for "+tc.agent+" over HTTP", isErr, text, tc.agent, "code-kg.kg_regenerate", polDefaultRule)
		if isErr, text := polHTTPCall(t, c, "doc-kg.doc_kg_search", polDocTools["doc_kg_search"]); isErr {
			t.Errorf("%s: doc_kg_search refused: %s", tc.agent, text)
		}
	}
	if n := h.calls()["kg_regenerate"]; n != 1 {
		t.Errorf("the child received kg_regenerate %d times, want 1 (coder's call only)", n)
	}
	if n := h.calls()["kg_regenerate_submit"]; n != 0 {
		t.Errorf("a refused call reached the child: kg_regenerate_submit %d times", n)
	}
	polRefusalLogged(t, serveErr, "ops", "code-kg.kg_regenerate", `"no allow rule matches"`)
}

// TestPolicyTricks: no other spelling of a tool's name reaches it, and a policy cannot
// be written with a spelling that would not match.
func TestPolicyTricks(t *testing.T) {
	t.Parallel()
	h := polHome(t, map[string]any{"policy": map[string]any{"default": map[string]any{"allow": []string{"*"}, "deny": []string{"code-kg.kg_regenerate"}}}}, nil)
	s := h.serveStdio("--no-memory", "--agent", "tricky")

	// Canonical and wire spellings resolve to the same tool and get the same refusal.
	wire := s.call("code-kg__kg_regenerate", polNP)
	canon := s.call("code-kg.kg_regenerate", polNP)
	polRefused(t, "wire name", wire.IsError, wire.text(), "tricky", "code-kg.kg_regenerate", `denied by policy.default in `)
	if wire.text() != canon.text() || wire.IsError != canon.IsError {
		t.Errorf("wire and canonical spellings got different answers:\n%s\n%s", wire.text(), canon.text())
	}

	for _, name := range []string{
		"Code-kg.kg_regenerate", "code-kg.KG_REGENERATE", "CODE-KG__KG_REGENERATE", "code-kg__Kg_regenerate",
		" code-kg.kg_regenerate", "code-kg.kg_regenerate ", " code-kg__kg_regenerate ", "code-kg. kg_regenerate",
		"code-kg.kg_regenerate\n", "code-kg.kg_regenerate\t", "\u00a0code-kg.kg_regenerate",
		"code-kg.kg_regenerat", "code-kg__kg_regenerat", "code-kg.kg_", "code-kg.", "code-kg__", "code-kg.*", "*",
		"code-kg/kg_regenerate", "code-kg::kg_regenerate", "code-kg.kg_regenerate_", "code-kg.kg_regenerate.",
		"code_kg.kg_regenerate", "code-kg___kg_regenerate", "code-kg..kg_regenerate",
		// Allowed tools are no more reachable by another spelling.
		"Doc-kg.doc_kg_search", "doc-kg.DOC_KG_SEARCH", " doc-kg.doc_kg_search", "doc-kg.doc_kg_searc",
	} {
		_, rpcErr := s.request("tools/call", map[string]any{"name": name, "arguments": map[string]any{"query": "auth", "repository": "syl2042/Nexus-Pocket", "branch": "main"}})
		if rpcErr == nil || rpcErr.Code != -32602 {
			t.Errorf("call %q: got %+v, want JSON-RPC -32602", name, rpcErr)
		}
	}
	if calls := h.calls(); len(calls) != 0 {
		t.Errorf("tricks reached the children: %v", calls)
	}
	// The child's own name of a tool only one server has is that tool (README "Names")
	// when the agent may call it; the bare name of a denied tool is no tool at all,
	// and the error names no tool the agent may not call.
	if _, rpcErr := s.request("tools/call", map[string]any{"name": "kg_regenerate", "arguments": polNP}); rpcErr == nil || rpcErr.Code != -32602 ||
		strings.Contains(rpcErr.Message, `"code-kg.kg_regenerate"`) || strings.Contains(rpcErr.Message, `"code-kg__kg_regenerate"`) {
		t.Errorf("the bare name of a denied tool: %+v, want -32602 naming no denied tool", rpcErr)
	}
	if bare := s.call("doc_kg_search", polDocTools["doc_kg_search"]); bare.IsError {
		t.Errorf("the bare name of an allowed tool: %s", bare.text())
	}
	if calls := h.calls(); len(calls) != 1 || calls["doc_kg_search"] != 1 {
		t.Errorf("the bare names should reach doc_kg_search only: %v", calls)
	}

	// Entries that would not match as written are refused, by `policy check` and by serve.
	for _, tc := range []struct{ entry, want string }{
		{"code-kg__kg_regenerate", `this is a wire name; policies use canonical names: write "code-kg.kg_regenerate"`},
		{" code-kg.kg_regenerate", `surrounding spaces never match a tool; write "code-kg.kg_regenerate"`},
		{"Code-kg.kg_regenerate", `server names are lower case: write "code-kg.kg_regenerate"`},
		{"code-kg.kg_regen*", `globs match whole servers`},
		{"kg_regenerate", `missing server`},
		{"", "empty entry"},
	} {
		t.Run(fmt.Sprintf("entry %q", tc.entry), func(t *testing.T) {
			bad := polHome(t, map[string]any{"policy": polGrant("coder", "@readonly", tc.entry)}, nil)
			_, stderr, code := bad.nexus("policy", "check")
			if code == 0 || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "policy.agents.coder.allow[1]") {
				t.Errorf("policy check: exit %d, want an error naming policy.agents.coder.allow[1] and saying %q:\n%s", code, tc.want, stderr)
			}
			_, stderr, code = bad.nexus("serve", "--no-memory", "--agent", "coder")
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Errorf("serve: exit %d, want a refusal to start saying %q:\n%s", code, tc.want, stderr)
			}
			if calls := bad.calls(); len(calls) != 0 {
				t.Errorf("calls reached the children: %v", calls)
			}
		})
	}
}

// TestPolicyHotReload: a policy edit applies to the next call of running sessions, over
// stdio and HTTP, without a restart; stdio sessions are told tools/list_changed.
func TestPolicyHotReload(t *testing.T) {
	t.Parallel()
	h := polHome(t, nil, nil)
	s := h.serveStdio("--no-memory", "--agent", "coder")
	url, httpErr := h.serveHTTP("--no-memory")
	c, err := httpClientNamed(t, url, "", "coder")
	if err != nil {
		t.Fatalf("initialize over HTTP: %v\n%s", err, httpErr)
	}

	r := s.call("code-kg__kg_regenerate", polNP)
	polRefused(t, "before the edit", r.IsError, r.text(), "coder", "code-kg.kg_regenerate", polDefaultRule)
	if _, ok := s.tools()["code-kg__kg_regenerate"]; ok {
		t.Fatal("kg_regenerate listed before the edit")
	}
	isErr, text := polHTTPCall(t, c, "code-kg__kg_regenerate", polNP)
	polRefused(t, "before the edit, over HTTP", isErr, text, "anonymous", "code-kg.kg_regenerate", polDefaultRule)

	// Grant coder the tool, and anonymous through the default.
	h.writeConfig(polConfig(h, map[string]any{"policy": map[string]any{
		"default": map[string]any{"allow": []string{"@readonly", "code-kg.kg_regenerate"}},
		"agents":  map[string]any{"coder": map[string]any{"allow": []string{"@readonly", "code-kg.kg_regenerate"}}},
	}}, nil))
	s.waitNote("notifications/tools/list_changed", 10*time.Second, nil)
	eventually(t, 10*time.Second, "coder's call allowed after the edit", func() bool {
		return !s.call("code-kg__kg_regenerate", polNP).IsError
	})
	if _, ok := s.tools()["code-kg__kg_regenerate"]; !ok {
		t.Error("kg_regenerate not listed after the edit")
	}
	eventually(t, 10*time.Second, "anonymous's HTTP call allowed after the edit", func() bool {
		isErr, _ := polHTTPCall(t, c, "code-kg.kg_regenerate", polNP)
		return !isErr
	})
	if tools := polHTTPTools(t, c); !slices.Contains(tools, "code-kg__kg_regenerate") {
		t.Errorf("kg_regenerate not listed over HTTP after the edit: %v", tools)
	}
	if n := h.calls()["kg_regenerate"]; n != 2 {
		t.Errorf("the child received kg_regenerate %d times, want 2 (one allowed call per session)", n)
	}

	// An invalid edit is ignored: the running policy stays.
	h.writeConfig(polConfig(h, map[string]any{"policy": polGrant("coder", "code-kg__kg_regenerate")}, nil))
	eventually(t, 10*time.Second, "the invalid edit logged", func() bool {
		return strings.Contains(s.stderr.String(), "config change ignored")
	})
	if r := s.call("code-kg.kg_regenerate", polNP); r.IsError {
		t.Errorf("an invalid edit changed the running policy: %s", r.text())
	}

	// Revoking applies to the next call too. The two gateways reload on their own
	// clocks: a call made before a gateway noticed the edit is still allowed, and
	// reaches the child, so those are counted.
	h.writeConfig(polConfig(h, nil, nil))
	s.waitNote("notifications/tools/list_changed", 10*time.Second, nil)
	allowedMeanwhile := 0
	eventually(t, 10*time.Second, "coder's call refused after the revocation", func() bool {
		if s.call("code-kg__kg_regenerate", polNP).IsError {
			return true
		}
		allowedMeanwhile++
		return false
	})
	if _, ok := s.tools()["code-kg__kg_regenerate"]; ok {
		t.Error("kg_regenerate still listed after the revocation")
	}
	eventually(t, 10*time.Second, "anonymous's HTTP call refused after the revocation", func() bool {
		if isErr, _ := polHTTPCall(t, c, "code-kg.kg_regenerate", polNP); isErr {
			return true
		}
		allowedMeanwhile++
		return false
	})
	if n, want := h.calls()["kg_regenerate"], 3+allowedMeanwhile; n != want {
		t.Errorf("the child received kg_regenerate %d times, want %d (refused calls must never reach it)", n, want)
	}
}

// TestPolicyAnnotationOverride: the operator's annotations, not the child's, are what
// @readonly sees.
func TestPolicyAnnotationOverride(t *testing.T) {
	t.Parallel()
	h := polHome(t, nil, map[string]any{
		"code-kg": map[string]any{
			"kg_regenerate":   map[string]any{"readOnlyHint": true, "destructiveHint": false},
			"kg_latest_graph": map[string]any{"destructiveHint": true}, // read-only but destructive: not @readonly
		},
		"doc-kg": map[string]any{"doc_kg_search": map[string]any{"readOnlyHint": false}}, // a lying child
	})
	s := h.serveStdio("--no-memory")
	tools := s.tools()
	for name, want := range map[string]bool{
		"code-kg__kg_regenerate": true, "code-kg__kg_regenerate_submit": false, "code-kg__kg_latest_graph": false,
		"doc-kg__doc_kg_search": false, "doc-kg__doc_kg_status": true,
	} {
		if _, got := tools[name]; got != want {
			t.Errorf("tools/list: %s listed = %v, want %v", name, got, want)
		}
	}
	if r := s.call("code-kg__kg_regenerate", polNP); r.IsError {
		t.Errorf("kg_regenerate marked read-only is refused: %s", r.text())
	}
	r := s.call("doc-kg__doc_kg_search", polDocTools["doc_kg_search"])
	polRefused(t, "doc_kg_search marked not read-only", r.IsError, r.text(), "e2e-test", "doc-kg.doc_kg_search", polDefaultRule)
	r = s.call("code-kg__kg_latest_graph", polNP)
	polRefused(t, "kg_latest_graph marked destructive", r.IsError, r.text(), "e2e-test", "code-kg.kg_latest_graph", polDefaultRule)
	if r := s.call("doc-kg__doc_kg_status", map[string]any{}); r.IsError {
		t.Errorf("doc_kg_status: %s", r.text())
	}
	calls := h.calls()
	if calls["kg_regenerate"] != 1 || calls["doc_kg_status"] != 1 || calls["doc_kg_search"] != 0 || calls["kg_latest_graph"] != 0 {
		t.Errorf("child calls %v, want kg_regenerate and doc_kg_status once, doc_kg_search and kg_latest_graph never", calls)
	}

	// The CLI sees the same effective annotations.
	out, stderr, code := h.nexus("policy", "explain", "--agent", "anonymous", "code-kg.kg_regenerate")
	if code != 0 || !strings.HasPrefix(out, "allowed:") || !strings.Contains(out, `allow "@readonly"`) {
		t.Errorf("policy explain of kg_regenerate marked read-only: exit %d\n%s%s", code, out, stderr)
	}
	out, stderr, code = h.nexus("policy", "explain", "--agent", "anonymous", "doc-kg.doc_kg_search")
	if code != 1 || !strings.HasPrefix(out, "denied:") {
		t.Errorf("policy explain of doc_kg_search marked not read-only: exit %d\n%s%s", code, out, stderr)
	}
}

type polListed struct {
	Canonical string `json:"canonical"`
	Wire      string `json:"wire"`
	ReadOnly  bool   `json:"readOnly"`
}

type polExplained struct {
	Agent   string `json:"agent"`
	Tool    string `json:"tool"`
	Allowed bool   `json:"allowed"`
	Rule    string `json:"rule"`
	Origin  string `json:"origin"`
	Source  string `json:"source"`
	Hint    string `json:"hint"`
}

// TestPolicyCLI: show, explain, allow, deny, revoke, check, list-tools --agent and call
// --agent.
func TestPolicyCLI(t *testing.T) {
	t.Parallel()
	h := polHome(t, map[string]any{"maxMessageBytes": 1 << 22, "ttl": map[string]any{"doc-kg.*": "5m"}}, nil)
	cfgPath := filepath.Join(h.dir, "config.json")
	run := func(wantCode int, args ...string) string {
		t.Helper()
		out, stderr, code := h.nexus(args...)
		if code != wantCode {
			t.Fatalf("nexus %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, wantCode, out, stderr)
		}
		return out
	}
	explain := func(wantCode int, tool string) string {
		t.Helper()
		return run(wantCode, "policy", "explain", "--agent", "bot", tool)
	}

	// Denied under the built-in default, with the rule and the fix.
	out := explain(1, "code-kg.kg_regenerate")
	for _, want := range []string{"denied: ", `agent "bot" may not call "code-kg.kg_regenerate"`, "built-in default", "no allow rule matches",
		"nexus policy allow --agent bot code-kg.kg_regenerate"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain kg_regenerate lacks %q:\n%s", want, out)
		}
	}
	if wire := explain(1, "code-kg__kg_regenerate"); wire != out {
		t.Errorf("explain by wire name differs from by canonical name:\n%s\n%s", wire, out)
	}
	if out := explain(0, "doc-kg.doc_kg_search"); !strings.Contains(out, "allowed") || !strings.Contains(out, `allow "@readonly"`) {
		t.Errorf("explain doc_kg_search:\n%s", out)
	}
	// A name no server offers is an unknown tool, as a call with it would be.
	for _, trick := range []string{"Code-kg.kg_regenerate", "code-kg.kg_regenerat", " code-kg.kg_regenerate", "code-kg.KG_REGENERATE"} {
		if _, stderr, code := h.nexus("policy", "explain", "--agent", "bot", trick); code != 1 || !strings.Contains(stderr, "unknown tool") {
			t.Errorf("explain %q: exit %d\n%s", trick, code, stderr)
		}
	}

	var rows []polExplained
	if err := json.Unmarshal([]byte(run(0, "policy", "show", "--agent", "bot", "--json")), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 27 {
		t.Errorf("policy show --json: %d rows, want 27", len(rows))
	}
	for _, r := range rows {
		_, ro := polCodeReadOnly[strings.TrimPrefix(r.Tool, "code-kg.")]
		_, doc := polDocTools[strings.TrimPrefix(r.Tool, "doc-kg.")]
		want := polExplained{Agent: "bot", Tool: r.Tool, Allowed: true, Rule: `allow "@readonly"`, Origin: "built-in default"}
		if !ro && !doc {
			want.Allowed, want.Rule, want.Hint = false, "no allow rule matches", "nexus policy allow --agent bot "+r.Tool
		}
		if r != want {
			t.Errorf("policy show row\n got %+v\nwant %+v", r, want)
		}
	}

	// allow: explain says allowed, and the config holds the change and keeps the rest.
	run(0, "policy", "allow", "--agent", "bot", "code-kg.kg_regenerate")
	out = explain(0, "code-kg.kg_regenerate")
	if !strings.HasPrefix(out, "allowed:") || !strings.Contains(out, `allow "code-kg.kg_regenerate"`) || !strings.Contains(out, "policy.agents.bot") {
		t.Errorf("explain after allow:\n%s", out)
	}
	var cfg struct {
		Servers         map[string]json.RawMessage `json:"servers"`
		MaxMessageBytes int                        `json:"maxMessageBytes"`
		TTL             map[string]string          `json:"ttl"`
		Policy          struct {
			Agents map[string]struct{ Allow, Deny []string } `json:"agents"`
		} `json:"policy"`
	}
	readCfg := func() {
		t.Helper()
		raw, err := os.ReadFile(cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Policy.Agents = nil
		if err := json.Unmarshal(raw, &cfg); err != nil {
			t.Fatalf("config.json after an edit: %v\n%s", err, raw)
		}
		if len(cfg.Servers) != 2 || cfg.MaxMessageBytes != 1<<22 || cfg.TTL["doc-kg.*"] != "5m" {
			t.Errorf("the edit lost other keys:\n%s", raw)
		}
	}
	readCfg()
	if got := cfg.Policy.Agents["bot"].Allow; !slices.Equal(got, []string{"@readonly", "code-kg.kg_regenerate"}) {
		t.Errorf("policy.agents.bot.allow after allow = %v, want the default's @readonly plus the tool", got)
	}
	var listed []polListed
	if err := json.Unmarshal([]byte(run(0, "list-tools", "--agent", "bot", "--json")), &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 26 || !slices.ContainsFunc(listed, func(l polListed) bool { return l.Canonical == "code-kg.kg_regenerate" }) {
		t.Errorf("list-tools --agent bot after allow: %+v", listed)
	}
	run(0, "call", "code-kg.kg_regenerate", "--no-memory", "--agent", "bot", "--args", `{"repository":"syl2042/Nexus-Pocket","branch":"main"}`)
	if n := h.calls()["kg_regenerate"]; n != 1 {
		t.Errorf("after an allowed nexus call the child received kg_regenerate %d times, want 1", n)
	}

	// revoke: denied again, by bot's own policy.
	run(0, "policy", "revoke", "--agent", "bot", "code-kg.kg_regenerate")
	out = explain(1, "code-kg.kg_regenerate")
	if !strings.Contains(out, "denied by policy.agents.bot in "+cfgPath) || !strings.Contains(out, "no allow rule matches") {
		t.Errorf("explain after revoke:\n%s", out)
	}
	readCfg()
	if got := cfg.Policy.Agents["bot"]; !slices.Equal(got.Allow, []string{"@readonly"}) || len(got.Deny) != 0 {
		t.Errorf("policy.agents.bot after revoke = %+v", got)
	}
	if _, stderr, code := h.nexus("policy", "revoke", "--agent", "bot", "code-kg.kg_regenerate"); code == 0 || !strings.Contains(stderr, "nothing to revoke") {
		t.Errorf("revoking what is not there: exit %d\n%s", code, stderr)
	}

	// deny: beats the @readonly allow.
	run(0, "policy", "deny", "--agent", "bot", "doc-kg.doc_kg_search")
	out = explain(1, "doc-kg.doc_kg_search")
	if !strings.Contains(out, `deny "doc-kg.doc_kg_search"`) || !strings.Contains(out, "nexus policy allow --agent bot doc-kg.doc_kg_search") {
		t.Errorf("explain after deny:\n%s", out)
	}
	listed = nil
	if err := json.Unmarshal([]byte(run(0, "list-tools", "--agent", "bot", "--json")), &listed); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range listed {
		names = append(names, l.Wire)
	}
	sort.Strings(names)
	want := slices.DeleteFunc(polReadOnlyWire(), func(s string) bool { return s == "doc-kg__doc_kg_search" })
	if !slices.Equal(names, want) {
		t.Errorf("list-tools --agent bot after deny:\n got %v\nwant %v", names, want)
	}

	// A refused nexus call exits 1, says why, and never reaches the child.
	for _, tool := range []string{"code-kg.kg_regenerate", "code-kg__kg_regenerate_submit", "doc-kg.doc_kg_search"} {
		out, stderr, code := h.nexus("call", tool, "--no-memory", "--agent", "bot", "--args", `{"repository":"syl2042/Nexus-Pocket","branch":"main","query":"auth"}`)
		if code != 1 || !strings.Contains(out+stderr, `agent \"bot\" may not call`) && !strings.Contains(out+stderr, `agent "bot" may not call`) {
			t.Errorf("nexus call %s --agent bot: exit %d, want 1 and the refusal\n%s%s", tool, code, out, stderr)
		}
	}
	// An unknown spelling is an error, not a call.
	if _, stderr, code := h.nexus("call", "Code-kg.kg_regenerate", "--no-memory", "--agent", "bot"); code == 0 {
		t.Errorf("nexus call Code-kg.kg_regenerate succeeded:\n%s", stderr)
	}
	if calls := h.calls(); calls["kg_regenerate"] != 1 || calls["kg_regenerate_submit"] != 0 || calls["doc_kg_search"] != 0 {
		t.Errorf("refused nexus calls reached the child: %v", calls)
	}

	// policy check: fine now, then latent permissions are reported.
	if out := run(0, "policy", "check"); !strings.Contains(out, "policy ok") {
		t.Errorf("policy check of a good policy:\n%s", out)
	}
	h.writeConfig(polConfig(h, map[string]any{"policy": map[string]any{
		"default": map[string]any{"allow": []string{"@readonly", "nope.*"}},
		"agents": map[string]any{"bot": map[string]any{
			"allow": []string{"@readonly", "code-kg.kg_regenerat", "code-kg.KG_REGENERATE", "ghost.tool"},
			"deny":  []string{"doc-kg.doc_kg_serch"},
		}},
	}}, nil))
	out = run(1, "policy", "check")
	for _, want := range []string{
		`policy.default.allow[1] "nope.*": no server is named "nope"`,
		`policy.agents.bot.allow[1] "code-kg.kg_regenerat": server "code-kg" lists no tool "kg_regenerat"; did you mean "code-kg.kg_regenerate"?`,
		`policy.agents.bot.allow[2] "code-kg.KG_REGENERATE": server "code-kg" lists no tool "KG_REGENERATE"; did you mean "code-kg.kg_regenerate"?`,
		`policy.agents.bot.allow[3] "ghost.tool": no server is named "ghost"`,
		`policy.agents.bot.deny[0] "doc-kg.doc_kg_serch": server "doc-kg" lists no tool "doc_kg_serch"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("policy check lacks %q:\n%s", want, out)
		}
	}
	// The case variant grants nothing: kg_regenerate stays refused.
	explain(1, "code-kg.kg_regenerate")
	// serve logs the same problems at start.
	s := h.serveStdio("--no-memory", "--agent", "bot")
	for _, want := range []string{"policy problem", "nope.*", "code-kg.kg_regenerat", "ghost.tool"} {
		// stderr is copied from a pipe: give the last start lines time to arrive.
		eventually(t, 5*time.Second, "serve's start log names "+want, func() bool { return strings.Contains(s.stderr.String(), want) })
	}
	r := s.call("code-kg.kg_regenerate", polNP)
	polRefused(t, "kg_regenerate under a case-variant grant", r.IsError, r.text(), "bot", "code-kg.kg_regenerate", "no allow rule matches")
	if n := h.calls()["kg_regenerate"]; n != 1 {
		t.Errorf("the child received kg_regenerate %d times, want 1", n)
	}
}

// TestPolicyAnnotationHotReload: an operator who finds that a child lies about a tool
// being read-only marks it in config; like any other edit that withdraws a right, it must
// apply to the next call of the running gateway, or at least not be reported as applied.
func TestPolicyAnnotationHotReload(t *testing.T) {
	t.Parallel()
	h := polHome(t, nil, nil)
	s := h.serveStdio("--no-memory")
	if r := s.call("doc-kg__doc_kg_search", polDocTools["doc_kg_search"]); r.IsError {
		t.Fatalf("doc_kg_search before the edit: %s", r.text())
	}
	h.writeConfig(polConfig(h, nil, map[string]any{"doc-kg": map[string]any{"doc_kg_search": map[string]any{"readOnlyHint": false}}}))
	eventually(t, 10*time.Second, "the edit noticed", func() bool {
		return strings.Contains(s.stderr.String(), "config reloaded") || strings.Contains(s.stderr.String(), "config change")
	})
	// Give the edit the same chance as a policy edit: a few seconds, several calls.
	refused := false
	for deadline := time.Now().Add(5 * time.Second); !refused && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		refused = s.call("doc-kg__doc_kg_search", polDocTools["doc_kg_search"]).IsError
	}
	if !refused {
		t.Errorf("after servers.doc-kg.annotations.doc_kg_search.readOnlyHint=false was written, the running gateway "+
			"still lets the default policy call doc-kg.doc_kg_search (child calls: %d)", h.calls()["doc_kg_search"])
	}
	if _, ok := s.tools()["doc-kg__doc_kg_search"]; ok && refused {
		t.Errorf("doc_kg_search refused but still listed")
	}
}

// TestPolicyTokenRevocation: removing an agent's token from the config while serve runs
// must stop that token from being accepted (or at least say that a restart is needed).
func TestPolicyTokenRevocation(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	cfg := polConfig(h, map[string]any{"agents": map[string]any{
		"ops":  map[string]any{"tokenSha256": polTokenHash("nxs_ops-token")},
		"keep": map[string]any{"tokenSha256": polTokenHash("nxs_keep-token")},
	}}, nil)
	h.writeConfig(cfg)
	url, stderr := h.serveHTTP("--no-memory")
	if _, err := httpClientNamed(t, url, "nxs_ops-token", "x"); err != nil {
		t.Fatalf("ops's token refused before the revocation: %v\n%s", err, stderr)
	}
	cfg["agents"] = map[string]any{"keep": map[string]any{"tokenSha256": polTokenHash("nxs_keep-token")}}
	h.writeConfig(cfg)
	eventually(t, 10*time.Second, "the edit noticed", func() bool {
		return strings.Contains(stderr.String(), "config reloaded") || strings.Contains(stderr.String(), "config change")
	})
	// The reload is logged once it is in force; a token still accepted within
	// seconds of that is a failure.
	refused := false
	for deadline := time.Now().Add(5 * time.Second); !refused && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		_, err := httpClientNamed(t, url, "nxs_ops-token", "x")
		refused = err != nil
	}
	if !refused {
		t.Errorf("agents.ops was removed from the config, yet the running gateway still accepts ops's bearer token")
	}
}

// TestPolicyExplainUnknownSpelling: explain must not call "allowed" a spelling that no
// server offers and that the gateway answers with -32602.
func TestPolicyExplainUnknownSpelling(t *testing.T) {
	t.Parallel()
	h := polHome(t, map[string]any{"policy": polGrant("coder", "code-kg.*")}, nil)
	out, _, code := h.nexus("policy", "explain", "--agent", "coder", "code-kg.kg_regenerate")
	if code != 0 || !strings.HasPrefix(out, "allowed:") {
		t.Fatalf("explain of the real name: exit %d\n%s", code, out)
	}
	out, stderr, code := h.nexus("policy", "explain", "--agent", "coder", "code-kg.KG_REGENERATE")
	if code == 0 || strings.HasPrefix(out, "allowed:") {
		t.Errorf("`nexus policy explain --agent coder code-kg.KG_REGENERATE` (policy allow [\"code-kg.*\"]) exits %d and says:\n%s%s"+
			"but no server offers that name and a call with it is refused with -32602: explain should say the tool is unknown", code, out, stderr)
	}
}

// TestPolicyInvalidAgentName: identities follow the agent-name pattern, so that a refusal's
// grant hint is a command that works; an invalid --agent is refused up front.
func TestPolicyInvalidAgentName(t *testing.T) {
	t.Parallel()
	h := polHome(t, nil, nil)
	out, stderr, code := h.nexus("call", "code-kg.kg_regenerate", "--no-memory", "--agent", "Bad Name", "--args", `{"repository":"syl2042/Nexus-Pocket","branch":"main"}`)
	if code == 1 && strings.Contains(out, "may not call") {
		t.Errorf("`nexus call --agent \"Bad Name\"` is served as agent %q (default policy) and its refusal suggests a command that fails "+
			"(`nexus policy allow --agent Bad Name ...`); --agent/NEXUS_AGENT should be validated like agent names in config:\n%s%s", "Bad Name", out, stderr)
	}
	if calls := h.calls(); calls["kg_regenerate"] != 0 {
		t.Errorf("the call reached the child: %v", calls)
	}
}
