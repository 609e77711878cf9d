package aggregation

import (
	"strings"

	"github.com/nexus-mcp/nexus/policy"
)

// agentHint turns a client's name ("Claude Desktop") into an agent name
// ("claude-desktop"), or "" when nothing usable is left.
func agentHint(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(name)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	hint := strings.Trim(b.String(), "-")
	for strings.Contains(hint, "--") {
		hint = strings.ReplaceAll(hint, "--", "-")
	}
	if len(hint) > 32 {
		hint = strings.TrimRight(hint[:32], "-")
	}
	if !policy.ValidAgentName(hint) {
		return ""
	}
	return hint
}
