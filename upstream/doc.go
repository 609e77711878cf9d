// Package upstream holds how Nexus reaches its child servers and keeps them.
//
//   - Reaching one: the Dialer makes a configured server's Transport (its
//     environment, secrets resolved, its HTTP client). A Transport speaks
//     Nexus's own JSON-RPC vocabulary (internal/jsonrpc): the stdio Process is
//     Nexus's own; mcp-go's remote transports are adapted to it.
//   - A connection (Conn): its end, its requests and what their failures say
//     (Request, BrokenError, ErrSessionLost), the requests under way, how it
//     speaks its server's protocol era (Dialect), the notifications an answer
//     waits for (Backlog), a remote one's health check (Doubts, Watch), a
//     2026-07-28 one's listen stream (Listen).
//   - Its opening: the era a server is spoken, chosen and remembered
//     (Handshake, Eras), and the exchanges themselves (Initialize, Discover).
//   - Its lists: paging (List), a server's resources, templates and prompts
//     (ListOthers), the lists it said changed (Changes).
//   - Keeping servers: a server's life (Life: its state, its connection and
//     that connection's lists, run through the Supervisee hooks the gateway
//     gives it), the restart policy (Restarts), and the connections each
//     client session has of its own (Pool).
//
// None of it knows of tools, sessions or policy: a request's write gate
// reaches a transport as an explicit BeforeWrite, what the child sends unasked
// goes to the handlers it is given, and a client session is only a key.
package upstream
