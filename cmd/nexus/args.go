package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// interspersed moves a command's flags before its positional arguments. urfave/cli
// v2 stops reading flags at the first positional argument, but people type
// `nexus add github --transport stdio`, name first. Everything after "--" is left
// alone: those are the child's own arguments.
func interspersed(app *cli.App, args []string) []string {
	out := append([]string(nil), args[0])
	rest := args[1:]
	// Global flags come before the command.
	for len(rest) > 0 && strings.HasPrefix(rest[0], "-") && rest[0] != "--" {
		n := flagWidth(app.Flags, rest)
		out = append(out, rest[:n]...)
		rest = rest[n:]
	}
	if len(rest) == 0 {
		return out
	}
	cmd := findCommand(app.Commands, rest[0])
	out = append(out, rest[0])
	rest = rest[1:]
	for cmd != nil && len(cmd.Subcommands) > 0 && len(rest) > 0 {
		sub := findCommand(cmd.Subcommands, rest[0])
		if sub == nil {
			break
		}
		out = append(out, rest[0])
		rest = rest[1:]
		cmd = sub
	}
	if cmd == nil || cmd.SkipFlagParsing {
		return append(out, rest...)
	}
	var flags, positional []string
	for len(rest) > 0 {
		a := rest[0]
		if a == "--" {
			break
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
	out = append(out, flags...)
	if len(rest) > 0 || len(positional) > 0 {
		out = append(out, "--")
		out = append(out, positional...)
		if len(rest) > 0 {
			out = append(out, rest[1:]...) // drop the user's own "--"
		}
	}
	return out
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
