package aggregation

import (
	"context"
	"strings"

	"github.com/mark3labs/mcp-go/server"

	"github.com/nexus-mcp/nexus/policy"
)

type agentKey struct{}

// WithAgent marks ctx as coming from agent: the identity a front transport
// established (a --agent flag, NEXUS_AGENT, or an HTTP bearer token).
func WithAgent(ctx context.Context, agent string) context.Context {
	return context.WithValue(ctx, agentKey{}, agent)
}

// agentOf is the identity step: the agent a front transport established, else (on
// stdio only, where nothing else is known) the client's self-reported name as a
// hint, else anonymous. Over HTTP the transport always sets the agent, so clientInfo
// is never consulted there.
func (g *Gateway) agentOf(ctx context.Context) string {
	if a, ok := ctx.Value(agentKey{}).(string); ok && a != "" {
		return a
	}
	if s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		if a := agentHint(s.GetClientInfo().Name); a != "" {
			return a
		}
	}
	return policy.Anonymous
}

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
