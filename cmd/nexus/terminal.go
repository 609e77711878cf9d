package main

import (
	"os"

	"golang.org/x/term"
)

// stdioWaitNotice is what serve says when a person, not a client, started it: over
// stdio it waits silently for MCP messages, which looks like a hang.
const stdioWaitNotice = "nexus: waiting for an MCP client on stdin (clients such as Claude Desktop start `nexus serve` themselves; " +
	"to try tools by hand use `nexus list-tools` and `nexus call`). Press Ctrl-C to stop."

// isTerminal reports whether f is a terminal: progress and notices are for people,
// never for pipes, files or MCP clients.
func isTerminal(f *os.File) bool { return f != nil && term.IsTerminal(int(f.Fd())) }
