package aggregation

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// extras are what a child offers beyond tools: resources, resource templates and
// prompts. Resources keep their URIs (a URI already names its origin); prompts are
// namespaced like tools.
type extras struct {
	resources []mcp.Resource
	templates []mcp.ResourceTemplate
	prompts   []mcp.Prompt
}

// listExtras lists a child's resources, templates and prompts, as its capabilities
// announce them. A failure is logged and leaves that kind empty: a child whose
// resources are broken still serves its tools.
func (c *child) listExtras(ctx context.Context, cn *conn) extras {
	var ex extras
	list := func(method, field string, into any) {
		cursor := ""
		for page := 0; page < 100; page++ {
			params := map[string]any{}
			if cursor != "" {
				params["cursor"] = cursor
			}
			raw, err := cn.request(ctx, method, params)
			if err != nil {
				c.log.Warn("listing failed", "method", method, "err", err)
				return
			}
			var res map[string]json.RawMessage
			if err := json.Unmarshal(raw, &res); err != nil {
				c.log.Warn("listing failed", "method", method, "err", err)
				return
			}
			var items []json.RawMessage
			_ = json.Unmarshal(res[field], &items)
			for _, it := range items {
				switch dst := into.(type) {
				case *[]mcp.Resource:
					var r mcp.Resource
					if json.Unmarshal(it, &r) == nil && r.URI != "" {
						*dst = append(*dst, r)
					}
				case *[]mcp.ResourceTemplate:
					var t mcp.ResourceTemplate
					if json.Unmarshal(it, &t) == nil && t.URITemplate != nil {
						*dst = append(*dst, t)
					}
				case *[]mcp.Prompt:
					var p mcp.Prompt
					if json.Unmarshal(it, &p) == nil && p.Name != "" {
						*dst = append(*dst, p)
					}
				}
			}
			_ = json.Unmarshal(res["nextCursor"], &cursor)
			if cursor == "" {
				return
			}
		}
	}
	if cn.caps.Resources != nil {
		list("resources/list", "resources", &ex.resources)
		list("resources/templates/list", "resourceTemplates", &ex.templates)
	}
	if cn.caps.Prompts != nil {
		list("prompts/list", "prompts", &ex.prompts)
	}
	return ex
}

// promptRoute is where a namespaced prompt lives.
type promptRoute struct{ server, name string }

// syncExtras registers the children's resources, templates and prompts with the
// front server when they changed. Called with g.mu held.
func (g *Gateway) syncExtras() {
	var resources []server.ServerResource
	var templates []server.ServerResourceTemplate
	var prompts []server.ServerPrompt
	routes := map[string]promptRoute{}
	owners := map[string]string{} // resource URI or template -> server
	var fp []byte
	kids := g.kids()
	names := make([]string, 0, len(kids))
	for n := range kids {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		c := kids[name]
		c.mu.Lock()
		ex := c.extras
		c.mu.Unlock()
		for _, r := range ex.resources {
			if _, taken := owners[r.URI]; taken {
				continue
			}
			owners[r.URI] = name
			resources = append(resources, server.ServerResource{Resource: r, Handler: g.readResource(name)})
			b, _ := json.Marshal(r)
			fp = append(fp, b...)
		}
		for _, t := range ex.templates {
			raw := t.URITemplate.Raw()
			if _, taken := owners[raw]; taken {
				continue
			}
			owners[raw] = name
			templates = append(templates, server.ServerResourceTemplate{Template: t, Handler: server.ResourceTemplateHandlerFunc(g.readResource(name))})
			b, _ := json.Marshal(t)
			fp = append(fp, b...)
		}
		for _, p := range ex.prompts {
			wire := wireName(c.config().WirePrefix(), name+"."+p.Name, p.Name, g.names)
			if _, taken := routes[wire]; taken {
				continue
			}
			routes[wire] = promptRoute{server: name, name: p.Name}
			orig := p.Name
			p.Name = wire
			prompts = append(prompts, server.ServerPrompt{Prompt: p, Handler: g.getPrompt(name, orig)})
			b, _ := json.Marshal(p)
			fp = append(fp, b...)
		}
	}
	if string(fp) == g.extrasFP {
		return
	}
	g.extrasFP = string(fp)
	g.promptRoutes.Store(&routes)
	g.front.SetResources(resources...)
	g.front.SetResourceTemplates(templates...)
	g.front.SetPrompts(prompts...)
}

