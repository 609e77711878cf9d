package tests

import (
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// docKGHome runs the sample doc-kg as a child, counting the calls it receives.
func docKGHome(t *testing.T, memory map[string]any) (*home, func() int) {
	t.Helper()
	h := newHome(t, nil)
	calls := filepath.Join(h.dir, "doc-kg.calls")
	cfg := map[string]any{"servers": map[string]any{"doc-kg": map[string]any{
		"command": built.sample, "args": []string{"doc-kg"},
		"env": map[string]string{"NEXUS_SAMPLE_CALL_LOG": calls},
	}}}
	if memory != nil {
		cfg["memory"] = memory
	}
	h.writeConfig(cfg)
	count := func() int {
		data, _ := readFile(calls)
		return strings.Count(data, "doc_kg_search")
	}
	return h, count
}

func TestSemanticHitsThroughNexus(t *testing.T) {
	t.Parallel()
	h, searches := docKGHome(t, nil)
	// Two sessions: a session rewording its own question is not served its
	// own answer (memory.rewording); another session is.
	first, other := h.serveStdio(), h.serveStdio()
	steps := []struct {
		name     string
		s        *session
		args     map[string]any
		status   string
		searches int
	}{
		{"first question", first, map[string]any{"query": "deployment checklist for staging", "limit": 3}, "miss", 1},
		{"the same session rewording it is not served its own answer", first, map[string]any{"query": "the staging deployment checklist", "limit": 3}, "miss", 2},
		{"another session's paraphrase is served from memory", other, map[string]any{"query": "staging deployment checklist", "limit": 3}, "semantic_hit", 2},
		{"a near-miss is another question", other, map[string]any{"query": "deployment checklist for production", "limit": 3}, "miss", 3},
		{"another non-text argument is another question", other, map[string]any{"query": "staging deployment checklist", "limit": 4}, "miss", 4},
	}
	for _, st := range steps {
		r := st.s.call("doc-kg__doc_kg_search", st.args)
		if r.IsError || r.cacheStatus() != st.status {
			t.Errorf("%s: status %q (%v), want %q", st.name, r.cacheStatus(), r.Meta["nexus/cache"], st.status)
		}
		if n := searches(); n != st.searches {
			t.Errorf("%s: the child received %d searches, want %d", st.name, n, st.searches)
		}
		if st.status == "semantic_hit" {
			c := r.Meta["nexus/cache"].(map[string]any)
			matched, _ := c["matched"].(string)
			rewrites, _ := c["rewrites"].([]any)
			if !strings.Contains(matched, "staging deployment checklist") && matched != "deployment checklist for staging" || len(rewrites) == 0 {
				t.Errorf("a semantic hit says what matched and which rewrites made it one: %v", c)
			}
		}
	}
	// The serving process writes its counters to the database every second;
	// a loaded run (eight of these tests at once, race-built) may take longer.
	eventually(t, 20*time.Second, "cache stats counts the semantic hit", func() bool {
		out, _, _ := h.nexus("cache", "stats")
		return strings.Contains(out, "semantic 1")
	})
}

func TestSemanticOffAndEmbedderOutage(t *testing.T) {
	t.Parallel()
	// A port nobody listens on: the embedder fails, calls are still answered (exact only).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	for _, tc := range []struct {
		name   string
		memory map[string]any
	}{
		{"semantic off", map[string]any{"semantic": false}},
		{"semantic off for the tool", map[string]any{"semantic": map[string]any{"doc-kg.doc_kg_search": []string{}}}},
		{"embedder outage", map[string]any{"embedder": map[string]any{"provider": "openai", "baseURL": dead, "model": "m", "timeout": "500ms"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, searches := docKGHome(t, tc.memory)
			s := h.serveStdio()
			for i, q := range []string{"deployment checklist for staging", "staging deployment checklist", "deployment checklist for staging"} {
				r := s.call("doc-kg__doc_kg_search", map[string]any{"query": q})
				want := []string{"miss", "miss", "hit"}[i]
				if r.IsError || r.cacheStatus() != want {
					t.Errorf("call %d (%q): status %q, want %q", i, q, r.cacheStatus(), want)
				}
			}
			if n := searches(); n != 2 {
				t.Errorf("the child received %d searches, want 2", n)
			}
		})
	}
}

// TestDemoShowsSimilarity: `nexus demo` serves a paraphrase from memory
// with its similarity, and forwards a near-miss.
func TestDemoShowsSimilarity(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	out, stderr, code := h.nexus("demo")
	if code != 0 {
		t.Fatalf("nexus demo exited %d\n%s%s", code, out, stderr)
	}
	for what, re := range map[string]string{
		"a paraphrase served with its similarity": `(?s)"query":"staging deployment checklist"[^\n]*\n\s+ok in [^\n]*memory: semantic_hit \(similarity 0\.\d+ to "deployment checklist for staging"\)`,
		"a near-miss forwarded":                   `(?s)"query":"deployment checklist for production"[^\n]*\n\s+ok in [^\n]*memory: miss`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("the demo output lacks %s (/%s/):\n%s", what, re, out)
		}
	}
}
