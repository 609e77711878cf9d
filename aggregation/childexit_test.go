package aggregation

import (
	"os"
	"syscall"
)

// exitChild ends a test child (the test binary re-exec'd). A race-built process
// sleeps a second before it exits (the race runtime's atexit_sleep_ms, for other
// threads to report), and the gateway stopping it waits for its exit: every test
// that stopped a gateway waited that second per child. Under -race the child
// exits at once instead: its race reports were written when found; only the
// summary and the exit code 66 are skipped, which no test reads from a child.
func exitChild(code int) {
	if raceBuild {
		syscall.Exit(code)
	}
	os.Exit(code)
}
