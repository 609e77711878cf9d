package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/secrets"
)

func configCommand() *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "show the effective config and check every layer",
		Description: "Layers, first to last (later ones win): --config FILE (and NEXUS_CONFIG), the\n" +
			"project's .nexus/config.json with --project, then $NEXUS_HOME/config.json.",
		Subcommands: []*cli.Command{
			{
				Name:  "show",
				Usage: "print the effective config with the file each server and policy came from (secrets redacted)",
				Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON (always JSON: the effective config, its layers and the source of each server and policy)"}},
				Action: func(c *cli.Context) error {
					e, cfg, err := loadEnv(c, slog.LevelWarn)
					if err != nil {
						return err
					}
					sources := map[string]string{}
					for name, s := range cfg.Servers {
						sources["servers."+name] = s.Source
						maskLiterals(s)
					}
					for k, v := range cfg.Policy.Sources {
						sources[k] = v
					}
					out := map[string]any{"layers": cfg.Layers, "config": cfg, "sources": sources}
					if len(cfg.Locked) > 0 {
						out["locked"] = cfg.Locked
					}
					return printJSON(e.stdout, out)
				},
			},
			{
				Name:  "validate",
				Usage: "check every layer on its own, then the merged result",
				Action: func(c *cli.Context) error {
					e, err := newEnv(c, slog.LevelWarn)
					if err != nil {
						return err
					}
					bad := 0
					for _, p := range e.layers {
						data, err := os.ReadFile(p)
						switch {
						case errors.Is(err, fs.ErrNotExist) && p == e.personal:
							fmt.Fprintf(e.stdout, "%s: absent (fine: nothing personal configured)\n", p)
							continue
						case err != nil:
							bad++
							fmt.Fprintf(e.stdout, "%s: %v\n", p, err)
							continue
						}
						if _, err := config.Parse(p, data); err != nil {
							bad++
							fmt.Fprintf(e.stdout, "%s: %v\n", p, err)
							continue
						}
						fmt.Fprintf(e.stdout, "%s: ok\n", p)
					}
					if _, err := e.load(); err != nil {
						bad++
						fmt.Fprintf(e.stdout, "merged: %v\n", err)
					} else {
						fmt.Fprintln(e.stdout, "merged: ok")
					}
					if bad > 0 {
						return cli.Exit(fmt.Sprintf("%d problem(s)", bad), 1)
					}
					return nil
				},
			},
		},
	}
}

// maskLiterals hides literal values that look secret (references stay: they are
// what the user wrote and reveal nothing).
func maskLiterals(s *config.Server) {
	mask := func(m map[string]string, isSecret func(string) bool) {
		for k, v := range m {
			if secrets.IsReference(v) {
				continue
			}
			if isSecret(k) || secrets.LooksSecretValue(v) {
				m[k] = "[redacted]"
			}
		}
	}
	mask(s.Env, secrets.LooksSecretKey)
	mask(s.Headers, secrets.LooksSecretHeader)
}
