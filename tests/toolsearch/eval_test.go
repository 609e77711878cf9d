// Package toolsearch_test measures tool search on an evaluation set: the tools of
// 25 real servers and tasks written, before the ranking ever ran, the way people
// ask for them.
package toolsearch_test

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/nexus-mcp/nexus/aggregation"
	"github.com/nexus-mcp/nexus/toolsearch"
)

// Floors a change to the ranking must not fall under; set just below the figures
// measured when the ranking was written (see the README's "Tool search").
const (
	floorTop1 = 0.75 // measured: 0.776 (111 of 143)
	floorTop5 = 0.95 // measured: 0.965 (138 of 143)
)

type manifest struct {
	Server string            `json:"server"`
	Tools  []json.RawMessage `json:"tools"`
}

type task struct {
	Task string `json:"task"`
	Tool string `json:"tool"`
}

// evalTools reads every saved manifest as documents named <server>.<tool>, and
// the tools/list each would send.
func evalTools(t testing.TB) ([]toolsearch.Doc, []json.RawMessage) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "manifests", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	sort.Strings(files)
	var docs []toolsearch.Doc
	var raws []json.RawMessage
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var m manifest
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, raw := range m.Tools {
			var tool struct {
				Name, Title, Description string
				InputSchema              json.RawMessage
			}
			if err := json.Unmarshal(raw, &tool); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			docs = append(docs, toolsearch.Doc{Name: m.Server + "." + tool.Name, Words: m.Server + " " + tool.Name,
				Title: tool.Title, Description: tool.Description, Params: toolsearch.Params(tool.InputSchema)})
			raws = append(raws, raw)
		}
	}
	return docs, raws
}

func evalTasks(t testing.TB) []task {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "tasks.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tasks []task
	if err := json.Unmarshal(data, &tasks); err != nil {
		t.Fatal(err)
	}
	return tasks
}

// TestAccuracy ranks every task and reports how often the expected tool is first
// and in the first five; it fails under the floors.
func TestAccuracy(t *testing.T) {
	docs, _ := evalTools(t)
	tasks := evalTasks(t)
	known := map[string]bool{}
	for _, d := range docs {
		known[d.Name] = true
	}
	ix := toolsearch.New(docs, toolsearch.Options{})
	top1, top5 := 0, 0
	for _, tk := range tasks {
		if !known[tk.Tool] {
			t.Fatalf("task %q expects %s, which no manifest has", tk.Task, tk.Tool)
		}
		hits, err := ix.Search(context.Background(), tk.Task, 5)
		if err != nil {
			t.Fatal(err)
		}
		rank := -1
		for i, h := range hits {
			if h.Doc.Name == tk.Tool {
				rank = i
				break
			}
		}
		switch {
		case rank == 0:
			top1++
			top5++
		case rank > 0:
			top5++
		}
		if rank != 0 && testing.Verbose() {
			var got []string
			for _, h := range hits {
				got = append(got, h.Doc.Name)
			}
			t.Logf("rank %d for %q (want %s): %v", rank+1, tk.Task, tk.Tool, got)
		}
	}
	n := float64(len(tasks))
	t.Logf("%d tools, %d tasks: top-1 %.1f%%, top-5 %.1f%%", len(docs), len(tasks), 100*float64(top1)/n, 100*float64(top5)/n)
	if float64(top1)/n < floorTop1 || float64(top5)/n < floorTop5 {
		t.Errorf("top-1 %.3f (floor %.2f), top-5 %.3f (floor %.2f): the ranking got worse", float64(top1)/n, floorTop1, float64(top5)/n, floorTop5)
	}
}

// TestManifestSize reports what the evaluation set's tools/list costs a client
// on every turn, listing every tool and in search mode, in bytes and in tokens
// (estimated: bytes/4).
func TestManifestSize(t *testing.T) {
	docs, raws := evalTools(t)
	all, err := json.Marshal(map[string]any{"tools": raws})
	if err != nil {
		t.Fatal(err)
	}
	servers := map[string]bool{}
	for _, d := range docs {
		server, _, _ := strings.Cut(d.Name, ".")
		servers[server] = true
	}
	search := aggregation.SearchToolsList(len(docs), slices.Sorted(maps.Keys(servers)))
	t.Logf("%d tools of %d servers: every tool %d bytes (~%d tokens), search mode %d bytes (~%d tokens): %.1f%% saved",
		len(docs), len(servers), len(all), aggregation.EstimateTokens(len(all)), len(search), aggregation.EstimateTokens(len(search)),
		100*(1-float64(len(search))/float64(len(all))))
	if len(search)*10 > len(all) {
		t.Errorf("search mode lists %d bytes against %d for every tool: it should cost a tenth at most", len(search), len(all))
	}
}

// BenchmarkSearch is one nexus__find_tools ranking over the evaluation set.
func BenchmarkSearch(b *testing.B) {
	docs, _ := evalTools(b)
	tasks := evalTasks(b)
	ix := toolsearch.New(docs, toolsearch.Options{})
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := ix.Search(context.Background(), tasks[i%len(tasks)].Task, 5); err != nil {
			b.Fatal(err)
		}
	}
}
