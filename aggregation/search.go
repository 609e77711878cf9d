package aggregation

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/toolsearch"
)

// The tools a search-mode list holds besides its pins. Their names are the
// gateway's own, the same in every wire style: a client is told to call them by
// these names.
const (
	findToolsName = "nexus__find_tools"
	callToolName  = "nexus__call_tool"
)

// Bounds of one nexus__find_tools answer.
const (
	defaultFindLimit = 5
	maxFindLimit     = 20
)

// searchView is the part of an agent's view that search mode adds: the tools it
// may call, indexed for nexus__find_tools. Only those are indexed, so a tool the
// agent may not call is never found.
type searchView struct {
	set    config.Toolset
	index  *toolsearch.Index
	base   []json.RawMessage          // the pinned tools and the two search tools, listed
	listed map[string]json.RawMessage // each tool the agent may call as tools/list gives it, by canonical name
}

// searchOptions are what a search-mode view is built with.
type searchOptions struct {
	set      config.Toolset
	embedder toolsearch.Embedder // nil: words only
	// text redacts what is indexed: a secret in a description must not be
	// findable (nor sent to an embedder) any more than it may be shown.
	text func(string) string
}

// newSearchView indexes the agent's tools; tools are those it may call, in
// canonical-name order, and items their listed forms.
func newSearchView(so searchOptions, tools []*Tool, items []json.RawMessage, servers []string) *searchView {
	sv := &searchView{set: so.set, listed: map[string]json.RawMessage{}}
	text := so.text
	if text == nil {
		text = func(s string) string { return s }
	}
	docs := make([]toolsearch.Doc, len(tools))
	for i, t := range tools {
		sv.listed[t.Canonical] = items[i]
		params := toolsearch.Params(t.InputSchema)
		for j := range params {
			params[j].Description = text(params[j].Description)
		}
		docs[i] = toolsearch.Doc{Name: t.Canonical, Words: text(strings.ReplaceAll(t.Canonical, ".", " ")), Title: text(t.front.Title),
			Description: text(t.front.Description), Params: params}
		if so.set.Pins(t.Canonical) {
			sv.base = append(sv.base, items[i])
		}
	}
	sv.index = toolsearch.New(docs, toolsearch.Options{Embedder: so.embedder})
	sv.base = append(sv.base, searchTools(len(tools), servers)...)
	return sv
}

// searchTools are the two tools of search mode, described for the agent: how many
// tools it can reach and on which servers, so that a model knows it may ask.
func searchTools(n int, servers []string) []json.RawMessage {
	on := "no server yet"
	if len(servers) > 0 {
		on = strings.Join(servers, ", ")
	}
	find := map[string]any{
		"name":  findToolsName,
		"title": "Find tools",
		"description": fmt.Sprintf("Find the tools for a task among the %d tools you may call (on %s), which are not listed here. "+
			"Returns the best matches with their names, descriptions and input schemas; call one with %s, or directly by its name.", n, on, callToolName),
		"inputSchema": map[string]any{"type": "object", "required": []string{"task"}, "properties": map[string]any{
			"task":  map[string]any{"type": "string", "description": "What you want to do, in words (e.g. \"post a message to a slack channel\")"},
			"limit": map[string]any{"type": "integer", "minimum": 1, "maximum": maxFindLimit, "description": fmt.Sprintf("How many tools to return (default %d)", defaultFindLimit)},
		}},
		"annotations": map[string]any{"readOnlyHint": true, "openWorldHint": false},
	}
	call := map[string]any{
		"name":        callToolName,
		"title":       "Call a tool",
		"description": fmt.Sprintf("Call a tool %s found, by its name, with its arguments. The call is decided, remembered and audited exactly as a direct call.", findToolsName),
		"inputSchema": map[string]any{"type": "object", "required": []string{"name"}, "properties": map[string]any{
			"name":      map[string]any{"type": "string", "description": "The tool's name, as " + findToolsName + " gave it"},
			"arguments": map[string]any{"type": "object", "description": "The tool's arguments, as its input schema says"},
		}},
	}
	out := make([]json.RawMessage, 0, 2)
	for _, t := range []map[string]any{find, call} {
		raw, _ := json.Marshal(t)
		out = append(out, raw)
	}
	return out
}

