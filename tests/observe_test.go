package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"github.com/nexus-mcp/nexus/internal/pgtest"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/audit"
)

// served is a running `nexus serve` whose addresses were read from its stderr.
type served struct {
	cmd    *exec.Cmd
	base   string // http://ADDR of --http or --metrics
	stderr *lockedBuffer
	exited chan struct{}
}

// startServe runs nexus serve with args and waits for the line that names the
// address of --http (want "listening on") or --metrics (want "metrics on").
func (h *home) startServe(want string, args ...string) *served {
	h.t.Helper()
	s := &served{cmd: exec.Command(built.nexus, append([]string{"serve"}, args...)...), stderr: &lockedBuffer{}, exited: make(chan struct{})}
	s.cmd.Env = h.env()
	pipe, err := s.cmd.StderrPipe()
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := s.cmd.StdinPipe(); err != nil { // stdio serve waits on it
		h.t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	found := make(chan string, 1)
	re := regexp.MustCompile(regexp.QuoteMeta(want) + ` (http://[0-9.:\[\]]+)`)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			s.stderr.Write([]byte(sc.Text() + "\n"))
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		s.cmd.Wait()
		close(s.exited)
	}()
	h.t.Cleanup(func() { s.stop(h.t) })
	select {
	case s.base = <-found:
		return s
	case <-s.exited:
		h.t.Fatalf("nexus serve exited:\n%s", s.stderr)
	case <-time.After(30 * time.Second):
		h.t.Fatalf("nexus serve did not start:\n%s", s.stderr)
	}
	return nil
}

// stop interrupts the gateway (a clean shutdown) and waits for it to exit.
func (s *served) stop(t *testing.T) {
	select {
	case <-s.exited:
		return
	default:
	}
	s.cmd.Process.Signal(interrupt)
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		t.Errorf("nexus serve did not stop on an interrupt:\n%s", s.stderr)
	}
}

