package memory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Results travel through memory as the raw JSON the child sent, never as
// decoded mcp-go values: a content type or field that mcp-go does not know
// must reach the client unchanged, and a call that memory does not cache
// should not pay for a decode and re-encode. Memory reads only the few
// members it needs (isError, resultType, inputRequests, _meta) and edits
// only _meta.

// errNotObject reports a result that is not a JSON object, so it has no
// _meta to carry a cache report.
var errNotObject = errors.New("result is not a JSON object")

// withMeta returns a copy of result whose _meta object has key set to value
// (marshalled as JSON), replacing any value key had. Every other member of
// result and of _meta keeps its value bytes (compacted, not re-escaped);
// member order is not kept. result is not modified.
//
// A result that is not a JSON object, or whose _meta is neither an object
// nor null, is an error, and result is returned unchanged with it so that
// callers can pass it on as the child sent it.
func withMeta(result json.RawMessage, key string, value any) (json.RawMessage, error) {
	v, err := marshalVerbatim(value)
	if err != nil {
		return result, fmt.Errorf("_meta %q: %w", key, err)
	}
	return editMeta(result, func(meta map[string]json.RawMessage) { meta[key] = v })
}

// withoutMeta returns a copy of result without _meta[key]. It is for results
// that arrive already carrying a cache report (a child that is itself a
// Nexus gateway): that report describes the child's cache, not this one, and
// must not be stored.
func withoutMeta(result json.RawMessage, key string) (json.RawMessage, error) {
	return editMeta(result, func(meta map[string]json.RawMessage) { delete(meta, key) })
}

// editMeta splits the JSON object result into its members, lets edit change
// the members of its _meta object, and joins them again. Member values are
// kept as raw bytes throughout, so nothing memory does not edit is decoded.
// A result without _meta gains one only if edit leaves it non-empty.
func editMeta(result json.RawMessage, edit func(meta map[string]json.RawMessage)) (json.RawMessage, error) {
	if !isObject(result) {
		return result, errNotObject
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(result, &members); err != nil {
		return result, fmt.Errorf("result: %w", err)
	}
	var meta map[string]json.RawMessage
	raw, had := members["_meta"]
	if had {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return result, fmt.Errorf("result _meta: %w", err)
		}
	}
	if meta == nil {
		meta = make(map[string]json.RawMessage, 1)
	}
	edit(meta)
	if !had && len(meta) == 0 {
		return result, nil
	}
	var err error
	if members["_meta"], err = marshalVerbatim(meta); err != nil {
		return result, fmt.Errorf("result _meta: %w", err)
	}
	out, err := marshalVerbatim(members)
	if err != nil {
		return result, fmt.Errorf("result: %w", err)
	}
	return out, nil
}

// marshalVerbatim is json.Marshal without HTML escaping, so that raw values
// ("<", "&", U+2028 in a child's text) come out byte for byte as they went
// in, only compacted.
func marshalVerbatim(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// isObject reports whether raw starts like a JSON object. It does not
// validate the rest.
func isObject(raw []byte) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

// resultShape is what memory reads of a CallToolResult to decide whether to
// store it.
type resultShape struct {
	IsError       bool
	ResultType    string
	InputRequests json.RawMessage
	RequestState  json.RawMessage
	Meta          map[string]json.RawMessage
}

// shapeMembers are the members memory relies on, spelled as the spec
// spells them. encoding/json matches member names case-insensitively and
// lets the last duplicate win, so a child could send {"isError": true,
// "ISERROR": false}: the client may read one, memory the other. readShape
// reads these members exactly, and refuses a result that spells one of
// them twice or in another case.
var shapeMembers = [...]string{"isError", "resultType", "inputRequests", "requestState", "_meta"}

// errAmbiguous reports a result memory must not trust: one of
// shapeMembers repeated, or spelled in another case.
var errAmbiguous = errors.New("result spells a member memory reads twice or in another case")

// readShape decodes the members of result memory needs. It fails for
// anything that is not a JSON object with members of the expected types,
// or whose members are ambiguous (errAmbiguous), which memory then neither
// stores nor trusts to report failure.
func readShape(result json.RawMessage) (resultShape, error) {
	var s resultShape
	if !isObject(result) {
		return s, errNotObject
	}
	dec := json.NewDecoder(bytes.NewReader(result))
	if _, err := dec.Token(); err != nil { // {
		return s, fmt.Errorf("result: %w", err)
	}
	var seen [len(shapeMembers)]bool
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return s, fmt.Errorf("result: %w", err)
		}
		name, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return s, fmt.Errorf("result member %q: %w", name, err)
		}
		for i, want := range shapeMembers {
			if !strings.EqualFold(name, want) {
				continue
			}
			if name != want || seen[i] {
				return s, fmt.Errorf("%w: %q", errAmbiguous, name)
			}
			seen[i] = true
			if err := s.set(want, value); err != nil {
				return s, err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // }
		return s, fmt.Errorf("result: %w", err)
	}
	if dec.More() {
		return s, errors.New("result: data after the object")
	}
	return s, nil
}

