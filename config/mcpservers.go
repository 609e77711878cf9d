package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// clientEntryKeys are the keys of a client's server entry (Claude Desktop's and
// Cursor's "mcpServers", VS Code's "servers") that Nexus reads.
var clientEntryKeys = []string{"command", "args", "env", "cwd", "url", "headers", "type", "disabled", "timeout"}

// ClientEntry turns one server entry as MCP clients write it into the keys of a
// Nexus server entry: "type" becomes "transport" and every other known key is kept
// as it is. It is the one conversion used both for an "mcpServers" section in a
// Nexus config and by `nexus import`/`setup`, so the two read an entry alike.
//
// Unknown lists the keys Nexus does not read, sorted; the caller decides whether
// that is an error (a Nexus config) or a note (a client's file, written for other
// tools too). An unknown "type" is an error: guessing a transport would start the
// wrong thing.
func ClientEntry(entry map[string]json.RawMessage) (converted map[string]json.RawMessage, unknown []string, err error) {
	out := maps.Clone(entry)
	for _, k := range slices.Sorted(maps.Keys(entry)) {
		if !slices.Contains(clientEntryKeys, k) {
			unknown = append(unknown, k)
			delete(out, k)
		}
	}
	var typ string
	if raw, ok := entry["type"]; ok {
		if err := json.Unmarshal(raw, &typ); err != nil {
			return nil, unknown, fmt.Errorf(`"type" must be a string such as "stdio", "sse" or "http"`)
		}
	}
	_, hasURL := entry["url"]
	transport, err := clientTransport(typ, hasURL)
	if err != nil {
		return nil, unknown, err
	}
	delete(out, "type")
	out["transport"], _ = json.Marshal(transport)
	return out, unknown, nil
}

// clientTransport maps a client entry's "type" to a transport; with no type, an
// entry with a url is streamable HTTP and any other is stdio.
func clientTransport(typ string, hasURL bool) (string, error) {
	switch strings.ToLower(typ) {
	case "":
		if hasURL {
			return TransportStreamableHTTP, nil
		}
		return TransportStdio, nil
	case "stdio":
		return TransportStdio, nil
	case "sse":
		return TransportSSE, nil
	case "http", "streamable-http", "streamablehttp", "streamable_http":
		return TransportStreamableHTTP, nil
	}
	return "", fmt.Errorf("unknown type %q (Nexus runs stdio, sse and http servers)", typ)
}