// get fetches a page of the gateway with an optional bearer token.
func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricValue finds one sample in the Prometheus text format: name with exactly
// the labels given (in any order). -1 when absent.
func metricValue(text, name string, labels map[string]string) float64 {
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		got := map[string]string{}
		if strings.HasPrefix(rest, "{") {
			end := strings.Index(rest, "} ")
			if end < 0 {
				continue
			}
			for _, kv := range regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`).FindAllStringSubmatch(rest[1:end], -1) {
				got[kv[1]], _ = strconv.Unquote(`"` + kv[2] + `"`)
			}
			rest = rest[end+1:]
		} else if !strings.HasPrefix(rest, " ") {
			continue // a longer name
		}
		if len(got) != len(labels) {
			continue
		}
		match := true
		for k, v := range labels {
			match = match && got[k] == v
		}
		if match {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// observedHome is a gateway with one fixture server (calls time out after
// 500ms), agent coder (a token; every tool but fx.lookup) and memory on.
func observedHome(t *testing.T, extra map[string]any) (h *home, token string) {
	h = newHome(t, nil)
	token = "nxs_observe_test_token"
	cfg := map[string]any{
		// The timeout also bounds the child's handshake: 2s leaves room for a
		// loaded machine to start the fixture.
		"servers": map[string]any{"fx": h.fixtureServer(map[string]any{"timeout": "2s",
			"env": map[string]string{"FIXTURE_CALL_LOG": h.log, "FX_API_KEY": observeSecret}})},
		"agents": map[string]any{"coder": map[string]any{"tokenSha256": polTokenHash(token)}},
		"policy": map[string]any{"agents": map[string]any{"coder": map[string]any{"allow": []string{"*"}, "deny": []string{"fx.lookup"}}}},
	}
	for k, v := range extra {
		cfg[k] = v
	}
	h.writeConfig(cfg)
	return h, token
}

const observeSecret = "observe-secret-value-4242"

// scriptedSession makes one call of each outcome as agent coder, and returns
// the number of calls per outcome it made.
func scriptedSession(t *testing.T, c *client.Client) map[string]int {
	t.Helper()
	ctx := context.Background()
	call := func(name string, args map[string]any) (*mcp.CallToolResult, error) {
		return c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}})
	}
	for range 3 { // one miss, then two hits
		if res, err := call("fx__echo", map[string]any{"message": "same"}); err != nil || res.IsError {
			t.Fatalf("echo: %v %+v", err, res)
		}
	}
	if res, err := call("fx__getenv", map[string]any{"name": "HOME", "fail": true}); err != nil || !res.IsError {
		t.Fatalf("getenv fail: want a tool error, got %v %+v", err, res)
	}
	if _, err := call("fx__nothing_here", nil); err == nil {
		t.Fatal("an unknown tool: want a JSON-RPC error")
	}
	for range 2 {
		if res, err := call("fx__lookup", map[string]any{"q": "x"}); err != nil || !res.IsError || !strings.Contains(mcp.GetTextFromContent(res.Content[0]), "may not call") {
			t.Fatalf("lookup: want a refusal, got %v %+v", err, res)
		}
	}
	if res, err := call("fx__sleep", map[string]any{"ms": 8000}); err != nil || !res.IsError || !strings.Contains(mcp.GetTextFromContent(res.Content[0]), "did not answer") {
		t.Fatalf("sleep: want a timeout, got %v %+v", err, res)
	}
	if res, err := call("fx__destroy", map[string]any{"target": observeSecret}); err != nil || res.IsError {
		t.Fatalf("destroy: %v %+v", err, res)
	}
	return map[string]int{"ok": 4, "tool_error": 1, "rpc_error": 1, "refused": 2, "timeout": 1}
}

// TestMetricsMatchASession: after a scripted session over HTTP, /metrics counts
// each call under its server, tool, agent and outcome; memory's lookups, the
// refusals by rule, sessions and servers are there too; an unknown tool is
// "other", never its name.
func TestMetricsMatchASession(t *testing.T) {
	t.Parallel()
	h, token := observedHome(t, nil)
	s := h.startServe("listening on", "--http", "127.0.0.1:0")
	c, err := httpClient(t, s.base+"/mcp", token)
	if err != nil {
		t.Fatalf("initialize: %v\n%s", err, s.stderr)
	}
	want := scriptedSession(t, c)

	code, text := get(t, s.base+"/metrics", token)
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, text)
	}
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"nexus_calls_total", map[string]string{"server": "fx", "tool": "fx.echo", "agent": "coder", "outcome": "ok"}, 3},
		{"nexus_calls_total", map[string]string{"server": "fx", "tool": "fx.destroy", "agent": "coder", "outcome": "ok"}, 1},
		{"nexus_calls_total", map[string]string{"server": "fx", "tool": "fx.getenv", "agent": "coder", "outcome": "tool_error"}, 1},
		{"nexus_calls_total", map[string]string{"server": "other", "tool": "other", "agent": "coder", "outcome": "rpc_error"}, 1},
		{"nexus_calls_total", map[string]string{"server": "fx", "tool": "fx.lookup", "agent": "coder", "outcome": "refused"}, 2},
		{"nexus_calls_total", map[string]string{"server": "fx", "tool": "fx.sleep", "agent": "coder", "outcome": "timeout"}, 1},
		{"nexus_refusals_total", map[string]string{"agent": "coder", "origin": "policy.agents.coder", "rule": `deny "fx.lookup"`}, 2},
		{"nexus_memory_lookups_total", map[string]string{"server": "fx", "result": "miss"}, 3},   // echo, getenv, sleep
		{"nexus_memory_lookups_total", map[string]string{"server": "fx", "result": "bypass"}, 1}, // destroy
		{"nexus_memory_lookups_total", map[string]string{"server": "fx", "result": "hit"}, 2},
		{"nexus_call_duration_seconds_count", map[string]string{"server": "fx", "tool": "fx.echo"}, 3},
		{"nexus_child_call_duration_seconds_count", map[string]string{"server": "fx", "tool": "fx.echo"}, 1}, // the hits never reached it
		{"nexus_sessions", map[string]string{"front": "http"}, 1},
		{"nexus_servers", map[string]string{"state": "ready"}, 1},
		{"nexus_server_up", map[string]string{"server": "fx"}, 1},
		{"nexus_server_restarts_total", map[string]string{"server": "fx"}, 0},
	}
	for _, tt := range tests {
		if got := metricValue(text, tt.name, tt.labels); got != tt.want {
			t.Errorf("%s%v = %v, want %v", tt.name, tt.labels, got, tt.want)
		}
	}
	total := 0.0
	for outcome, n := range want {
		sum := 0.0
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, "nexus_calls_total{") && strings.Contains(line, `outcome="`+outcome+`"`) {
				v, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
				sum += v
			}
		}
		if sum != float64(n) {
			t.Errorf("calls with outcome %s: %v, want %d", outcome, sum, n)
		}
		total += sum
	}
	if strings.Contains(text, "nothing_here") {
		t.Error("an unknown tool's name became a label value")
	}
	// fx.destroy made memory forget fx's answers: what it holds is read when scraped.
	for _, name := range []string{"nexus_memory_entries", "nexus_memory_bytes"} {
		if v := metricValue(text, name, nil); v != 0 {
			t.Errorf("%s = %v, want 0 (fx.destroy invalidated the echo result)", name, v)
		}
	}
}

// TestAuditHoldsRefusalsNotReads: the trail holds every refusal and the allowed
// call of a destructive tool, nothing of the read-only calls; `nexus audit
// --json` prints them in the documented schema, one a line, oldest first;
// arguments are hashed, kept only when configured, and then redacted; a clean
// shutdown loses nothing. audit.export writes every decision, reads included,
// in the same schema; the canary secret the child holds (in its output,
// its error and the arguments) is in no line.
func TestAuditHoldsRefusalsNotReads(t *testing.T) {
	t.Parallel()
	for _, arguments := range []string{"hash", "redacted"} {
		t.Run("arguments="+arguments, func(t *testing.T) {
			h, token := observedHome(t, map[string]any{"audit": map[string]any{"arguments": arguments,
				"export": map[string]any{"path": "export/audit.jsonl"}}})
			s := h.startServe("listening on", "--http", "127.0.0.1:0")
			c, err := httpClient(t, s.base+"/mcp", token)
			if err != nil {
				t.Fatalf("initialize: %v\n%s", err, s.stderr)
			}
			scriptedSession(t, c)
			// The canary in the child's output and in its error.
			for _, fail := range []bool{false, true} {
				if _, err := c.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fx__getenv",
					Arguments: map[string]any{"name": "FX_API_KEY", "fail": fail}}}); err != nil {
					t.Fatal(err)
				}
			}
			c.Close()
			s.stop(t) // at once: the records still queued must be written at shutdown

			out, stderr, code := h.nexus("audit", "--json")
			if code != 0 {
				t.Fatalf("nexus audit --json: %d %s %s", code, out, stderr)
			}
			recs := entries(t, out)
			var got []string
			for _, r := range recs {
				got = append(got, r.Tool+":"+r.Outcome)
				if r.Schema != "nexus.audit/v1" || r.Agent != "coder" || r.DurationMS <= 0 || r.Policy != "policy.agents.coder" ||
					!strings.HasSuffix(r.PolicySource, "config.json") || len(r.PolicyRevision) != 12 || r.Session == "" || r.ClientName == "" {
					t.Errorf("record lacks who, how long or which rule where: %+v", r)
				}
			}
			if strings.Join(got, " ") != "fx.lookup:refused fx.lookup:refused fx.destroy:ok" {
				t.Fatalf("the trail holds %v, want the two refusals and the destructive call, oldest first", got)
			}
			destroy := recs[2]
			if destroy.Rule != `allow "*"` || destroy.Decision != "allowed" || destroy.Cache != "bypass" || destroy.ChildMS <= 0 || len(destroy.ArgumentsSHA256) != 64 {
				t.Errorf("the allowed call's record: %+v", destroy)
			}
			if recs[0].Rule != `deny "fx.lookup"` || recs[0].Decision != "denied" {
				t.Errorf("a refusal's record: %+v", recs[0])
			}
			switch args := string(destroy.Arguments); {
			case arguments == "hash" && args != "":
				t.Errorf("arguments were kept though not asked for: %s", args)
			case arguments == "redacted" && (!strings.Contains(args, "target") || strings.Contains(args, observeSecret) || !strings.Contains(args, "[redacted:")):
				t.Errorf("arguments should be kept and redacted: %s", args)
			}

			raw, err := os.ReadFile(filepath.Join(h.dir, "export", "audit.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(raw), observeSecret) || strings.Contains(out, observeSecret) {
				t.Errorf("the canary secret is in an exported record:\n%s", raw)
			}
			byOutcome := map[string]int{}
			var hits int
			for _, e := range entries(t, string(raw)) {
				byOutcome[e.Outcome]++
				if e.Cache == "hit" {
					hits++
				}
			}
			// Every decision: the scripted session's (the unknown tool was never
			// decided) and the two getenv calls.
			if byOutcome["ok"] != 5 || byOutcome["refused"] != 2 || byOutcome["tool_error"] != 2 || byOutcome["timeout"] != 1 || hits != 2 {
				t.Errorf("the export holds %v and %d hits:\n%s", byOutcome, hits, raw)
			}

			out, _, code = h.nexus("audit", "--refused", "--agent", "coder", "--tool", "fx.*", "--since", "1h")
			if code != 0 || strings.Count(strings.TrimSpace(out), "\n") != 2 || strings.Contains(out, "fx.destroy") || !strings.Contains(out, `deny "fx.lookup"`) {
				t.Errorf("nexus audit --refused:\n%s", out)
			}
			out, _, _ = h.nexus("cache", "stats")
			if !strings.Contains(out, "refusals (audit trail): 2") || !regexp.MustCompile(`coder\s+fx.lookup\s+2`).MatchString(out) {
				t.Errorf("cache stats lacks the refusal counts:\n%s", out)
			}
		})
	}
}

