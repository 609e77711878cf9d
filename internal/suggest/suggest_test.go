package suggest

import (
	"slices"
	"strings"
	"testing"
)

func TestNearest(t *testing.T) {
	tools := []string{"code-kg.kg_search", "code-kg.kg_stats", "doc-kg.search_docs", "files.read_file"}
	tests := []struct {
		name       string
		s          string
		candidates []string
		n          int
		want       []string
	}{
		{"typo in a key", "maxEntrys", []string{"enabled", "maxEntries", "maxBytes"}, 1, []string{"maxEntries"}},
		{"case is ignored", "MAXENTRIES", []string{"maxEntries"}, 1, []string{"maxEntries"}},
		{"a part of a tool name", "kg_search", tools, 3, []string{"code-kg.kg_search"}},
		{"nearest first", "code-kg.kg_stat", tools, 3, []string{"code-kg.kg_stats", "code-kg.kg_search"}},
		{"nothing near", "zz", []string{"url", "args"}, 3, nil},
		{"bounded count", "a", []string{"a", "b", "c"}, 2, []string{"a", "b"}},
		{"huge input is not compared", strings.Repeat("x", MaxInput+1), []string{"x"}, 3, nil},
		{"each once", "args", []string{"args", "args"}, 3, []string{"args"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Nearest(tc.s, tc.candidates, tc.n); !slices.Equal(got, tc.want) {
				t.Errorf("Nearest(%q) = %q, want %q", tc.s, got, tc.want)
			}
		})
	}
}

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"flaw", "lawn", 2}} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
