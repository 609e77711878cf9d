package samples

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// errInvalidParams marks arguments that do not satisfy a tool's input schema.
var errInvalidParams = errors.New("invalid params")

// checkArgs applies the input schema strictly: the arguments must be one JSON
// object whose keys are exactly declared properties (Go's decoder alone would
// accept "Limit" for "limit"), with no null, the declared JSON type, the enum,
// the bounds, and every required property present.
func checkArgs(in inputSpec, raw json.RawMessage) error {
	fields := map[string]json.RawMessage{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&fields); err != nil {
		return fmt.Errorf("%w: arguments must be a JSON object: %v", errInvalidParams, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: trailing data after the arguments object", errInvalidParams)
	}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		p, ok := in.Props[name]
		if !ok {
			return fmt.Errorf("%w: unknown field %q", errInvalidParams, name)
		}
		if err := checkValue(p, fields[name]); err != nil {
			return fmt.Errorf("%w: field %q: %v", errInvalidParams, name, err)
		}
	}
	for _, name := range in.Required {
		if _, ok := fields[name]; !ok {
			return fmt.Errorf("%w: missing required field %q", errInvalidParams, name)
		}
	}
	return nil
}

// checkValue checks one property value against its declaration.
func checkValue(p prop, raw json.RawMessage) error {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return errors.New("must not be null")
	}
	switch p.Type {
	case "string":
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return errors.New("must be a string")
		}
		if len(p.Enum) > 0 && !slices.Contains(p.Enum, s) {
			return fmt.Errorf("must be one of %v", p.Enum)
		}
		if p.MaxLength > 0 && utf8.RuneCountInString(s) > p.MaxLength {
			return fmt.Errorf("longer than %d characters", p.MaxLength)
		}
	case "integer":
		// json.Number also accepts a quoted number ("5"): a string is not an integer.
		if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '"' {
			return errors.New("must be an integer, not a string")
		}
		var n json.Number
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&n); err != nil {
			return errors.New("must be an integer")
		}
		i, err := n.Int64()
		if err != nil {
			return errors.New("must be an integer")
		}
		if i < int64(p.Min) || i > int64(p.Max) {
			return fmt.Errorf("must be between %d and %d", p.Min, p.Max)
		}
	case "boolean":
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil {
			return errors.New("must be a boolean")
		}
	case "array":
		var items []string
		if err := json.Unmarshal(raw, &items); err != nil {
			return errors.New("must be an array of strings")
		}
		if p.MaxItems > 0 && len(items) > p.MaxItems {
			return fmt.Errorf("more than %d items", p.MaxItems)
		}
	}
	return nil
}

// decodeArgs checks raw against the spec, then decodes it into dst with
// unknown fields disallowed (a second, independent guard).
func decodeArgs(in inputSpec, raw json.RawMessage, dst any) error {
	if err := checkArgs(in, raw); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return fmt.Errorf("%w: %v", errInvalidParams, err)
	}
	return nil
}

// rawArguments returns the arguments of a call as sent on the wire; absent
// or null arguments are the empty object.
func rawArguments(req *mcp.CallToolRequest) json.RawMessage {
	raw := req.Params.RawArguments
	if len(raw) == 0 && req.Params.Arguments != nil {
		b, err := json.Marshal(req.Params.Arguments)
		if err == nil {
			raw = b
		}
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return json.RawMessage("{}")
	}
	return raw
}

// answer is what a tool computed: an object with a "status" that becomes
// both structuredContent and, compacted, the text content. isError marks
// answers that did not do what was asked (refusals, invalid scopes,
// unknown ids) so that clients and the gateway do not take them for success.
type answer struct {
	body    map[string]any
	isError bool
}

func ok(body map[string]any) answer {
	if _, has := body["status"]; !has {
		body["status"] = "ok"
	}
	return answer{body: body}
}

