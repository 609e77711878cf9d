package main

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// interspersed moves a command's flags before its positional arguments, and the
// global flags (--config, --project, --insecure-file-store, --log-level) before the
// command. urfave/cli v2 stops reading flags at the first positional argument and
// knows global flags only before the command, but people type `nexus add github
// --transport stdio`, name first, and add --insecure-file-store last, after an error
// told them to. Everything after "--" is left alone: those are the child's own
// arguments. A flag the command has itself (add's --config) stays the command's.
func interspersed(app *cli.App, args []string) []string {
	var globals []string
	rest := args[1:]
	// Global flags before the command.
	for len(rest) > 0 && strings.HasPrefix(rest[0], "-") && rest[0] != "--" {
		n := flagWidth(app.Flags, rest)
		globals = append(globals, rest[:n]...)
		rest = rest[n:]
	}
	if len(rest) == 0 {
		return append([]string{args[0]}, globals...)
	}
	path := []string{rest[0]}
	cmd := findCommand(app.Commands, rest[0])
	rest = rest[1:]
	for cmd != nil && len(cmd.Subcommands) > 0 && len(rest) > 0 {
		if n := globalWidth(app, cmd, rest); n > 0 {
			globals = append(globals, rest[:n]...)
			rest = rest[n:]
			continue
		}
		sub := findCommand(cmd.Subcommands, rest[0])
		if sub == nil {
			// An unknown subcommand ("policy alow --agent x"): leave the rest as
			// typed, so that the answer is about the name, not about a flag the
			// parent command lacks.
			return slices.Concat([]string{args[0]}, globals, path, rest)
		}
		path = append(path, rest[0])
		rest = rest[1:]
		cmd = sub
	}
	out := slices.Concat([]string{args[0]}, globals, path)
	if cmd == nil || cmd.SkipFlagParsing {
		return append(out, rest...)
	}
	var flags, positional []string
	for len(rest) > 0 {
		a := rest[0]
		if a == "--" {
			break
		}
		if n := globalWidth(app, cmd, rest); n > 0 {
			globals = append(globals, rest[:n]...)
			rest = rest[n:]
			continue
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			n := flagWidth(cmd.Flags, rest)
			flags = append(flags, rest[:n]...)
			rest = rest[n:]
			continue
		}
		positional = append(positional, a)
		rest = rest[1:]
	}
	out = slices.Concat([]string{args[0]}, globals, path, flags)
	if len(rest) > 0 || len(positional) > 0 {
		out = append(out, "--")
		out = append(out, positional...)
		if len(rest) > 0 {
			out = append(out, rest[1:]...) // drop the user's own "--"
		}
	}
	return out
}

// globalWidth is how many arguments a global flag at args[0] takes, or 0 when
// args[0] is not a global flag or the command has a flag of that name.
func globalWidth(app *cli.App, cmd *cli.Command, args []string) int {
	a := args[0]
	if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
		return 0
	}
	name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
	if hasFlag(cmd.Flags, name) || !hasFlag(app.Flags, name) {
		return 0
	}
	return flagWidth(app.Flags, args)
}

func hasFlag(flags []cli.Flag, name string) bool {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return true
		}
	}
	return false
}

// flagWidth is how many arguments the flag at args[0] takes: 1 for a boolean or an
// --name=value form, 2 for a flag followed by its value.
func flagWidth(flags []cli.Flag, args []string) int {
	a := strings.TrimLeft(args[0], "-")
	if strings.Contains(a, "=") || len(args) < 2 {
		return 1
	}
	for _, f := range flags {
		for _, name := range f.Names() {
			if name != a {
				continue
			}
			if _, isBool := f.(*cli.BoolFlag); isBool {
				return 1
			}
			return 2
		}
	}
	if a == "help" || a == "h" {
		return 1
	}
	return 1
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.Name == name {
			return c
		}
		for _, alias := range c.Aliases {
			if alias == name {
				return c
			}
		}
	}
	return nil
}
