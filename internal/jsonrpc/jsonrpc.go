// Package jsonrpc is the wire protocol under MCP as Nexus speaks it: messages
// whose params and results stay raw bytes, the error codes, encoders that copy
// those bytes instead of re-encoding them, and newline-delimited framing with a
// bound on one message. It knows nothing of MCP's methods: the gateway reads only
// what it routes on and passes the rest through as it came.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Error codes of JSON-RPC 2.0, and the one MCP adds for a cancelled request.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternal       = -32603
	CodeCancelled      = -32800
)

// Error is a JSON-RPC error, from a server or from the gateway itself, kept with its
// code so that a client sees -32602 as -32602.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("%s (code %d)", e.Message, e.Code) }

// Message is any JSON-RPC message. Params and results stay raw.
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// HasID reports an id that is not null.
func (m *Message) HasID() bool { return len(m.ID) > 0 && string(m.ID) != "null" }

// IsRequest: a method and an id; IsNotification: a method and no id; IsResponse:
// an id and no method.
func (m *Message) IsRequest() bool      { return m.Method != "" && m.HasID() }
func (m *Message) IsNotification() bool { return m.Method != "" && !m.HasID() }
func (m *Message) IsResponse() bool     { return m.Method == "" && m.HasID() }

// Invalid says why a decoded message is not a JSON-RPC 2.0 message, or "".
func (m *Message) Invalid() string {
	switch {
	case m.JSONRPC != "2.0":
		return `"jsonrpc" must be "2.0"`
	case m.Method == "" && !m.HasID():
		return "a message needs a method (request or notification) or an id (response)"
	case m.HasID() && !ValidID(m.ID):
		return "an id must be a string or a number"
	}
	return ""
}

// ValidID reports whether id, a JSON value, is a string or a number.
func ValidID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	c := id[0]
	return c == '"' || c == '-' || c >= '0' && c <= '9'
}

// Decode parses one message, or returns the error response it gets: -32700 for
// bytes that are not JSON, -32600 for JSON that is not a message. The response
// carries the message's id when one can be read, and never names a Go type.
// The message's raw parts are b's own bytes (see Unmarshal).
func Decode(b []byte) (*Message, []byte) {
	var m Message
	err := Unmarshal(b, &m)
	if err != nil {
		id := probeID(b)
		var typeErr *json.UnmarshalTypeError
		switch {
		case !errors.As(err, &typeErr):
			return nil, ErrorResponse(id, CodeParseError, "malformed JSON-RPC message: %v", err)
		case typeErr.Field == "":
			return nil, ErrorResponse(id, CodeInvalidRequest, "invalid request: a message is a JSON object, not a %s", typeErr.Value)
		default:
			return nil, ErrorResponse(id, CodeInvalidRequest, "invalid request: %q cannot be a %s", typeErr.Field, typeErr.Value)
		}
	}
	if why := m.Invalid(); why != "" {
		id := m.ID
		if len(id) > 0 && !ValidID(id) {
			id = nil
		}
		return nil, ErrorResponse(id, CodeInvalidRequest, "invalid request: %s", why)
	}
	return &m, nil
}

// probeID is the id of a message Decode refused, when it has a usable one.
func probeID(b []byte) json.RawMessage {
	var probe struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(b, &probe)
	if !ValidID(probe.ID) {
		return nil
	}
	return probe.ID
}

// Response encodes a response without re-encoding the result: the bytes a server
// sent are the bytes the client gets. A nil id is written null.
func Response(id, result json.RawMessage, rpcErr *Error) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	// Sized for the whole answer: a list of many servers' tools is megabytes,
	// and growing the buffer by one byte too few would copy it all.
	const head, tail = `{"jsonrpc":"2.0","id":`, `,"result":}`
	b := make([]byte, 0, len(head)+len(id)+len(tail)+len(result))
	b = append(b, head...)
	b = append(b, id...)
	if rpcErr != nil {
		e, err := json.Marshal(rpcErr)
		if err != nil { // Data that cannot be encoded is dropped, never the error
			e, _ = json.Marshal(Error{Code: rpcErr.Code, Message: rpcErr.Message})
		}
		b = append(b, `,"error":`...)
		b = append(b, e...)
	} else {
		if len(result) == 0 {
			result = json.RawMessage("{}")
		}
		b = append(b, `,"result":`...)
		b = append(b, result...)
	}
	return append(b, '}')
}

// ErrorResponse is the error response to id with a formatted message.
func ErrorResponse(id json.RawMessage, code int, format string, args ...any) []byte {
	return Response(id, nil, &Error{Code: code, Message: fmt.Sprintf(format, args...)})
}

// Notification encodes a notification; params is raw JSON or a value to encode.
func Notification(method string, params any) []byte {
	b := []byte(`{"jsonrpc":"2.0","method":`)
	b = AppendString(b, method)
	if p := encodeParams(params); p != nil {
		b = append(b, `,"params":`...)
		b = append(b, p...)
	}
	return append(b, '}')
}

// Request encodes a request; id is its JSON text (a quoted string or a number)
// and params raw JSON or a value to encode.
func Request(id json.RawMessage, method string, params any) []byte {
	p := encodeParams(params)
	b := make([]byte, 0, len(p)+len(method)+len(id)+48)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"method":`...)
	b = AppendString(b, method)
	if p != nil {
		b = append(b, `,"params":`...)
		b = append(b, Compact(p)...)
	}
	return append(b, '}')
}

// StringID is the JSON text of a string id.
func StringID(id string) json.RawMessage { return AppendString(nil, id) }

func encodeParams(params any) []byte {
	switch p := params.(type) {
	case nil:
		return nil
	case json.RawMessage:
		if len(p) == 0 {
			return nil
		}
		return p
	case []byte:
		return p
	}
	b, err := json.Marshal(params)
	if err != nil {
		return nil
	}
	return b
}

// Compact makes a message fit on one line: pretty-printed JSON is compacted, and
// anything else is returned as it is. A carriage return counts as a line's end
// too: readers that take every newline convention (Python's) split on it.
func Compact(raw json.RawMessage) json.RawMessage {
	if !bytes.ContainsAny(raw, "\r\n") {
		return raw
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// IDKey is a request id as a map key: its JSON text ("1" and 1 stay distinct). A
// decoded RawMessage holds the value's bytes without surrounding space.
func IDKey(id json.RawMessage) string { return string(bytes.TrimSpace(id)) }

// AppendString appends s as a JSON string (Go's strconv quoting is not JSON for
// control characters). Plain ASCII is copied without the encoder.
func AppendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
