package main

import (
	"context"
	"fmt"

	"github.com/nexus-mcp/nexus/run"
)

// confirmRunning applies an edit to the running gateways and says so on stderr. An
// edit is saved whatever happens here: a gateway that does not confirm applies it at
// its next config poll, and the warning says that.
func (e *env) confirmRunning(ctx context.Context) {
	n, err := run.ReloadRunning(ctx, e.home, e.log)
	if err != nil {
		e.log.Warn("not every running gateway confirmed the change", "err", err)
	}
	if n > 0 {
		fmt.Fprintf(e.stderr, "in force in %d running gateway(s)\n", n)
	}
}
