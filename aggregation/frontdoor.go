package aggregation

import (
	"context"
	"encoding/json"
	"fmt"
)

// incoming is the part of a JSON-RPC message the front door reads.
type incoming struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// isCall reports whether msg is a tools/call request the front door serves itself.
func (m *incoming) isCall() bool {
	return m.Method == "tools/call" && m.JSONRPC == "2.0" && len(m.ID) > 0 && string(m.ID) != "null"
}

// serveCall runs one tools/call through the chain and returns the response line.
func (g *Gateway) serveCall(ctx context.Context, session, agent string, msg *incoming, notify notifyFunc) []byte {
	var p callParams
	if err := json.Unmarshal(msg.Params, &p); err != nil {
		return responseLine(msg.ID, nil, &RPCError{Code: codeInvalidParams,
			Message: fmt.Sprintf(`tools/call params must be {"name": "<tool>", "arguments": {...}}: %v`, err)})
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer g.inflight.add(session, msg.ID, cancel)()
	raw, rpcErr := g.callTool(ctx, agent, p, notify)
	return responseLine(msg.ID, raw, rpcErr)
}

// responseLine encodes a JSON-RPC response without re-encoding the result: the bytes
// the child sent are the bytes the client gets.
func responseLine(id, result json.RawMessage, rpcErr *RPCError) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b := make([]byte, 0, len(result)+64)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	if rpcErr != nil {
		e, _ := json.Marshal(rpcErr)
		b = append(b, `,"error":`...)
		b = append(b, e...)
	} else {
		b = append(b, `,"result":`...)
		b = append(b, result...)
	}
	return append(b, '}')
}

func notificationLine(method string, params map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	return b
}

// Call runs one tools/call through the chain, as a client's call would: for `nexus
// call` and for embedding. name is a wire or canonical name. The error, when the call
// did not produce a result, is an *RPCError.
func (g *Gateway) Call(ctx context.Context, agent, name string, args json.RawMessage) (json.RawMessage, error) {
	raw, rpcErr := g.callTool(ctx, agent, callParams{Name: name, Arguments: args}, nil)
	if rpcErr != nil {
		return nil, rpcErr
	}
	return raw, nil
}

// Resolve finds the tool a client's name refers to (wire or canonical, exactly); an
// unknown name gives the same *RPCError a call would, with the closest names.
func (g *Gateway) Resolve(name string) (*Tool, error) {
	if t := g.man.Load().lookup(name); t != nil {
		return t, nil
	}
	return nil, g.unknownTool(name)
}