// ownerConn is the live connection of the named child.
func (g *Gateway) ownerConn(server string) (*conn, error) {
	c := g.kids()[server]
	if c == nil {
		return nil, fmt.Errorf("no server %s", server)
	}
	cn, _ := c.current()
	if cn == nil {
		return nil, fmt.Errorf("server %s is not connected", server)
	}
	return cn, nil
}

func (g *Gateway) readResource(server string) server.ResourceHandlerFunc {
	return func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		cn, err := g.ownerConn(server)
		if err != nil {
			return nil, err
		}
		raw, err := cn.request(ctx, "resources/read", map[string]any{"uri": req.Params.URI})
		if err != nil {
			return nil, fmt.Errorf("reading %s from %s: %w", req.Params.URI, server, err)
		}
		raw = g.redact(raw)
		res, err := mcp.ParseReadResourceResult(&raw)
		if err != nil {
			return nil, fmt.Errorf("decoding %s from %s: %w", req.Params.URI, server, err)
		}
		return res.Contents, nil
	}
}

func (g *Gateway) getPrompt(server, name string) server.PromptHandlerFunc {
	return func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		cn, err := g.ownerConn(server)
		if err != nil {
			return nil, err
		}
		raw, err := cn.request(ctx, "prompts/get", map[string]any{"name": name, "arguments": req.Params.Arguments})
		if err != nil {
			return nil, fmt.Errorf("getting prompt %s from %s: %w", name, server, err)
		}
		raw = g.redact(raw)
		return mcp.ParseGetPromptResult(&raw)
	}
}

// completions forwards completion/complete to the child that owns the prompt or
// resource template.
type completions struct{ g *Gateway }

func (p completions) CompletePromptArgument(ctx context.Context, prompt string, arg mcp.CompleteArgument, cctx mcp.CompleteContext) (*mcp.Completion, error) {
	routes := p.g.promptRoutes.Load()
	if routes == nil {
		return &mcp.Completion{Values: []string{}}, nil
	}
	r, ok := (*routes)[prompt]
	if !ok {
		return nil, fmt.Errorf("unknown prompt %q", prompt)
	}
	return p.complete(ctx, r.server, map[string]any{"type": "ref/prompt", "name": r.name}, arg, cctx)
}

func (p completions) CompleteResourceArgument(ctx context.Context, uri string, arg mcp.CompleteArgument, cctx mcp.CompleteContext) (*mcp.Completion, error) {
	for name, c := range p.g.kids() {
		c.mu.Lock()
		ex := c.extras
		c.mu.Unlock()
		for _, t := range ex.templates {
			if t.URITemplate.Raw() == uri {
				return p.complete(ctx, name, map[string]any{"type": "ref/resource", "uri": uri}, arg, cctx)
			}
		}
	}
	return &mcp.Completion{Values: []string{}}, nil
}

func (p completions) complete(ctx context.Context, server string, ref map[string]any, arg mcp.CompleteArgument, cctx mcp.CompleteContext) (*mcp.Completion, error) {
	cn, err := p.g.ownerConn(server)
	if err != nil {
		return nil, err
	}
	raw, err := cn.request(ctx, "completion/complete", map[string]any{"ref": ref, "argument": arg, "context": cctx})
	if err != nil {
		return nil, fmt.Errorf("completion from %s: %w", server, err)
	}
	var res struct {
		Completion mcp.Completion `json:"completion"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("decoding a completion from %s: %w", server, err)
	}
	return &res.Completion, nil
}

// forwardSetLevel passes a client's logging/setLevel on to every child that logs.
func (g *Gateway) forwardSetLevel(ctx context.Context, _ any, req *mcp.SetLevelRequest, _ *mcp.EmptyResult) {
	for _, c := range g.kids() {
		cn, _ := c.current()
		if cn == nil || cn.caps.Logging == nil {
			continue
		}
		go func() {
			if _, err := cn.request(context.WithoutCancel(ctx), "logging/setLevel", map[string]any{"level": req.Params.Level}); err != nil {
				c.log.Warn("forwarding logging/setLevel failed", "err", err)
			}
		}()
	}
}
