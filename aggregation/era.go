package aggregation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/internal/jsonwalk"
)

// This file holds what tells the two protocol eras apart, and what a modern
// (2026-07-28) request carries and its answer must carry. A legacy client opens a
// session with initialize and is served as it always was; a request whose _meta
// names a modern protocol version is served on its own, statelessly (modern.go).

// modernVersions are the stateless protocol revisions the fronts speak, newest first.
var modernVersions = []string{"2026-07-28"}

// The _meta keys of the modern era.
const (
	metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	metaClientInfo      = "io.modelcontextprotocol/clientInfo"
	metaClientCaps      = "io.modelcontextprotocol/clientCapabilities"
	metaLogLevel        = "io.modelcontextprotocol/logLevel"
	metaServerInfo      = "io.modelcontextprotocol/serverInfo"
	metaSubscriptionID  = "io.modelcontextprotocol/subscriptionId"
)

// The error codes the modern era adds.
const (
	codeHeaderMismatch     = -32020
	codeMissingCapability  = -32021
	codeUnsupportedVersion = -32022
)

// allVersions is every revision Nexus speaks, modern first: what an
// UnsupportedProtocolVersionError and server/discover list.
func allVersions() []string { return append(slices.Clone(modernVersions), supportedVersions...) }

// legacyVersion reports a revision of the initialize era.
func legacyVersion(v string) bool { return slices.Contains(supportedVersions, v) }

// hopMetaKey reports a _meta key that describes one hop of the protocol (who is
// speaking, in which version, with which capabilities): the client's describe the
// hop to Nexus, a child's the hop from it, so neither passes through.
func hopMetaKey(k string) bool {
	switch k {
	case metaProtocolVersion, metaClientInfo, metaClientCaps, metaLogLevel, metaServerInfo, metaSubscriptionID:
		return true
	}
	return false
}

// clientMeta is what a modern request says of its client in params._meta.
type clientMeta struct {
	version    string
	hasVersion bool
	caps       json.RawMessage // the clientCapabilities object; nil when absent
	clientName string
	clientVer  string
	level      string
	hasLevel   bool
	// params are the request's params without the protocol fields, which describe
	// the hop to Nexus and go no further: what the method's step is given.
	params json.RawMessage
	// err is why the params could not be read.
	err error
}

// modern reports whether the _meta names a protocol version that is not one of the
// initialize era's. (One that names a legacy version is a legacy client's, and goes
// its session's way.)
func (m clientMeta) modern() bool { return m.version != "" && !legacyVersion(m.version) }

// mayBeModern reports whether params could carry a modern _meta, without decoding
// them: the common legacy request has no such key.
func mayBeModern(params json.RawMessage) bool {
	return bytes.Contains(params, []byte(metaProtocolVersion))
}

// readRequestMeta reads the protocol fields of a request's _meta, once for the whole
// request: the era's classification, the HTTP header checks and the request's own
// session all use what it read. params are those of a decoded message (valid
// JSON): their members are found by a walk, as encoding/json would read them into
// a map (FuzzReadRequestMeta), and the params are written again, without the
// protocol fields, only when they carried some.
func readRequestMeta(params json.RawMessage) clientMeta {
	m := clientMeta{params: params}
	if len(params) == 0 {
		return m
	}
	fields, err := jsonwalk.Members(params)
	if err != nil {
		m.err = errors.New("params must be an object")
		return m
	}
	var meta map[string]json.RawMessage
	if raw, ok := fields["_meta"]; ok && string(raw) != "null" {
		if meta, err = jsonwalk.Members(raw); err != nil {
			m.err = errors.New("_meta must be an object")
			return m
		}
	}
	m.read(meta)
	if m.err != nil {
		return m
	}
	n := len(meta)
	for k := range meta {
		if hopMetaKey(k) {
			delete(meta, k)
		}
	}
	if len(meta) != n {
		if len(meta) == 0 {
			delete(fields, "_meta")
		} else {
			fields["_meta"] = jsonwalk.Object(meta)
		}
		m.params = jsonwalk.Object(fields)
	}
	return m
}

// read takes the protocol fields out of a request's _meta.
func (m *clientMeta) read(meta map[string]json.RawMessage) {
	if raw, ok := meta[metaProtocolVersion]; ok {
		m.hasVersion = true
		if !readString(raw, &m.version) {
			m.err = fmt.Errorf("_meta[%q] must be a string", metaProtocolVersion)
			return
		}
	}
	if raw, ok := meta[metaClientCaps]; ok && len(raw) > 0 && raw[0] == '{' {
		m.caps = raw
	}
	if raw, ok := meta[metaClientInfo]; ok {
		var info struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		}
		_ = json.Unmarshal(raw, &info) // optional, and only a hint
		m.clientName, m.clientVer = info.Name, info.Version
	}
	if raw, ok := meta[metaLogLevel]; ok {
		m.hasLevel = true
		readString(raw, &m.level)
	}
}

// readString sets *s to the JSON string raw, one valid JSON value, as
// encoding/json would, and reports whether raw is a string (or null, which
// leaves *s alone).
func readString(raw json.RawMessage, s *string) bool {
	if len(raw) >= 2 && raw[0] == '"' && jsonwalk.PlainString(raw) {
		*s = string(raw[1 : len(raw)-1])
		return true
	}
	return json.Unmarshal(raw, s) == nil
}

