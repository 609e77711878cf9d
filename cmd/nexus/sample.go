package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/nexus-mcp/nexus/samples"
)

func sampleServerCommand() *cli.Command {
	return &cli.Command{
		Name:      "sample-server",
		Usage:     "run a built-in sample MCP server (code-kg or doc-kg) on an embedded dataset",
		ArgsUsage: "code-kg|doc-kg",
		Description: "The samples follow the code-kg and doc-kg tool contracts on a small embedded\n" +
			"dataset. They serve stdio by default; --http ADDR serves streamable HTTP at /mcp.\n" +
			"NEXUS_MCP_LOCAL_REPO_ROOTS lists the roots kg_compare_with_local_git may read.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "http", Usage: "serve streamable HTTP on `ADDR` instead of stdio"},
		},
		Action: sampleServerAction,
	}
}

// sampleServerAction is the action of `nexus sample-server`.
func sampleServerAction(c *cli.Context) error {
	name := c.Args().First()
	if name != "code-kg" && name != "doc-kg" {
		return usageError(fmt.Sprintf("unknown sample %q: use code-kg or doc-kg", name))
	}
	return samples.Serve(c.Context, name, c.String("http"), c.App.Reader, c.App.Writer, c.App.ErrWriter)
}
