package aggregation

import "github.com/nexus-mcp/nexus/policy"

// toldTo is d as a refusal tells it to the client of session s (nil: no client,
// `nexus call`). The file that holds the rule is named only on stdio, whose
// client runs on this machine as its user. Over HTTP the agent may be anywhere,
// and an absolute path tells it the user's name and the layout of their disk:
// it is told the rule and where in the config it lives (policy.agents.bob),
// which is what it can act on; the log and the audit trail keep the file.
func toldTo(s *session, d policy.Decision) policy.Decision {
	if s != nil && s.front != frontStdio {
		d.Source = ""
	}
	return d
}
