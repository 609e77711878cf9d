// Package suggest finds the known names nearest to a mistyped one, for the
// "did you mean" part of an error: a config key, a catalog entry, a command, a
// tool. One rule everywhere, so a user meets the same hints from every command.
package suggest

import (
	"slices"
	"strings"
)

// MaxInput bounds the names looked at: an edit distance costs the product of the
// two lengths, and a client may send a tool name of megabytes.
const MaxInput = 128

// Closest returns the candidate nearest to s, or "" when none is near enough to
// be what the user meant.
func Closest(s string, candidates []string) string {
	if near := Nearest(s, candidates, 1); len(near) == 1 {
		return near[0]
	}
	return ""
}

// Nearest returns up to n candidates near to s, nearest first (ties by name),
// each once. Case is ignored. A candidate is near when its edit distance to s is
// under half the length of s plus two, or when it contains s (three characters or
// more), which finds "code-kg.kg_search" from "kg_search".
func Nearest(s string, candidates []string, n int) []string {
	if len(s) > MaxInput || n <= 0 {
		return nil
	}
	type scored struct {
		name string
		d    int
	}
	lower := strings.ToLower(strings.TrimSpace(s))
	var near []scored
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if len(lc) > 4*MaxInput {
			continue
		}
		d := Distance(lower, lc)
		if len(lower) >= 3 && strings.Contains(lc, lower) {
			d = min(d, 2)
		}
		if d < len(lower)/2+2 {
			near = append(near, scored{c, d})
		}
	}
	slices.SortStableFunc(near, func(a, b scored) int {
		if a.d != b.d {
			return a.d - b.d
		}
		return strings.Compare(a.name, b.name)
	})
	var out []string
	for _, c := range near {
		if len(out) == n {
			break
		}
		if !slices.Contains(out, c.name) {
			out = append(out, c.name)
		}
	}
	return out
}

// Distance is the Levenshtein edit distance between a and b, in bytes.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
