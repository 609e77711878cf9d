package pins

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Diff shows a change as a line diff of the indented definitions: "-" lines are
// the approved definition's, "+" lines the offered one's, "  " lines both.
func (c Change) Diff() string {
	var b strings.Builder
	switch c.Kind {
	case New:
		fmt.Fprintf(&b, "%s.%s: a new tool", c.Server, c.Tool)
	case Renamed:
		fmt.Fprintf(&b, "%s.%s: tool %s renamed to %s", c.Server, c.Tool, c.From, c.Tool)
	default:
		fmt.Fprintf(&b, "%s.%s: its definition changed", c.Server, c.Tool)
	}
	if len(c.Shadows) > 0 {
		fmt.Fprintf(&b, "; it has the name of %s", strings.Join(c.Shadows, ", "))
	}
	b.WriteString("\n")
	for _, l := range lineDiff(lines(c.Old), lines(c.New)) {
		b.WriteString(l)
		b.WriteString("\n")
	}
	return b.String()
}

// lines are a definition's indented JSON lines; none for nil.
func lines(def json.RawMessage) []string {
	if len(def) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, def, "", "  "); err != nil {
		return []string{string(def)}
	}
	return strings.Split(buf.String(), "\n")
}

// maxDiffLines bounds the longest common subsequence's table; definitions
// longer than this are shown whole, old then new.
const maxDiffLines = 4000

// lineDiff is the shortest edit script from a to b, by the longest common
// subsequence of their lines.
func lineDiff(a, b []string) []string {
	if len(a) > maxDiffLines || len(b) > maxDiffLines {
		var out []string
		for _, l := range a {
			out = append(out, "- "+l)
		}
		for _, l := range b {
			out = append(out, "+ "+l)
		}
		return out
	}
	// common[i][j] is the longest common subsequence of a[i:] and b[j:].
	common := make([][]int, len(a)+1)
	for i := range common {
		common[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				common[i][j] = common[i+1][j+1] + 1
			} else {
				common[i][j] = max(common[i+1][j], common[i][j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			out = append(out, "  "+a[i])
			i, j = i+1, j+1
		case common[i+1][j] >= common[i][j+1]:
			out = append(out, "- "+a[i])
			i++
		default:
			out = append(out, "+ "+b[j])
			j++
		}
	}
	for ; i < len(a); i++ {
		out = append(out, "- "+a[i])
	}
	for ; j < len(b); j++ {
		out = append(out, "+ "+b[j])
	}
	return out
}