// SearchToolsList is the tools/list of a search-mode agent with no pins that may
// call n tools on servers: what search mode costs a client, whatever it reaches.
func SearchToolsList(n int, servers []string) json.RawMessage {
	return listResult("tools", searchTools(n, servers))
}

// sessionTools is the session's tools/list and its fingerprint: the view's, plus,
// in search mode, the found tools the budget added to this session (those the
// agent may still call, within the budget of the config now). The caller holds
// s.mu.
func (s *session) sessionTools(v *view) (json.RawMessage, [sha256.Size]byte) {
	if v.search == nil || len(s.found) == 0 {
		return v.tools, v.toolsFP
	}
	items := slices.Clone(v.search.base)
	found := s.found
	if n := v.search.set.Budget; len(found) > n { // a reload lowered the budget
		found = found[len(found)-n:]
	}
	for _, name := range found {
		if raw, ok := v.search.listed[name]; ok && !v.search.set.Pins(name) {
			items = append(items, raw)
		}
	}
	list := listResult("tools", items)
	return list, sha256.Sum256(list)
}

// listTools is tools/list: the agent's view, with what the session was added.
func listTools(ctx context.Context, s *session, _ json.RawMessage, _ sink) (json.RawMessage, *RPCError) {
	s.g.lists.await(ctx)
	s.g.listsMu.Lock()
	defer s.g.listsMu.Unlock()
	v := s.view()
	s.mu.Lock()
	defer s.mu.Unlock()
	list, fp := s.sessionTools(v)
	s.seen.tools, s.seen.listedTools = fp, true
	return list, nil
}

// searchCall handles the two search tools for an agent in search mode; handled
// is false for any other name (or agent), which the chain takes as it is.
// nexus__call_tool is unwrapped into the call it asks for and goes through the
// whole chain, policy first, like a direct call.
func (g *Gateway) searchCall(ctx context.Context, c *caller, agent string, p callParams) (unwrapped callParams, raw json.RawMessage, rpcErr *RPCError, handled bool) {
	if p.Name != findToolsName && p.Name != callToolName {
		return p, nil, nil, false
	}
	c.letGo() // the first lists, or an embedder, may take a while
	g.lists.await(ctx)
	v := g.view(agent)
	if v.search == nil {
		return p, nil, nil, false
	}
	if p.Name == findToolsName {
		raw, rpcErr = g.findTools(ctx, c, agent, v, p.Arguments)
		return p, raw, rpcErr, true
	}
	var inner struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
	}
	if err := json.Unmarshal(orEmpty(p.Arguments), &inner); err != nil || inner.Name == "" {
		return p, nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: callToolName + ` arguments must be {"name": "<tool>", "arguments": {...}}`}, true
	}
	if inner.Name == findToolsName || inner.Name == callToolName {
		return p, nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s calls the tools %s finds; call %s directly", callToolName, findToolsName, quoted(inner.Name))}, true
	}
	p.Name, p.Arguments = inner.Name, inner.Arguments
	return p, nil, nil, false
}

func orEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`)
	}
	return raw
}

// findTools is nexus__find_tools: the best matches among the tools the agent may
// call, as tools/list would give them. With a budget, they are added to the
// caller's session list too.
func (g *Gateway) findTools(ctx context.Context, c *caller, agent string, v *view, args json.RawMessage) (json.RawMessage, *RPCError) {
	var in struct {
		Task  string `json:"task"`
		Limit *int   `json:"limit"`
	}
	if err := json.Unmarshal(orEmpty(args), &in); err != nil || strings.TrimSpace(in.Task) == "" {
		return nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: findToolsName + ` arguments must be {"task": "<what you want to do>", "limit": N}`}
	}
	limit := defaultFindLimit
	if in.Limit != nil {
		if *in.Limit < 1 || *in.Limit > maxFindLimit {
			return nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: limit is from 1 to %d, not %d", findToolsName, maxFindLimit, *in.Limit)}
		}
		limit = *in.Limit
	}
	hits, err := v.search.index.Search(ctx, in.Task, limit)
	if err != nil {
		// The lexical ranking came with the error: serve it, and say why the
		// embedder was not heard.
		g.log.Warn("tool search: the embedder failed; ranking by words only", "agent", agent, "err", err)
	}
	tools := make([]json.RawMessage, len(hits))
	names := make([]string, len(hits))
	for i, h := range hits {
		tools[i] = v.search.listed[h.Doc.Name]
		names[i] = h.Doc.Name
	}
	if c != nil && c.s != nil && v.search.set.Budget > 0 {
		g.addFound(c.s, names, v.search.set.Budget)
	}
	list := listResult("tools", tools)
	text := string(list)
	if len(hits) == 0 {
		text = fmt.Sprintf("No tool you may call matches %s; try other words.", quoted(in.Task))
	}
	raw, _ := json.Marshal(map[string]any{
		"content":           []any{map[string]any{"type": "text", "text": text}},
		"structuredContent": json.RawMessage(list),
	})
	g.log.Debug("tool search", "agent", agent, "task", in.Task, "found", names)
	return raw, nil
}

// addFound puts found tools on the session's own list, the newest last, keeping
// at most budget of them, and tells the client when its list changed.
func (g *Gateway) addFound(s *session, names []string, budget int) {
	g.listsMu.Lock()
	defer g.listsMu.Unlock()
	v := s.view()
	s.mu.Lock()
	for _, n := range names {
		if v.search.set.Pins(n) {
			continue
		}
		s.found = slices.DeleteFunc(s.found, func(f string) bool { return f == n })
		s.found = append(s.found, n)
	}
	if len(s.found) > budget {
		s.found = slices.Delete(s.found, 0, len(s.found)-budget)
	}
	_, fp := s.sessionTools(v)
	told := s.seen.listedTools && s.seen.tools != fp
	s.seen.tools = fp
	s.mu.Unlock()
	if told {
		s.push(jsonrpc.Notification("notifications/tools/list_changed", nil))
	}
}

// ManifestCost is what an agent's tools/list costs a client on every turn, in
// bytes of JSON; EstimateTokens turns bytes into tokens.
type ManifestCost struct {
	Agent string `json:"agent"`
	// Mode is the agent's toolset: config.ToolsAll or config.ToolsSearch.
	Mode string `json:"mode"`
	// Tools is how many tools the agent may call.
	Tools int `json:"tools"`
	// AllBytes is the tools/list that lists them all; SearchBytes the one of
	// search mode (the agent's pins and the two search tools); ListedBytes the
	// one its mode sends.
	AllBytes    int `json:"allBytes"`
	SearchBytes int `json:"searchBytes"`
	ListedBytes int `json:"listedBytes"`
}

// EstimateTokens is a rough token count of n bytes of JSON: about four bytes a
// token, as tokenizers of the common models average on English and JSON. It is
// an estimate, said as one wherever it is shown.
func EstimateTokens(n int) int { return (n + 3) / 4 }

// ManifestCost says what the agent's tools/list costs now, and what the other
// mode would.
func (g *Gateway) ManifestCost(agent string) ManifestCost {
	v := g.view(agent)
	c := ManifestCost{Agent: agent, Mode: config.ToolsAll, Tools: v.allTools, AllBytes: v.allBytes, ListedBytes: len(v.tools)}
	if v.search != nil {
		c.Mode, c.SearchBytes = config.ToolsSearch, len(v.tools)
		return c
	}
	var servers []string
	for _, s := range g.lists.current().servers {
		if v.sees[s] {
			servers = append(servers, s)
		}
	}
	c.SearchBytes = len(SearchToolsList(v.allTools, servers))
	return c
}
