package aggregation

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// JSON-RPC error codes the gateway answers with.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
	codeNotFound       = -32002 // MCP: resource not found
	codeCancelled      = -32800
)

// RPCError is a JSON-RPC error, from a child or from the gateway itself, kept with its
// code so that a client sees -32602 as -32602.
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("%s (code %d)", e.Message, e.Code) }

// message is any JSON-RPC message, from a client or to one. Params and results stay
// raw: the gateway reads only what it routes on, and passes the rest through as bytes.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

func (m *message) hasID() bool { return len(m.ID) > 0 && string(m.ID) != "null" }

// isRequest: a method and an id; isNotification: a method and no id; isResponse: an
// id and no method (the client answering a request the gateway forwarded).
func (m *message) isRequest() bool      { return m.Method != "" && m.hasID() }
func (m *message) isNotification() bool { return m.Method != "" && !m.hasID() }
func (m *message) isResponse() bool     { return m.Method == "" && m.hasID() }

// valid reports why a decoded message is not a JSON-RPC 2.0 message, or "".
func (m *message) invalid() string {
	switch {
	case m.JSONRPC != "2.0":
		return `"jsonrpc" must be "2.0"`
	case m.Method == "" && !m.hasID():
		return "a message needs a method (request or notification) or an id (response)"
	case m.hasID() && !validID(m.ID):
		return "an id must be a string or a number"
	}
	return ""
}

func validID(id json.RawMessage) bool {
	c := id[0]
	return c == '"' || c == '-' || c >= '0' && c <= '9'
}

// responseBytes encodes a response without re-encoding the result: the bytes a child
// sent are the bytes the client gets.
func responseBytes(id, result json.RawMessage, rpcErr *RPCError) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b := make([]byte, 0, len(result)+64)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	if rpcErr != nil {
		e, err := json.Marshal(rpcErr)
		if err != nil { // Data that cannot be encoded is dropped, never the error
			e, _ = json.Marshal(RPCError{Code: rpcErr.Code, Message: rpcErr.Message})
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

func errorBytes(id json.RawMessage, code int, format string, args ...any) []byte {
	return responseBytes(id, nil, &RPCError{Code: code, Message: fmt.Sprintf(format, args...)})
}

// notificationBytes encodes a notification; params is raw JSON or a value to encode.
func notificationBytes(method string, params any) []byte {
	b := []byte(`{"jsonrpc":"2.0","method":`)
	m, _ := json.Marshal(method)
	b = append(b, m...)
	if p := encodeParams(params); p != nil {
		b = append(b, `,"params":`...)
		b = append(b, p...)
	}
	return append(b, '}')
}

// requestBytes encodes a request the gateway sends a client.
func requestBytes(id string, method string, params any) []byte {
	b := []byte(`{"jsonrpc":"2.0","id":`)
	q, _ := json.Marshal(id)
	b = append(b, q...)
	m, _ := json.Marshal(method)
	b = append(b, `,"method":`...)
	b = append(b, m...)
	if p := encodeParams(params); p != nil {
		b = append(b, `,"params":`...)
		b = append(b, p...)
	}
	return append(b, '}')
}

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

// compact makes a message fit on one stdio line.
func compact(raw json.RawMessage) json.RawMessage {
	if bytes.IndexByte(raw, '\n') < 0 {
		return raw
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// idOf is a request id as a map key: its JSON text ("1" and 1 stay distinct). A
// decoded RawMessage holds the value's bytes without surrounding space.
func idOf(id json.RawMessage) string { return string(bytes.TrimSpace(id)) }

// appendJSONString appends s as a JSON string (Go's strconv quoting is not JSON for
// control characters).
func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}
