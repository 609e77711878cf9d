package aggregation

import (
	"errors"
	"fmt"
	"os/exec"
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