// check is why a modern request's protocol fields cannot be served, or nil: a
// missing required field is invalid params; a version Nexus does not speak is an
// UnsupportedProtocolVersionError listing the ones it does.
func (m clientMeta) check() *RPCError {
	switch {
	case !m.hasVersion || m.version == "":
		return &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("a 2026-07-28 request must carry _meta[%q]", metaProtocolVersion)}
	case !slices.Contains(modernVersions, m.version):
		return unsupportedVersion(m.version)
	case m.caps == nil:
		return &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("a 2026-07-28 request must carry _meta[%q] (an object; {} declares none)", metaClientCaps)}
	case m.hasLevel:
		if _, ok := levelIndex(m.level); !ok {
			return &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown _meta[%q] %s: use one of %s", metaLogLevel, quoted(m.level), strings.Join(logLevels, ", "))}
		}
	}
	return nil
}

// unsupportedVersion is the error a request in a version Nexus does not speak gets.
func unsupportedVersion(requested string) *RPCError {
	return &RPCError{Code: codeUnsupportedVersion,
		Message: fmt.Sprintf("unsupported protocol version %s; Nexus speaks %s", quoted(requested), strings.Join(allVersions(), ", ")),
		Data:    map[string]any{"supported": allVersions(), "requested": requested}}
}

// capabilities are the client's declared capabilities as a session keeps them.
func (m clientMeta) capabilities() clientCaps {
	var c struct {
		Sampling    json.RawMessage            `json:"sampling"`
		Elicitation json.RawMessage            `json:"elicitation"`
		Roots       json.RawMessage            `json:"roots"`
		Extensions  map[string]json.RawMessage `json:"extensions"`
	}
	_ = json.Unmarshal(m.caps, &c)
	declared := func(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }
	caps := clientCaps{sampling: declared(c.Sampling), elicitation: declared(c.Elicitation), roots: declared(c.Roots),
		tasks: declared(c.Extensions[tasksExtension])}
	caps.declared = forwardedCaps(c.Sampling, c.Elicitation, c.Roots)
	return caps
}

// Result types of the modern era.
const (
	resultComplete      = "complete"
	resultInputRequired = "input_required"
	resultTask          = "task" // the tasks extension's CreateTaskResult (tasks_ext.go)
)

// resultTypeOf is a result's resultType; a result without one is complete.
func resultTypeOf(raw json.RawMessage) string {
	if !bytes.Contains(raw, []byte(`"resultType"`)) {
		return resultComplete
	}
	var r struct {
		ResultType string `json:"resultType"`
	}
	if json.Unmarshal(raw, &r) != nil || r.ResultType == "" {
		return resultComplete
	}
	return r.ResultType
}

// cacheable are the methods whose complete results carry caching hints.
var cacheable = map[string]bool{"server/discover": true, "tools/list": true, "prompts/list": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true}

// Cache scopes.
const (
	scopePublic  = "public"
	scopePrivate = "private"
)

// modernResult is a result as a modern client gets it: with its resultType, Nexus's
// serverInfo in _meta (a child's describes another hop), and, on the methods that
// are cacheable, ttlMs and cacheScope (a child's own kept, a private scope never
// widened). It is decoded once, at the top level only: the values keep their bytes.
func modernResult(method string, raw json.RawMessage, scope string) json.RawMessage {
	if out, ok := spliceModernFields(method, raw, scope); ok {
		return out
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || fields == nil {
		return raw
	}
	kind := resultComplete
	if rt, ok := fields["resultType"]; ok {
		_ = json.Unmarshal(rt, &kind)
	} else {
		fields["resultType"] = json.RawMessage(`"complete"`)
	}
	var meta map[string]json.RawMessage
	if m, ok := fields["_meta"]; ok {
		_ = json.Unmarshal(m, &meta)
	}
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	meta[metaServerInfo] = serverInfo
	fields["_meta"] = marshal(meta)
	if cacheable[method] && kind == resultComplete {
		if ttl, ok := fields["ttlMs"]; !ok || !nonNegativeInteger(ttl) {
			fields["ttlMs"] = json.RawMessage("0")
		}
		var own string
		_ = json.Unmarshal(fields["cacheScope"], &own)
		if own != scopePrivate && own != scopePublic || own == scopePublic && scope == scopePrivate {
			fields["cacheScope"] = marshal(scope)
		}
	}
	return marshal(fields)
}

// spliceModernFields is modernResult's common case without decoding: a result
// object in which none of the fields it sets appears anywhere gets them written at
// its front.
func spliceModernFields(method string, raw json.RawMessage, scope string) (json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '{' {
		return nil, false
	}
	for _, key := range []string{`"resultType"`, `"_meta"`, `"ttlMs"`, `"cacheScope"`} {
		if bytes.Contains(raw, []byte(key)) {
			return nil, false
		}
	}
	b := make([]byte, 0, len(raw)+128)
	b = append(b, `{"resultType":"complete","_meta":{"`+metaServerInfo+`":`...)
	b = append(b, serverInfo...)
	b = append(b, '}')
	if cacheable[method] {
		b = append(b, `,"ttlMs":0,"cacheScope":`...)
		b = jsonrpc.AppendString(b, scope)
	}
	rest := bytes.TrimSpace(raw[1:])
	if len(rest) > 0 && rest[0] != '}' {
		b = append(b, ',')
	}
	return append(b, rest...), true
}

// serverInfo is Nexus's Implementation, as results carry it.
var serverInfo = json.RawMessage(`{"name":"nexus","version":"` + Version + `"}`)

func nonNegativeInteger(raw json.RawMessage) bool {
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		return false
	}
	i, err := n.Int64()
	return err == nil && i >= 0
}
