// Command samplechild serves a sample server (code-kg or doc-kg) as the end-to-end
// tests' children do: `samplechild NAME [--http ADDR]` is `nexus sample-server NAME
// [--http ADDR]` (the same samples.Serve) without the CLI, SQLite and the rest of
// the gateway. The harness builds it without the race detector, which only the
// code under test needs: a child of a -race gateway then costs a small binary's
// start, not a second race-instrumented nexus. The tests of the `sample-server`
// command itself run the nexus binary.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nexus-mcp/nexus/samples"
)

func main() {
	addr := flag.String("http", "", "serve streamable HTTP on `ADDR` instead of stdio")
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: samplechild code-kg|doc-kg [--http ADDR]")
		os.Exit(2)
	}
	name := os.Args[1]
	_ = flag.CommandLine.Parse(os.Args[2:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := samples.Serve(ctx, name, *addr, os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
