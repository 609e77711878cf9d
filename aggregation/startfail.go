package aggregation

import (
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
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

// remoteStartFailure rewords a remote server's failed start when what
// answers at its URL is not an MCP server, or nothing does: what to check
// first. Any other error is returned as it is.
func remoteStartFailure(server, url string, err error) error {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("nothing answers at %s: start the server, or fix servers.%s.url: %w", url, server, err)
	case errors.Is(err, transport.ErrLegacySSEServer):
		return fmt.Errorf("%s refused the first request of both protocol eras: if it is not the server's MCP endpoint, fix servers.%s.url; if it is a legacy SSE server, set servers.%s.transport to \"sse\": %w",
			url, server, server, err)
	}
	if status, ok := streamRefused(err); ok {
		return fmt.Errorf("%s answered HTTP %d to the SSE stream's request: is it the server's SSE endpoint? fix servers.%s.url: %w", url, status, server, err)
	}
	if status, ok := webPage(err); ok {
		// The page itself, often a whole HTML document, says nothing a
		// person needs here, and would fill every line the error is shown on.
		return &reworded{fmt.Sprintf("%s answered HTTP %d with a web page, not MCP: is it the server's MCP endpoint? fix servers.%s.url", url, status, server), err}
	}
	return err
}

// webPage reports whether err is an HTTP error status a server answered with
// a page of HTML or XML (mcp-go's "request failed with status N: BODY"), and
// which status.
func webPage(err error) (status int, ok bool) {
	status, body, ok := statusAfter(err, "request failed with status ", ": ")
	return status, ok && strings.HasPrefix(strings.TrimSpace(body), "<")
}

// streamRefused reports whether err is an SSE server's refusal of the stream
// (mcp-go's "unexpected status code: N"), and its status.
func streamRefused(err error) (status int, ok bool) {
	status, _, ok = statusAfter(err, "unexpected status code: ", " ")
	return status, ok
}

// statusAfter finds in err's text the HTTP status that follows prefix, up to
// sep (or the end), and what follows sep. mcp-go says a status in words only.
func statusAfter(err error, prefix, sep string) (status int, rest string, ok bool) {
	msg := err.Error()
	i := strings.Index(msg, prefix)
	if i < 0 {
		return 0, "", false
	}
	code, rest, _ := strings.Cut(msg[i+len(prefix):], sep)
	status, convErr := strconv.Atoi(code)
	return status, rest, convErr == nil
}

// reworded is an error said otherwise for a person, the original kept for
// errors.Is and errors.As.
type reworded struct {
	msg string
	err error
}

func (e *reworded) Error() string { return e.msg }
func (e *reworded) Unwrap() error { return e.err }