func failure(status, reason string, extra map[string]any) answer {
	body := map[string]any{"status": status, "reason": reason}
	for k, v := range extra {
		body[k] = v
	}
	return answer{body: body, isError: true}
}

func (a answer) result() (*mcp.CallToolResult, error) {
	text, err := json.Marshal(a.body)
	if err != nil {
		return nil, fmt.Errorf("encode answer: %w", err)
	}
	text = redact(text)
	return &mcp.CallToolResult{
		Content:           []mcp.Content{mcp.TextContent{Type: mcp.ContentTypeText, Text: string(text)}},
		StructuredContent: json.RawMessage(text),
		IsError:           a.isError,
	}, nil
}

// toolMeta is the declaration of one tool.
type toolMeta struct {
	name, title, description string
	readOnly                 bool
	in                       inputSpec
	out                      json.RawMessage
}

// registry builds one sample server: it registers tools and owns the hook
// that logs calls and rejects invalid arguments.
//
// mcp-go v1.2.1 turns any error returned by a tool handler into -32603
// (server/handler_errors.go), and offers no way for a handler to choose
// -32602. The only tools/call path that answers -32602 is an unknown tool
// name (server.go, handleToolCall). The before-call hook receives the
// request by pointer before that lookup, so it validates the arguments
// there and, when they are invalid, renames the call to a name no tool has,
// carrying the reason: the client gets -32602 and the handler never runs.
// That message reads badly ("tool 'x rejected (...)' not found"), so the
// transports Serve runs answer invalid calls first, cleanly (frontdoor.go);
// the rename only serves callers of New that bypass them (in-process tests).
type registry struct {
	s      *server.MCPServer
	checks map[string]inputSpec // written only while building, read-only after
	log    *callLog
}

func newRegistry(name, version, instructions string, log io.Writer) *registry {
	r := &registry{checks: map[string]inputSpec{}, log: &callLog{w: log}}
	hooks := &server.Hooks{}
	hooks.AddBeforeCallTool(r.beforeCall)
	r.s = server.NewMCPServer(name, version,
		server.WithToolCapabilities(false),
		server.WithInstructions(instructions),
		server.WithHooks(hooks),
	)
	return r
}

func (r *registry) beforeCall(_ context.Context, _ any, req *mcp.CallToolRequest) {
	name := req.Params.Name
	r.log.record(name)
	in, known := r.checks[name]
	if !known {
		return
	}
	if err := checkArgs(in, rawArguments(req)); err != nil {
		req.Params.Name = fmt.Sprintf("%s rejected (%v)", name, err)
	}
}

// register adds one tool whose arguments decode into A.
func register[A any](r *registry, m toolMeta, run func(context.Context, *A) answer) {
	readOnly, destructive, idempotent, openWorld := m.readOnly, false, m.readOnly, false
	tool := mcp.Tool{
		Name:            m.name,
		Description:     m.description,
		RawInputSchema:  m.in.schema(),
		RawOutputSchema: m.out,
		Annotations: mcp.ToolAnnotation{
			Title:           m.title,
			ReadOnlyHint:    &readOnly,
			DestructiveHint: &destructive,
			IdempotentHint:  &idempotent,
			OpenWorldHint:   &openWorld,
		},
	}
	r.checks[m.name] = m.in
	r.s.AddTool(tool, func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args A
		if err := decodeArgs(m.in, rawArguments(&req), &args); err != nil {
			// Unreachable behind the hook; kept so a handler never works on
			// unchecked input.
			return nil, fmt.Errorf("%s: %w", m.name, err)
		}
		return run(ctx, &args).result()
	})
}

// callLog writes one "<tool>\n" line per tools/call, in a single Write so
// that lines from concurrent calls (and processes, with O_APPEND) never mix.
type callLog struct {
	mu sync.Mutex
	w  io.Writer
}

func (c *callLog) record(tool string) {
	if c.w == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = io.WriteString(c.w, tool+"\n")
}
