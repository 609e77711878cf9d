package main

import "testing"

func TestLayering(t *testing.T) {
	tests := []struct {
		name           string
		edges          map[string][]string
		cyclic, upward int
	}{
		{"layered", map[string][]string{"a": {"b", "c"}, "b": {"c"}}, 0, 0},
		{"one cycle", map[string][]string{"a": {"b"}, "b": {"a"}}, 2, 1},
		{"cycle above a layer", map[string][]string{"a": {"b", "c"}, "b": {"a", "c"}}, 2, 1},
		{"ring of three", map[string][]string{"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, 3, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			edges := map[string]map[string]bool{}
			nodes := map[string]bool{}
			for from, tos := range tt.edges {
				nodes[from] = true
				edges[from] = map[string]bool{}
				for _, to := range tos {
					edges[from][to], nodes[to] = true, true
				}
			}
			var names []string
			for n := range nodes {
				names = append(names, n)
			}
			if cyclic, _ := inCycles(names, edges); cyclic != tt.cyclic {
				t.Errorf("references in a cycle = %d, want %d", cyclic, tt.cyclic)
			}
			if up := upward(names, edges); up != tt.upward {
				t.Errorf("upward = %d, want %d", up, tt.upward)
			}
		})
	}
}
