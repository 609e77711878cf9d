package samples

import (
	"bufio"
	"context"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
)

// Commits of codekg_data.json the tests name: syl2042/Nexus-Pocket main,
// oldest first, and the heads of the other branches.
const (
	commitNP001   = "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"
	commitNPSumm  = "7d1e2f3a4b5c6d7e8f90a1b2c3d4e5f607182930"
	commitNP002   = "e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d"
	commitNPDocs  = "5e6f7a8b9c0d1e2f3a4b5c6d7e8f90a1b2c3d4e5"
	commitNPHead  = "9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d"
	commitEcho001 = "b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f80"
	commitAI001   = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c"
)

var np = map[string]any{"repository": "syl2042/Nexus-Pocket", "branch": "main"}

func with(base map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

func graphID(body map[string]any, key string) string {
	g, _ := body[key].(map[string]any)
	id, _ := g["graph_id"].(string)
	return id
}

// TestCodeKGReadTools calls every read-only code-kg tool with the documented
// cases.
func TestCodeKGReadTools(t *testing.T) {
	s := inProcess(t, NewCodeKG(Options{}))
	meeting := "services/echo/app/services/meeting_service.py"
	tuple := map[string]any{"graph_id": "g-np-main-002", "source_tool": "bandit", "finding_type": "bandit_b324_hashlib", "path": meeting}

	cases := []struct {
		tool    string
		args    map[string]any
		status  string
		isError bool
		check   func(t *testing.T, b map[string]any)
	}{
		{"kg_latest_graph", np, "ok", false, func(t *testing.T, b map[string]any) {
			if graphID(b, "graph") != "g-np-main-002" {
				t.Errorf("latest = %v", b["graph"])
			}
		}},
		{"kg_latest_graph", map[string]any{"repository": "syl2042/aurora-infra"}, "ok", false, nil}, // single branch: no branch needed
		{"kg_latest_graph", map[string]any{"repository": "syl2042/Nexus-Pocket"}, "ambiguous", false, nil},
		{"kg_latest_graph", map[string]any{"graph_id": "g-np-main-001", "latest": true}, "ambiguous", false, nil},
		{"kg_latest_graph", map[string]any{"graph_id": "g-np-main-001", "branch": "feature/echo-sync"}, "refused", true, nil},
		{"kg_latest_graph", map[string]any{"repository": "someone/else"}, "not_found", true, nil},
		{"kg_latest_graph", map[string]any{}, "refused", true, nil},
		{"kg_graph_summary", map[string]any{"graph_id": "g-np-main-001"}, "ok", false, func(t *testing.T, b map[string]any) {
			c := b["counts"].(map[string]any)
			if c["files"].(float64) < 15 || c["findings"].(float64) < 15 {
				t.Errorf("counts %v", c)
			}
		}},
		{"kg_list_audit_risks", with(np, "severity", "high", "limit", 2), "ok", false, func(t *testing.T, b map[string]any) {
			if b["returned"].(float64) != 2 || b["truncated"] != true || b["total"].(float64) != 4 {
				t.Errorf("risks %v", b)
			}
		}},
		{"kg_get_audit_risk", map[string]any{"graph_id": "g-np-main-002", "risk_id": "np-risk-echo-002"}, "ok", false, func(t *testing.T, b map[string]any) {
			if n := len(b["findings"].([]any)); n != 2 {
				t.Errorf("risk findings %d, want 2", n)
			}
		}},
		{"kg_get_audit_risk", map[string]any{"graph_id": "g-np-main-002", "risk_id": "nope"}, "not_found", true, nil},
		{"kg_list_anomalies", with(np, "blocking_only", true), "ok", false, func(t *testing.T, b map[string]any) {
			if b["total"].(float64) != 2 {
				t.Errorf("blocking anomalies %v", b["anomalies"])
			}
		}},
		{"kg_list_anomalies", with(np, "kind", "unresolved_import"), "ok", false, nil},
		{"kg_get_anomaly", map[string]any{"graph_id": "g-np-main-002", "anomaly_id": "np-anom-import-004"}, "ok", false, nil},
		{"kg_get_anomaly", map[string]any{"graph_id": "g-np-main-001", "anomaly_id": "np-anom-import-004"}, "not_found", true, nil},
		{"kg_resolve_finding", tuple, "ambiguous", false, func(t *testing.T, b map[string]any) {
			if len(b["candidates"].([]any)) != 2 || len(b["required_disambiguation"].([]any)) != 3 {
				t.Errorf("ambiguous answer %v", b)
			}
		}},
		{"kg_resolve_finding", with(tuple, "line", 1094), "ready", false, func(t *testing.T, b map[string]any) {
			for _, k := range []string{"finding", "file_context", "nearby_relations", "impact", "recommended_reads", "recommended_commands", "safety_notes"} {
				if _, has := b[k]; !has {
					t.Errorf("action packet lacks %s", k)
				}
			}
			if f := b["finding"].(map[string]any); f["line"].(float64) != 1094 || f["severity"] != "high" {
				t.Errorf("finding %v", f)
			}
		}},
		{"kg_resolve_finding", with(tuple, "dedupe_key", "bandit:bandit_b324_hashlib:"+meeting+":1210"), "ready", false, nil},
		{"kg_resolve_finding", with(tuple, "line", 7), "not_found", true, nil},
		{"kg_resolve_finding", map[string]any{"graph_id": "g-np-main-002", "source_tool": "ruff", "finding_type": "ruff_e722_bare_except", "path": "services/notes/app/sync.py"}, "ready", false, nil},
		{"kg_file_context", with(np, "path", meeting), "ok", false, func(t *testing.T, b map[string]any) {
			if len(b["findings"].([]any)) != 2 || len(b["relations"].([]any)) == 0 {
				t.Errorf("file context %v", b)
			}
		}},
		{"kg_file_context", with(np, "path", "nope.py"), "not_found", true, nil},
		{"kg_impact", with(np, "target", "shared/config.py", "max_depth", 1), "ok", false, func(t *testing.T, b map[string]any) {
			files := b["affected_files"].([]any)
			if len(files) < 4 {
				t.Errorf("config.py impact %v", files)
			}
		}},
		{"kg_impact", with(np, "target", meeting+"::MeetingService.create_meeting"), "ok", false, func(t *testing.T, b map[string]any) {
			if len(b["dependents"].([]any)) == 0 {
				t.Errorf("symbol impact %v", b)
			}
		}},
		{"kg_impact", with(np, "target", "nope.py"), "not_found", true, nil},
		{"kg_compare_runs", np, "ok", false, func(t *testing.T, b map[string]any) {
			if graphID(b, "base") != "g-np-main-001" || graphID(b, "head") != "g-np-main-002" {
				t.Errorf("runs %v %v", b["base"], b["head"])
			}
			if len(b["files_added"].([]any)) != 1 || len(b["files_removed"].([]any)) != 1 ||
				len(b["findings_added"].([]any)) != 2 || len(b["findings_resolved"].([]any)) != 2 {
				t.Errorf("diff %v", b)
			}
		}},
		{"kg_compare_runs", map[string]any{"base_graph_id": "g-np-main-002", "head_graph_id": "g-ai-main-001"}, "refused", true, nil},
		{"kg_compare_runs", map[string]any{"repository": "syl2042/aurora-infra"}, "not_found", true, nil},
		{"kg_regenerate_dry_run", np, "dry_run", false, nil},
	}
	for _, c := range cases {
		t.Run(c.tool, func(t *testing.T) {
			b := s.expect(c.tool, c.args, c.status, c.isError)
			if c.check != nil {
				c.check(t, b)
			}
		})
	}
}

// TestRegenerate checks the confirmations of a real regeneration and that a
// real run is the new latest graph, diffable with the one before.
func TestRegenerate(t *testing.T) {
	var log strings.Builder
	s := inProcess(t, NewCodeKG(Options{CallLog: &syncWriter{b: &log}}))
	echo := map[string]any{"repository": "syl2042/Nexus-Pocket", "branch": "feature/echo-sync"}

	b := s.expect("kg_regenerate", np, "dry_run", false) // dry run by default
	if !strings.Contains(strings.Join(toStrings(b["requires"]), ","), "confirmed_by_sr=true") {
		t.Errorf("dry run requires %v", b["requires"])
	}
	s.expect("kg_regenerate", with(np, "confirmed_by_sr", true), "dry_run", false) // still a dry run
	b = s.expect("kg_regenerate", with(np, "dry_run", false), "refused", true)
	if m := toStrings(b["missing"]); len(m) != 1 || m[0] != "confirmed_by_sr=true" {
		t.Errorf("missing %v", m)
	}
	s.expect("kg_regenerate_submit", np, "refused", true)
	s.expect("kg_regenerate", with(np, "dry_run", false, "confirmed_by_sr", true, "graph_id", "g-np-main-001"), "refused", true) // not the newest run
	b = s.expect("kg_regenerate", map[string]any{"repository": "syl2042/Nexus-Pocket", "dry_run": false, "confirmed_by_sr": true}, "refused", true)
	if b["refusal"] != "ambiguous_graph" {
		t.Errorf("ambiguous refusal %v", b)
	}
	// Dirty worktree: allow_dirty is one more confirmation, and a warning.
	b = s.expect("kg_regenerate_dry_run", echo, "dry_run", false)
	if len(b["warnings"].([]any)) == 0 {
		t.Errorf("dirty dry run without warning: %v", b)
	}
	b = s.expect("kg_regenerate", with(echo, "dry_run", false, "confirmed_by_sr", true), "refused", true)
	if m := toStrings(b["missing"]); len(m) != 1 || m[0] != "allow_dirty=true" {
		t.Errorf("missing %v", m)
	}
	b = s.expect("kg_regenerate", with(echo, "dry_run", false, "confirmed_by_sr", true, "allow_dirty", true), "completed", false)
	if len(b["warnings"].([]any)) == 0 || graphID(b, "new_graph") != "g-np-echo-002" {
		t.Errorf("dirty regeneration %v", b)
	}

	// Real run on main, through the split tool.
	b = s.expect("kg_regenerate_submit", with(np, "confirmed_by_sr", true, "reason", "after SR lot"), "completed", false)
	if graphID(b, "new_graph") != "g-np-main-003" || b["previous_graph_id"] != "g-np-main-002" || len(b["warnings"].([]any)) != 0 {
		t.Fatalf("submit %v", b)
	}
	if got := graphID(s.expect("kg_latest_graph", np, "ok", false), "graph"); got != "g-np-main-003" {
		t.Fatalf("latest after regeneration = %s", got)
	}
	d := s.expect("kg_compare_runs", np, "ok", false)
	if graphID(d, "base") != "g-np-main-002" || graphID(d, "head") != "g-np-main-003" || len(d["findings_resolved"].([]any)) != 1 {
		t.Fatalf("diff after regeneration %v", d)
	}
	// The old latest is now ambiguous with latest=true.
	s.expect("kg_graph_summary", map[string]any{"graph_id": "g-np-main-002", "latest": true}, "ambiguous", false)

	// An invalid call never runs: no run is created.
	invalidParams(t, s, "kg_regenerate_submit", with(np, "confirmed_by_sr", true, "force", true))
	invalidParams(t, s, "kg_regenerate", with(np, "dry_run", "false", "confirmed_by_sr", true))
	if got := graphID(s.expect("kg_latest_graph", np, "ok", false), "graph"); got != "g-np-main-003" {
		t.Fatalf("an invalid call created a run: latest = %s", got)
	}
	if !strings.Contains(log.String(), "kg_regenerate_submit\n") {
		t.Errorf("call log %q", log.String())
	}
}

func TestRegenerateConcurrent(t *testing.T) {
	srv := NewCodeKG(Options{})
	s := inProcess(t, srv)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			s.expect("kg_regenerate_submit", with(np, "confirmed_by_sr", true), "completed", false)
			s.expect("kg_latest_graph", np, "ok", false)
		})
	}
	wg.Wait()
	if got := graphID(s.expect("kg_latest_graph", np, "ok", false), "graph"); got != "g-np-main-010" {
		t.Fatalf("latest after 8 runs = %s", got)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func TestCompareWithLocalGit(t *testing.T) {
	root := t.TempDir()
	repo := filepath.Join(root, "Nexus-Pocket")
	if err := os.MkdirAll(filepath.Join(repo, ".git", "refs", "heads"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(repo, ".git", "HEAD"), "ref: refs/heads/main\n")
	writeFile(t, filepath.Join(repo, ".git", "refs", "heads", "main"), commitNP002+"\n")
	outside := t.TempDir()
	s := inProcess(t, NewCodeKG(Options{LocalRepoRoots: []string{root}}))

	verdict := func(args map[string]any, want string) map[string]any {
		t.Helper()
		b := s.expect("kg_compare_with_local_git", with(np, flatten(args)...), "ok", false)
		if b["verdict"] != want {
			t.Fatalf("%v: verdict %v, want %s (%v)", args, b["verdict"], want, b["reasons"])
		}
		return b
	}
	if b := verdict(map[string]any{"local_head": commitNP002}, "fresh"); b["patch_allowed"] != true {
		t.Errorf("fresh but patch not allowed")
	}
	verdict(map[string]any{"local_head": commitNP002[:7]}, "fresh")
	verdict(map[string]any{"local_head": commitNP002, "local_dirty_files": []string{"README.md"}}, "stale_but_usable")
	verdict(map[string]any{"local_head": commitNP002, "local_dirty_files": []string{"services/echo/app/services/meeting_service.py"}}, "unsafe_for_patch_decision")
	verdict(map[string]any{"local_head": commitNPDocs}, "stale_but_usable") // 1 commit ahead, README only
	verdict(map[string]any{"local_head": commitNPHead}, "stale")            // ahead through a file with findings
	verdict(map[string]any{"local_head": commitNP001}, "stale")             // behind
	verdict(map[string]any{"local_head": "deadbeefdeadbeef"}, "stale")      // unknown
	verdict(map[string]any{}, "stale")                                      // head unknown
	if b := verdict(map[string]any{"local_path": repo}, "fresh"); b["local_head_source"] != "local_path" {
		t.Errorf("head source %v", b["local_head_source"])
	}
	verdict(map[string]any{"local_path": repo, "local_head": commitNPDocs}, "unsafe_for_patch_decision") // disagreement

	refused := func(path string) {
		t.Helper()
		b := s.expect("kg_compare_with_local_git", with(np, "local_path", path), "refused", true)
		if b["refusal"] != "local_path_not_allowed" {
			t.Errorf("%s: %v", path, b)
		}
	}
	refused(outside)
	refused(repo + "/../../" + filepath.Base(outside))
	refused(root + "/../")
	refused("relative/path")
	// A symlink inside the root that points outside it.
	link := filepath.Join(root, "escape")
	if err := os.Symlink(outside, link); err == nil {
		refused(link)
	}
	// No roots at all.
	none := inProcess(t, NewCodeKG(Options{}))
	none.expect("kg_compare_with_local_git", with(np, "local_path", repo), "refused", true)
}

func flatten(m map[string]any) []any {
	var out []any
	for k, v := range m {
		out = append(out, k, v)
	}
	return out
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLocalPathRefusedOverHTTP drives a Remote code-kg over real streamable
// HTTP: a local_path is refused even under an allow-listed root.
func TestLocalPathRefusedOverHTTP(t *testing.T) {
	root := t.TempDir()
	srv := httptest.NewServer(newHTTPHandler(NewCodeKG(Options{Remote: true, LocalRepoRoots: []string{root}})))
	defer srv.Close()
	c, err := client.NewStreamableHttpClient(srv.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	initialize(t, c)
	s := &session{t: t, c: c}
	b := s.expect("kg_compare_with_local_git", with(np, "local_path", root), "refused", true)
	if !strings.Contains(b["reason"].(string), "remote HTTP") {
		t.Errorf("reason %v", b["reason"])
	}
	s.expect("kg_compare_with_local_git", with(np, "local_head", commitNP002), "ok", false) // repository + branch still work
	invalidParams(t, s, "kg_latest_graph", with(np, "token", "x"))
}

// TestServeHTTP runs Serve on 127.0.0.1:0 and drives it with a streamable
// HTTP client: Serve over HTTP makes the server Remote.
func TestServeHTTP(t *testing.T) {
	t.Setenv(EnvLocalRepoRoots, t.TempDir())
	errR, errW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, CodeKGName, "127.0.0.1:0", strings.NewReader(""), io.Discard, errW) }()
	line, err := bufio.NewReader(errR).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, errR) }()
	_, url, found := strings.Cut(strings.TrimSpace(line), "streamable HTTP on ")
	if !found {
		t.Fatalf("no address in %q", line)
	}
	c, err := client.NewStreamableHttpClient(url)
	if err != nil {
		t.Fatal(err)
	}
	initialize(t, c)
	s := &session{t: t, c: c}
	s.expect("kg_compare_with_local_git", with(np, "local_path", os.Getenv(EnvLocalRepoRoots)), "refused", true)
	s.expect("kg_latest_graph", np, "ok", false)
	_ = c.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not stop")
	}
	_ = errW.Close()
}
