package aggregation

import (
	"context"
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/upstream"
)

// extras are what a child offers beyond tools: resources, resource templates and
// prompts, kept as the raw JSON the child listed so no field is lost on the way to
// the client. A resource keeps its URI unless another server lists the same one
// (then each is namespaced, see uris.go); prompts are namespaced like tools.
type extras struct {
	// servesResources says the child declared the resources capability: with one such child,
	// a URI no listing names (a resource the child serves but does not list) is
	// still routed to it.
	servesResources bool
	resources       []resource
	templates       []resourceTemplate
	prompts         []prompt
	// listed is what the child listed, as it listed it: what a lazy server's
	// lists are kept on disk as (lifecycle.go).
	listed upstream.Listed
}

type resource struct {
	server, uri string
	raw         json.RawMessage
	// client is the URI clients are given, and listed the item as they are given
	// it: the child's own unless the manifest namespaced it.
	client string
	listed json.RawMessage
}

type resourceTemplate struct {
	server, pattern string // pattern is the URI template as written
	tmpl            *mcp.URITemplate
	raw             json.RawMessage
	// client and listed are as for resource; shared says another server lists the
	// same pattern.
	client string
	listed json.RawMessage
	shared bool
}

type prompt struct {
	server, name, wire string // the child's name and the name on the front wire
	raw                json.RawMessage
}

// listExtras lists a child's resources, templates and prompts
// (upstream.ListOthers).
func (c *child) listExtras(ctx context.Context, cn *conn) extras {
	return c.extrasFrom(cn.Caps.Resources != nil, upstream.ListOthers(ctx, cn.Request, cn.Caps, c.log))
}

// extrasFrom decodes what a child listed; an item the gateway cannot route is
// skipped.
func (c *child) extrasFrom(servesResources bool, l upstream.Listed) extras {
	ex := extras{servesResources: servesResources, listed: l}
	if ex.servesResources {
		for _, it := range l.Resources {
			var r struct {
				URI string `json:"uri"`
			}
			if json.Unmarshal(it, &r) == nil && r.URI != "" {
				ex.resources = append(ex.resources, resource{server: c.name, uri: r.URI, raw: it})
			}
		}
		for _, it := range l.Templates {
			var t struct {
				URITemplate string `json:"uriTemplate"`
			}
			if json.Unmarshal(it, &t) != nil || t.URITemplate == "" {
				continue
			}
			var parsed mcp.ResourceTemplate
			if err := json.Unmarshal(it, &parsed); err != nil || parsed.URITemplate == nil {
				c.log.Warn("skipping a resource template it cannot parse", "template", t.URITemplate)
				continue
			}
			ex.templates = append(ex.templates, resourceTemplate{server: c.name, pattern: t.URITemplate, tmpl: parsed.URITemplate, raw: it})
		}
	}
	if len(l.Prompts) > 0 {
		prefix := c.config().WirePrefix()
		for _, it := range l.Prompts {
			var fields map[string]json.RawMessage
			var name string
			if json.Unmarshal(it, &fields) != nil || json.Unmarshal(fields["name"], &name) != nil || name == "" {
				continue
			}
			wire := wireName(prefix, c.name+"."+name, name, c.names)
			fields["name"], _ = json.Marshal(wire)
			raw, err := json.Marshal(fields)
			if err != nil {
				continue
			}
			ex.prompts = append(ex.prompts, prompt{server: c.name, name: name, wire: wire, raw: raw})
		}
	}
	return ex
}
