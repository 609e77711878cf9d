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
				Name:   "show",
				Usage:  "print the effective config with the file each server and policy came from (secrets redacted)",
				Flags:  []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON (always JSON: the effective config, its layers and the source of each server and policy)"}},
				Action: configShowAction,
			},
			{
				Name:   "validate",
				Usage:  "check every layer and the merged result; list every problem, each once",
				Action: configValidateAction,
			},
		},
	}
}

// configValidateAction is the action of `nexus config validate`.
func configValidateAction(c *cli.Context) error {
	e, err := newEnv(c, slog.LevelWarn)
	if err != nil {
		return err
	}
	return e.validate()
}

// configShowAction is the action of `nexus config show`.
func configShowAction(c *cli.Context) error {
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
}

// validate reports what serve would refuse, exactly: it loads the layers the same
// way, then says which layer holds each problem.
func (e *env) validate() error {
	_, err := e.load()
	problems := config.Problems(err)
	perFile := map[string]int{}
	for _, p := range problems {
		var ce *config.Error
		if errors.As(p, &ce) {
			perFile[ce.File]++
		}
	}
	for _, p := range e.layers {
		_, statErr := os.Stat(p)
		switch {
		case errors.Is(statErr, fs.ErrNotExist) && p == e.personal:
			fmt.Fprintf(e.stdout, "%s: absent (fine: nothing personal configured)\n", p)
		case perFile[p] > 0:
			fmt.Fprintf(e.stdout, "%s: %d problem(s)\n", p, perFile[p])
		case statErr == nil:
			fmt.Fprintf(e.stdout, "%s: ok\n", p)
		}
	}
	for _, p := range problems {
		fmt.Fprintln(e.stdout, p)
	}
	if len(problems) > 0 {
		return cli.Exit(fmt.Sprintf("%d problem(s); fix them and run nexus config validate again", len(problems)), 1)
	}
	fmt.Fprintln(e.stdout, "merged: ok")
	return nil
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
