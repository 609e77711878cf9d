package aggregation

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/internal/jsonwalk"
	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/policy"
)

// naming is how tools are named on the front wire: the style (config.ToolNames*)
// and the longest name (names.maxLength; Claude Desktop, Cursor and Codex accept
// 64, but a client that prefixes names or caps lower needs less).
type naming struct {
	style string
	max   int
}

// bound is the longest wire name.
func (n naming) bound() int {
	if n.max > 0 {
		return n.max
	}
	return config.DefaultMaxNameLength
}

// Tool is one child tool as the gateway exposes it.
type Tool struct {
	Server    string // the server's name in config
	Name      string // the child's own name for the tool: what it is called by
	Canonical string // "<server>.<tool>" (the tool an override's name): what users write in config, policy and the CLI
	Wire      string // the name on the front wire
	Hints     Hints  // effective annotations, after the operator's overrides
	// Raw is the tool object exactly as the child listed it.
	Raw json.RawMessage
	// InputSchema is the child's input schema, verbatim.
	InputSchema json.RawMessage
	// paramHeaders are the arguments the schema mirrors into Mcp-Param headers
	// (params.go), found once when the tool is listed.
	paramHeaders []headerParam

	front  mcp.Tool        // what tools/list serves
	listed json.RawMessage // front, encoded once
}

// Hints are a tool's effective behaviour annotations.
type Hints struct {
	Annotated   bool // the child or the operator said anything at all
	ReadOnly    bool
	Destructive bool // only when said explicitly: the spec's default applies to non-read-only tools
	Idempotent  bool
	OpenWorld   bool
}

func (t *Tool) policyTool() policy.Tool {
	return policy.Tool{Name: t.Canonical, ReadOnly: t.Hints.ReadOnly, Destructive: t.Hints.Destructive}
}

// MemoryTool is what memory knows of t: its names and effective annotations.
func (t *Tool) MemoryTool() memory.Tool {
	return memory.Tool{Name: t.Canonical, Server: t.Server, Annotated: t.Hints.Annotated,
		ReadOnly: t.Hints.ReadOnly, Idempotent: t.Hints.Idempotent, Destructive: t.Hints.Destructive,
		InputSchema: t.InputSchema}
}

// Exposed is the tool's name as users write it after "<server>.": the child's,
// or the one an override gave it (servers.NAME.tools).
func (t *Tool) Exposed() string { return strings.TrimPrefix(t.Canonical, t.Server+".") }

// Description is the first line of the tool's description.
func (t *Tool) Description() string {
	d, _, _ := strings.Cut(t.front.Description, "\n")
	return strings.TrimSpace(d)
}

// rawTool is the part of a child's tool object the gateway reads.
type rawTool struct {
	Name         string              `json:"name"`
	Title        string              `json:"title,omitempty"`
	Description  string              `json:"description,omitempty"`
	InputSchema  json.RawMessage     `json:"inputSchema"`
	OutputSchema json.RawMessage     `json:"outputSchema,omitempty"`
	Annotations  *mcp.ToolAnnotation `json:"annotations,omitempty"`
	Meta         *mcp.Meta           `json:"_meta,omitempty"`
	Icons        []mcp.Icon          `json:"icons,omitempty"`
	Execution    *mcp.ToolExecution  `json:"execution,omitempty"`
}

