package aggregation

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// launchers are the programs catalog entries run their servers with, and what
// provides each: the fix a person needs when one is not installed.
var launchers = map[string]string{
	"npx":    "it comes with Node.js (https://nodejs.org)",
	"node":   "it is Node.js (https://nodejs.org)",
	"uvx":    "it comes with uv (https://docs.astral.sh/uv/)",
	"uv":     "it is uv (https://docs.astral.sh/uv/)",
	"docker": "it is Docker (https://docs.docker.com/get-docker/)",
}

// notInstalled rewords a start that failed because the server's program is not
// on PATH: what to install, or how to stop trying. Any other error is returned
// as it is.
func notInstalled(server, command string, err error) error {
	if !errors.Is(err, exec.ErrNotFound) {
		return err
	}
	what := ""
	if from, ok := launchers[command]; ok {
		what = "; " + from
	}
	return fmt.Errorf("%s is not installed or not on PATH%s: install it, or `nexus remove %s` if you do not need the server: %w", command, what, server, err)
}

// withStderr adds to a failed start the line of the child's stderr most likely to
// say why (the last that speaks of an error, else the last), so that the reason
// reaches where the error is shown (list-servers --live, a call's "not running",
// doctor), not only the log's stderr tail.
func withStderr(err error, tail string) error {
	line := ""
	lines := strings.Split(strings.TrimSpace(tail), "\n")
	for i := len(lines) - 1; i >= 0 && line == ""; i-- {
		if strings.Contains(strings.ToLower(lines[i]), "error") {
			line = strings.TrimSpace(lines[i])
		}
	}
	if line == "" {
		line = strings.TrimSpace(lines[len(lines)-1])
	}
	if line == "" || strings.Contains(err.Error(), line) {
		return err
	}
	return fmt.Errorf("%w (its stderr says: %s)", err, line)
}

// withExit adds to a failed handshake's err how the child's process ended,
// when it ended as the handshake failed: a request written to a process that
// exited says only that its pipe closed, not with which status it exited. A
// process still running after exitWait is left to be closed without more.
func withExit(cn *conn, err error) error {
	select {
	case <-cn.Done():
	case <-time.After(exitWait):
		return err
	}
	if why := cn.Err(); why != nil && !strings.Contains(err.Error(), why.Error()) {
		return fmt.Errorf("%w (%v)", err, why)
	}
	return err
}

// exitWait is how long a failed handshake waits to see whether the process
// exited: its exit is noticed a moment after its pipes close.
const exitWait = 200 * time.Millisecond

// unreachable rewords a remote server's failed start when nothing answers at
// its URL (the connection refused): what to check first. Any other error is
// returned as it is.
func unreachable(server, url string, err error) error {
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return err
	}
	return fmt.Errorf("nothing answers at %s: start the server, or fix servers.%s.url: %w", url, server, err)
}