// set decodes one member of shapeMembers; null is its absence.
func (s *resultShape) set(name string, value json.RawMessage) error {
	if string(value) == "null" {
		return nil
	}
	var err error
	switch name {
	case "isError":
		err = json.Unmarshal(value, &s.IsError)
	case "resultType":
		err = json.Unmarshal(value, &s.ResultType)
	case "inputRequests":
		s.InputRequests = value
	case "requestState":
		s.RequestState = value
	case "_meta":
		err = json.Unmarshal(value, &s.Meta)
	}
	if err != nil {
		return fmt.Errorf("result member %q: %w", name, err)
	}
	return nil
}

// complete reports a final answer that holds no per-caller state: not one
// that asks the client for more input first (MCP's multi-round-trip
// results) nor one carrying the state of such an exchange, which would be
// wrong to replay to anyone.
func (s resultShape) complete() bool {
	return (s.ResultType == "" || s.ResultType == "complete") && len(s.InputRequests) == 0 && len(s.RequestState) == 0
}

// cacheReport is the JSON of the value memory sets at _meta[MetaKey]. It is
// written by hand: it is on every call's path and has one fixed shape.
func cacheReport(status string, ageMS int64, coalesced bool) json.RawMessage {
	b := make([]byte, 0, 64)
	b = append(b, `{"status":`...)
	b = strconv.AppendQuote(b, status)
	if status == StatusHit {
		b = append(b, `,"age_ms":`...)
		b = strconv.AppendInt(b, ageMS, 10)
	}
	if coalesced {
		b = append(b, `,"coalesced":true`...)
	}
	return append(b, '}')
}

// semanticReport is the cache report of a similarity hit.
func semanticReport(h *semHit, ageMS int64, coalesced bool) json.RawMessage {
	b := make([]byte, 0, 96+len(h.matched))
	b = append(b, `{"status":"`+StatusSemanticHit+`","similarity":`...)
	b = strconv.AppendFloat(b, math.Round(h.similarity*10000)/10000, 'f', -1, 64)
	b = append(b, `,"matched":`...)
	m, err := marshalVerbatim(h.matched)
	if err != nil {
		m = json.RawMessage(`""`)
	}
	b = append(b, m...)
	b = append(b, `,"age_ms":`...)
	b = strconv.AppendInt(b, ageMS, 10)
	if h.verified {
		b = append(b, `,"verified":true`...)
	}
	if h.rewrites != nil {
		b = append(b, `,"rewrites":`...)
		r, err := marshalVerbatim(h.rewrites)
		if err != nil {
			r = json.RawMessage(`[]`)
		}
		b = append(b, r...)
	}
	if coalesced {
		b = append(b, `,"coalesced":true`...)
	}
	return append(b, '}')
}

// CacheStatus reads the cache report memory put on a raw CallToolResult:
// status and, for hits, age in milliseconds. ok is false if raw carries
// none (or is not a result at all).
func CacheStatus(raw json.RawMessage) (status string, ageMS int64, ok bool) {
	var r struct {
		Meta struct {
			Cache *struct {
				Status *string      `json:"status"`
				AgeMS  *json.Number `json:"age_ms"`
			} `json:"nexus/cache"`
		} `json:"_meta"`
	}
	if !isObject(raw) || json.Unmarshal(raw, &r) != nil {
		return "", 0, false
	}
	c := r.Meta.Cache
	if c == nil || c.Status == nil {
		return "", 0, false
	}
	if c.AgeMS != nil {
		if n, err := c.AgeMS.Int64(); err == nil {
			ageMS = n
		} else if f, err := c.AgeMS.Float64(); err == nil {
			ageMS = int64(f)
		}
	}
	return *c.Status, ageMS, true
}

// metaTemplate is a stored result with the place of its cache report cut
// out: a hit from the hot layer is prefix + report + suffix, the bytes
// withMeta would produce, without decoding the result on every hit.
type metaTemplate struct {
	prefix, suffix []byte
}

// metaSlot stands for the report while the template is made; the result
// itself may not contain it (then there is no template).
const metaSlot = `"\u0000nexus-cache-report-slot\u0000"`

// newMetaTemplate returns the template of result, or nil if it has none.
func newMetaTemplate(result []byte) *metaTemplate {
	out, err := withMeta(result, MetaKey, json.RawMessage(metaSlot))
	if err != nil {
		return nil
	}
	slot := []byte(`"\u0000nexus-cache-report-slot\u0000"`)
	i := bytes.Index(out, slot)
	if i < 0 || bytes.Count(out, slot) != 1 {
		return nil
	}
	return &metaTemplate{prefix: out[:i:i], suffix: out[i+len(slot):]}
}

// fill returns the result with report in its place.
func (t *metaTemplate) fill(report []byte) json.RawMessage {
	out := make([]byte, 0, len(t.prefix)+len(report)+len(t.suffix))
	out = append(out, t.prefix...)
	out = append(out, report...)
	return append(out, t.suffix...)
}
