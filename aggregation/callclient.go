package aggregation

// clientInfo is what a client says it is: initialize's clientInfo, or a
// 2026-07-28 request's _meta. Only a hint, never an identity.
type clientInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// by stamps a call with the session it came in (the audit record's session,
// client name and version): a stateless request's session is the request, named
// by its JSON-RPC id.
func (c *Call) by(s *session) {
	if s == nil {
		return
	}
	c.Session = s.era.auditName(s.id)
	c.Client, c.ClientVersion = s.client.Name, s.client.Version
}