// newTool builds the gateway's view of one child tool. Schemas are kept as raw JSON:
// decoding them into mcp-go's structs would drop keywords such as anyOf or $schema.
//
// An operator's override (servers.NAME.tools) renames the tool everywhere but
// towards the child, and rewrites its title and description, before anything
// is derived from them.
func newTool(srv *config.Server, raw json.RawMessage, names naming) (*Tool, error) {
	var rt rawTool
	if err := json.Unmarshal(raw, &rt); err != nil {
		return nil, fmt.Errorf("decoding a tool of %s: %w", srv.Name, err)
	}
	if rt.Name == "" {
		return nil, fmt.Errorf("server %s listed a tool without a name", srv.Name)
	}
	if !policy.ValidToolName(rt.Name) {
		return nil, &unsafeNameError{name: rt.Name, server: srv.Name}
	}
	if len(rt.InputSchema) == 0 || string(rt.InputSchema) == "null" {
		rt.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	exposed := rt.Name
	if o, ok := srv.Tools[rt.Name]; ok {
		if o.Name != "" {
			exposed = o.Name
		}
		if o.Title != "" {
			rt.Title = o.Title
		}
		if o.Description != "" {
			rt.Description = o.Description
		}
	}
	t := &Tool{Server: srv.Name, Name: rt.Name, Canonical: srv.Name + "." + exposed, Raw: raw, InputSchema: rt.InputSchema,
		paramHeaders: headerParams(rt.InputSchema)}
	t.Wire = wireName(srv.WirePrefix(), t.Canonical, exposed, names)

	ann := mcp.ToolAnnotation{}
	if rt.Annotations != nil {
		ann = *rt.Annotations
		t.Hints.Annotated = true
	}
	opDestructive := false // the operator set destructiveHint for this tool
	if o, ok := srv.Annotations[rt.Name]; ok {
		t.Hints.Annotated = true
		opDestructive = o.DestructiveHint != nil
		override := func(dst **bool, v *bool) {
			if v != nil {
				b := *v
				*dst = &b
			}
		}
		override(&ann.ReadOnlyHint, o.ReadOnlyHint)
		override(&ann.DestructiveHint, o.DestructiveHint)
		override(&ann.IdempotentHint, o.IdempotentHint)
		override(&ann.OpenWorldHint, o.OpenWorldHint)
	}
	isTrue := func(b *bool) bool { return b != nil && *b }
	t.Hints.ReadOnly = isTrue(ann.ReadOnlyHint)
	// The spec gives destructiveHint meaning only when readOnlyHint is false,
	// and mcp-go's NewTool sets it true by default: a read-only tool is not
	// destructive, unless the operator says so.
	t.Hints.Destructive = isTrue(ann.DestructiveHint) && (!t.Hints.ReadOnly || opDestructive)
	t.Hints.Idempotent = isTrue(ann.IdempotentHint)
	t.Hints.OpenWorld = isTrue(ann.OpenWorldHint)

	t.front = mcp.Tool{
		Meta: rt.Meta, Name: t.Wire, Title: rt.Title, Description: rt.Description,
		RawInputSchema: rt.InputSchema, Annotations: ann, Icons: rt.Icons, Execution: rt.Execution,
	}
	if len(rt.OutputSchema) > 0 && string(rt.OutputSchema) != "null" {
		t.front.RawOutputSchema = rt.OutputSchema
	}
	// Validating re-encodes the schema: a tool without the annotation (most) is
	// spared it, which a gateway with many servers feels at every start.
	if bytes.Contains(rt.InputSchema, []byte("x-mcp-header")) {
		if err := mcp.ValidateParamHeaderAnnotations(&t.front); err != nil {
			return nil, fmt.Errorf("tool %s has invalid x-mcp-header annotations: %w", t.Canonical, err)
		}
	}
	var overridden *mcp.ToolAnnotation
	if _, ok := srv.Annotations[rt.Name]; ok {
		overridden = &ann
	}
	listed, err := listedTool(raw, t.Wire, rt.InputSchema, overridden, srv.Tools[rt.Name])
	if err != nil {
		return nil, fmt.Errorf("encoding tool %s: %w", t.Canonical, err)
	}
	t.listed = listed
	return t, nil
}

// listedTool is the child's own tool object as a client is given it: every field
// the child wrote, under its wire name, with the operator's annotations, title and
// description where the config overrides them. Re-encoding mcp-go's struct instead would add fields the
// child never sent (an empty "annotations") and drop those mcp-go does not know.
//
// raw must be a JSON object that encoding/json decoded already (newTool did):
// its members are found by a walk that does not validate it again.
func listedTool(raw json.RawMessage, wire string, schema json.RawMessage, annotations *mcp.ToolAnnotation, rewrite config.ToolOverride) (json.RawMessage, error) {
	fields, err := jsonwalk.Members(raw)
	if err != nil {
		return nil, err
	}
	fields["name"] = marshal(wire)
	fields["inputSchema"] = schema
	if annotations != nil {
		fields["annotations"] = marshal(annotations)
	}
	if rewrite.Title != "" {
		fields["title"] = marshal(rewrite.Title)
	}
	if rewrite.Description != "" {
		fields["description"] = marshal(rewrite.Description)
	}
	out := jsonwalk.Object(fields)
	if out == nil {
		return nil, errors.New("the tool does not encode as JSON")
	}
	return out, nil
}

// wireName is the name a tool goes by on the front wire. Clients reject names outside
// ^[a-zA-Z0-9_-]{1,64}$ (and one bad name hides every tool of the connector), so the
// default style joins prefix and tool with "__", replaces other characters, and
// shortens long names with a hash of the canonical name: stable across restarts and
// distinct for distinct tools.
func wireName(prefix, canonical, tool string, n naming) string {
	maxWireName := n.bound()
	sep, dotOK := "__", false
	if n.style == config.ToolNamesDotted {
		sep, dotOK = ".", true
	}
	name := tool
	if prefix != "" {
		name = prefix + sep + tool
	}
	clean := strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || r == '.' && dotOK || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, name)
	if clean == name && len(name) <= maxWireName {
		return name
	}
	sum := sha256.Sum256([]byte(canonical))
	suffix := "_" + hex.EncodeToString(sum[:4])
	if len(clean) > maxWireName-len(suffix) {
		clean = clean[:maxWireName-len(suffix)]
	}
	return clean + suffix
}
