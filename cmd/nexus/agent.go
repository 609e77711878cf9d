package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"

	"github.com/urfave/cli/v2"

	"github.com/nexus-mcp/nexus/aggregation"
	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/policy"
)

func agentCommand() *cli.Command {
	return &cli.Command{
		Name:  "agent",
		Usage: "manage agents (identities of HTTP clients)",
		Subcommands: []*cli.Command{{
			Name:      "add",
			Usage:     "create an agent and print its bearer token once; only its hash is stored",
			ArgsUsage: "NAME",
			Flags:     []cli.Flag{&cli.BoolFlag{Name: "force", Usage: "replace the token of an existing agent"}},
			Action: func(c *cli.Context) error {
				name := c.Args().First()
				if c.Args().Len() != 1 || !policy.ValidAgentName(name) {
					return usageError("agent add takes one NAME of 1-32 lower-case letters, digits or '-': nexus agent add coder")
				}
				e, err := newEnv(c, slog.LevelWarn)
				if err != nil {
					return err
				}
				secret := make([]byte, 32)
				if _, err := rand.Read(secret); err != nil {
					return fmt.Errorf("generating a token: %w", err)
				}
				token := "nxs_" + base64.RawURLEncoding.EncodeToString(secret)
				firstToken := !anyAgentToken(e)
				err = config.Edit(e.personal, func(d config.Document) error {
					if _, exists := d.Get("agents", name); exists && !c.Bool("force") {
						return usageError(fmt.Sprintf("agent %q already exists; pass --force to replace its token", name))
					}
					return d.Set(config.Agent{TokenSHA256: aggregation.TokenHash(token)}, "agents", name)
				})
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stderr, "agent %s created; its token is printed once, below. Nexus keeps only its SHA-256.\n", name)
				if firstToken {
					fmt.Fprintln(e.stderr, anonymousEndsNotice)
				}
				fmt.Fprintln(e.stdout, token)
				e.confirmRunning(c.Context)
				return nil
			},
		}},
	}
}

// anonymousEndsNotice is said when the first agent token appears: from then on
// `serve --http` serves only clients with a valid token, and a client that used to
// connect without one is refused with 401.
const anonymousEndsNotice = "nexus: this is the first agent token: `nexus serve --http` now refuses clients without a valid token (401), " +
	"so HTTP clients that connected anonymously need a token of their own (nexus agent add NAME)"

// anyAgentToken reports whether the config already holds an agent token. A config
// that does not load counts as none: the edit that follows reports the mistake.
func anyAgentToken(e *env) bool {
	cfg, err := e.load()
	if err != nil {
		return false
	}
	for _, a := range cfg.Agents {
		if a.TokenSHA256 != "" {
			return true
		}
	}
	return false
}