// entries reads JSON Lines of audit entries.
func entries(t *testing.T, lines string) []audit.Entry {
	t.Helper()
	var out []audit.Entry
	for _, l := range strings.Split(strings.TrimSpace(lines), "\n") {
		if l == "" {
			continue
		}
		var e audit.Entry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("a line that is no audit entry: %q: %v", l, err)
		}
		out = append(out, e)
	}
	return out
}

func TestAuditCommandFlags(t *testing.T) {
	t.Parallel()
	h := newHome(t, map[string]any{})
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"audit", "--since", "yesterday"}, 2, `--since "yesterday": write a duration`},
		{[]string{"audit", "--agent", "Bad Name"}, 2, `--agent "Bad Name"`},
		{[]string{"audit", "--tool", "lookup"}, 2, `--tool "lookup": write a canonical name`},
		{[]string{"audit", "--limit", "0"}, 2, "--limit 0"},
		{[]string{"audit", "coder"}, 2, "audit takes no arguments"},
		{[]string{"audit", "--bogus"}, 2, "bogus"},
		{[]string{"audit"}, 0, "no audit trail yet"},
		{[]string{"audit", "--help"}, 0, "--refused"},
	}
	for _, tt := range tests {
		out, stderr, code := h.nexus(tt.args...)
		if code != tt.code || !strings.Contains(out+stderr, tt.want) {
			t.Errorf("nexus %s: code %d, want %d and %q:\n%s%s", strings.Join(tt.args, " "), code, tt.code, tt.want, out, stderr)
		}
	}
}

