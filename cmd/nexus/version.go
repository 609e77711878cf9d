package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/urfave/cli/v2"

	"github.com/nexus-mcp/nexus/aggregation"
)

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:   "version",
		Usage:  "print the version, and the commit the binary was built from",
		Action: versionAction,
	}
}

// versionAction is the action of `nexus version`.
func versionAction(c *cli.Context) error {
	info, _ := debug.ReadBuildInfo()
	fmt.Fprintf(c.App.Writer, "nexus %s%s %s/%s %s\n", aggregation.Version, buildCommit(info), runtime.GOOS, runtime.GOARCH, runtime.Version())
	return nil
}

// buildCommit is " (commit REV)" for a binary built in a clone (go build or go
// install ./cmd/nexus stamp the commit, and whether the tree had changes), so
// that a report names the exact code; "" when the go command stamped none (go
// run, -buildvcs=false, a build outside a repository).
func buildCommit(info *debug.BuildInfo) string {
	if info == nil {
		return ""
	}
	var rev string
	var modified bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return ""
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified {
		return " (commit " + rev + ", with changes not committed)"
	}
	return " (commit " + rev + ")"
}
