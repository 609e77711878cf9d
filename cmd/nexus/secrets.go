package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/secrets"
)

func secretsCommand() *cli.Command {
	return &cli.Command{
		Name:  "secrets",
		Usage: "manage the secret values child servers use (kept in the OS keychain, or the insecure file store when chosen)",
		Description: "Config files hold references, never values: ${keyring:NAME} is read from the\n" +
			"keychain and ${env:NAME} from the environment when a child starts.\n" +
			"`nexus add NAME --env K=V` stores V as the secret NAME/env/K.",
		Subcommands: []*cli.Command{
			{
				Name:      "set",
				Usage:     "store a secret; the value comes from a hidden prompt, or from stdin when it is not a terminal",
				ArgsUsage: "NAME",
				Action:    secretsSetAction,
			},
			{
				Name:   "list",
				Usage:  "list the secrets stored and referred to, and where each is used (never values)",
				Flags:  []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
				Action: secretsListAction,
			},
			{
				Name:      "rm",
				Usage:     "delete a secret from the secret store (the OS keychain, or the file store)",
				ArgsUsage: "NAME",
				Action:    secretsRmAction,
			},
		},
	}
}

// secretsRmAction is the action of `nexus secrets rm`.
func secretsRmAction(c *cli.Context) error {
	e, err := newEnv(c, slog.LevelWarn)
	if err != nil {
		return err
	}
	store, err := e.secrets(c.Context, nil)
	if err != nil {
		return err
	}
	if err := store.Delete(c.Context, c.Args().First()); err != nil {
		return err
	}
	_ = e.secretIndex().update(c.Args().First(), false) // a stale name only lingers in the list
	fmt.Fprintf(e.stdout, "deleted %s from %s\n", c.Args().First(), e.storeName())
	return nil
}

// secretsListAction is the action of `nexus secrets list`.
func secretsListAction(c *cli.Context) error {
	e, cfg, err := loadEnv(c, slog.LevelWarn)
	if err != nil {
		return err
	}
	used := secretUses(cfg)
	names := e.storedSecretNames(c.Context)
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	names = slices.Compact(names)
	if c.Bool("json") {
		type row struct {
			Name   string   `json:"name"`
			UsedBy []string `json:"usedBy"`
		}
		rows := []row{}
		for _, n := range names {
			rows = append(rows, row{n, nonNil(used[n])})
		}
		return printJSON(e.stdout, rows)
	}
	if len(names) == 0 {
		fmt.Fprintln(e.stdout, "no secrets stored or referenced in the config (nexus secrets set NAME stores one)")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SECRET\tUSED BY")
	for _, n := range names {
		where := strings.Join(used[n], ", ")
		switch {
		case where == "" && strings.HasPrefix(n, "oauth/"):
			where = "OAuth logins (nexus auth status)"
		case where == "":
			where = "nothing yet (refer to it as ${keyring:" + n + "})"
		}
		fmt.Fprintf(tw, "%s\t%s\n", n, where)
	}
	return tw.Flush()
}

// secretsSetAction is the action of `nexus secrets set`.
func secretsSetAction(c *cli.Context) error {
	name := c.Args().First()
	if err := secrets.ValidateName(name); err != nil {
		return usageError(err.Error())
	}
	e, err := newEnv(c, slog.LevelWarn)
	if err != nil {
		return err
	}
	value, err := readSecret(c.App.Reader, e.stderr, "value for "+name+": ")
	if err != nil {
		return err
	}
	store, err := e.secrets(c.Context, nil)
	if err != nil {
		return err
	}
	if err := store.Set(c.Context, name, value); err != nil {
		return err
	}
	if err := e.secretIndex().update(name, true); err != nil {
		e.log.Warn("secrets list will not show it until the config uses it", "err", err)
	}
	fmt.Fprintf(e.stdout, "stored %s in %s; use it in config as ${keyring:%s}\n", name, e.storeName(), name)
	if cfg, _ := e.load(); cfg != nil {
		kept, err := e.keepFileStore(c.Context, cfg, false)
		if err != nil {
			return err
		}
		if kept {
			e.fileStoreWarning(e.stderr, false)
		}
	}
	return nil
}

// readSecret reads a value from a hidden terminal prompt, or the first line of a
// non-terminal stdin (for scripts: `printf %s "$TOKEN" | nexus secrets set NAME`).
func readSecret(in io.Reader, prompt io.Writer, label string) (string, error) {
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(prompt, label)
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(prompt)
		if err != nil {
			return "", fmt.Errorf("reading the value: %w", err)
		}
		return string(b), nil
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading the value from stdin: %w", err)
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", usageError("no value given: type it at the prompt, or pipe it on stdin")
	}
	return line, nil
}