// TestStdioMetrics: serve --metrics serves a stdio gateway's metrics; an agent
// the config does not name is counted as "unknown", never by its name.
func TestStdioMetrics(t *testing.T) {
	t.Parallel()
	h, token := observedHome(t, nil)
	s := startSession(t, h.env(), built.nexus, "serve", "--metrics", "127.0.0.1:0") // the client calls itself e2e-test
	re := regexp.MustCompile(`metrics on (http://\S+)/metrics`)
	var base string
	eventually(t, 10*time.Second, "serve --metrics says where", func() bool {
		m := re.FindStringSubmatch(s.stderr.String())
		if m != nil {
			base = m[1]
		}
		return m != nil
	})
	if r := s.call("fx__echo", map[string]any{"message": "m"}); r.text() != "m" {
		t.Fatalf("echo: %+v", r)
	}
	code, text := get(t, base+"/metrics", token)
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, text)
	}
	if v := metricValue(text, "nexus_calls_total", map[string]string{"server": "fx", "tool": "fx.echo", "agent": "unknown", "outcome": "ok"}); v != 1 {
		t.Errorf("the stdio call, agent unknown: %v\n%s", v, text)
	}
	if strings.Contains(text, "e2e-test") {
		t.Error("an agent the config does not name became a label value")
	}
	if v := metricValue(text, "nexus_sessions", map[string]string{"front": "stdio"}); v != 1 {
		t.Errorf("nexus_sessions{front=stdio} = %v", v)
	}
	if code, page := get(t, base+"/", token); code != http.StatusOK || !strings.Contains(page, "fx.echo") {
		t.Errorf("the status page on --metrics' address: %d %s", code, page)
	}
}

