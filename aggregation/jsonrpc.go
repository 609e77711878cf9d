package aggregation

import "github.com/nexus-mcp/nexus/internal/jsonrpc"

// RPCError is a JSON-RPC error, from a child or from the gateway itself, kept with
// its code so that a client sees -32602 as -32602.
type RPCError = jsonrpc.Error

// codeNotFound is MCP's error for a resource that does not exist.
const codeNotFound = -32002