// secretUses maps each ${keyring:NAME} the config refers to onto where it is used.
func secretUses(cfg *config.Config) map[string][]string {
	used := map[string][]string{}
	for _, name := range cfg.ServerNames() {
		s := cfg.Servers[name]
		for k, v := range s.Env {
			for _, ref := range secrets.Refs(v) {
				used[ref] = append(used[ref], "servers."+name+".env."+k)
			}
		}
		for k, v := range s.Headers {
			for _, ref := range secrets.Refs(v) {
				used[ref] = append(used[ref], "servers."+name+".headers."+k)
			}
		}
	}
	for _, v := range used {
		sort.Strings(v)
	}
	return used
}

// storeSecrets puts the secret env and header values of a new server into the store
// and replaces them in srv by references. A value that already is a reference is
// written as is. On failure nothing stays stored.
func (e *env) storeSecrets(ctx context.Context, server string, srv *config.Server, env, headers map[string]string) ([]string, error) {
	if len(env) == 0 && len(headers) == 0 {
		return nil, nil
	}
	var stored []string
	put := func(kind string, values map[string]string, into *map[string]string) error {
		keys := make([]string, 0, len(values))
		for k := range values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := values[k]
			if *into == nil {
				*into = map[string]string{}
			}
			if strings.Contains(v, "${keyring:") || strings.Contains(v, "${env:") {
				(*into)[k] = v
				continue
			}
			store, err := e.secrets(ctx, nil)
			if err != nil {
				return fmt.Errorf("cannot store the secret %s %s of %s, so nothing was written: %w\n(use --plain-%s for a value that is not secret)", kind, k, server, err, kind)
			}
			name := secrets.EnvName(server, k)
			if kind == "header" {
				name = secrets.HeaderName(server, k)
			}
			if err := store.Set(ctx, name, v); err != nil {
				return fmt.Errorf("storing the secret %s of %s, so nothing was written: %w", k, server, err)
			}
			stored = append(stored, name)
			(*into)[k] = "${keyring:" + name + "}"
		}
		return nil
	}
	if err := put("env", env, &srv.Env); err != nil {
		e.deleteSecrets(ctx, stored)
		return nil, err
	}
	if err := put("header", headers, &srv.Headers); err != nil {
		e.deleteSecrets(ctx, stored)
		return nil, err
	}
	return stored, nil
}

func (e *env) deleteSecrets(ctx context.Context, names []string) []string {
	if len(names) == 0 {
		return nil
	}
	store, err := e.secrets(ctx, nil)
	if err != nil {
		e.log.Warn("could not delete the secrets of the server: no secret store can be opened", "names", strings.Join(names, ", "), "err", firstLine(err.Error()))
		return nil
	}
	var deleted []string
	for _, n := range names {
		if err := store.Delete(ctx, n); err != nil {
			e.log.Warn("could not delete a secret", "name", n, "err", err)
			continue
		}
		deleted = append(deleted, n)
	}
	return deleted
}

// purgeSecrets deletes the secrets `nexus add` stored for server (named
// "<server>/...") and returns those it deleted; secrets set by hand and shared
// with other servers stay.
func (e *env) purgeSecrets(ctx context.Context, cfg *config.Config, server string) []string {
	var names []string
	for name, uses := range secretUses(cfg) {
		if !strings.HasPrefix(name, server+"/") {
			continue
		}
		for _, u := range uses {
			if strings.HasPrefix(u, "servers."+server+".") {
				names = append(names, name)
				break
			}
		}
	}
	sort.Strings(names)
	return e.deleteSecrets(ctx, names)
}