// TestAuditSharedInPostgres: two gateways (two NEXUS_HOMEs, as two replicas) whose
// config says "memory": {"backend": "postgres"} keep one trail in the shared
// database: either one's `nexus audit` and `cache stats` see both refusals.
func TestAuditSharedInPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	shared := pgtest.Schema(t)

	var replicas []*home
	for range 2 {
		h, token := observedHome(t, map[string]any{"memory": map[string]any{"backend": "postgres", "dsn": shared}})
		s := h.startServe("listening on", "--http", "127.0.0.1:0")
		c, err := httpClient(t, s.base+"/mcp", token)
		if err != nil {
			t.Fatalf("initialize: %v\n%s", err, s.stderr)
		}
		if res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fx__lookup"}}); err != nil || !res.IsError {
			t.Fatalf("lookup: want a refusal: %v %+v", err, res)
		}
		c.Close()
		s.stop(t)
		replicas = append(replicas, h)
	}
	out, stderr, code := replicas[0].nexus("audit", "--refused", "--json")
	if code != 0 {
		t.Fatalf("nexus audit: %d %s %s", code, out, stderr)
	}
	if recs := entries(t, out); len(recs) != 2 || recs[0].PolicyRevision == "" || recs[1].Session == recs[0].Session {
		t.Fatalf("nexus audit on one replica should see both refusals, each with its session and policy revision:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(replicas[0].dir, "audit.db")); err == nil {
		t.Error("with the postgres backend the trail was also written to audit.db")
	}
	out, _, _ = replicas[1].nexus("cache", "stats")
	if !strings.Contains(out, "refusals (audit trail): 2") {
		t.Errorf("cache stats on the other replica should count both refusals:\n%s", out)
	}
}

// TestMetricsCountRestarts: a child that exits is counted as restarting, then
// ready again with one restart; the crashed call is a tool error.
func TestMetricsCountRestarts(t *testing.T) {
	t.Parallel()
	h, token := observedHome(t, nil)
	s := h.startServe("listening on", "--http", "127.0.0.1:0")
	c, err := httpClient(t, s.base+"/mcp", token)
	if err != nil {
		t.Fatalf("initialize: %v\n%s", err, s.stderr)
	}
	res, err := c.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fx__crash"}})
	if err != nil || !res.IsError {
		t.Fatalf("crash: want a tool error, got %v %+v", err, res)
	}
	var text string
	eventually(t, 20*time.Second, "fx restarted once and is ready", func() bool {
		_, text = get(t, s.base+"/metrics", token)
		return metricValue(text, "nexus_server_restarts_total", map[string]string{"server": "fx"}) == 1 &&
			metricValue(text, "nexus_server_up", map[string]string{"server": "fx"}) == 1
	})
	if v := metricValue(text, "nexus_calls_total", map[string]string{"server": "fx", "tool": "fx.crash", "agent": "coder", "outcome": "tool_error"}); v != 1 {
		t.Errorf("the crashed call: %v\n%s", v, text)
	}
}

// TestCallsDoNotWaitForADeadTrail: with the shared database down, calls are
// answered as usual; the failing trail is logged, not the calls' problem.
func TestCallsDoNotWaitForADeadTrail(t *testing.T) {
	t.Parallel()
	h, token := observedHome(t, map[string]any{"memory": map[string]any{"enabled": false, "backend": "postgres", "dsn": "postgres://nexus@127.0.0.1:1/nexus?connect_timeout=2"}})
	s := h.startServe("listening on", "--http", "127.0.0.1:0")
	c, err := httpClient(t, s.base+"/mcp", token)
	if err != nil {
		t.Fatalf("initialize: %v\n%s", err, s.stderr)
	}
	ctx := context.Background()
	for range 3 {
		if res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fx__lookup"}}); err != nil || !res.IsError {
			t.Fatalf("lookup: want the refusal, got %v %+v", err, res)
		}
		if res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fx__destroy"}}); err != nil || res.IsError {
			t.Fatalf("destroy: %v %+v", err, res)
		}
	}
	eventually(t, 20*time.Second, "the failing trail is logged", func() bool {
		return strings.Contains(s.stderr.String(), "audit: writing the trail failed")
	})
	c.Close()
	s.stop(t)
	if !strings.Contains(s.stderr.String(), "audit: records lost at shutdown") {
		t.Errorf("a shutdown with the store down should say what was lost:\n%s", s.stderr)
	}
}
