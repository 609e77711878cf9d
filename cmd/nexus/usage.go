package main

import (
	"fmt"
	"github.com/nexus-mcp/nexus/internal/suggest"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// argsKey finds the command line as typed in the app's metadata, to quote it back
// corrected in a hint.
const argsKey = "args"

// usageHint is a usage mistake on one line: what is wrong, then what to type.
// Exit status 2, like usageError; urfave/cli's own reaction (the whole help on
// stdout, the error twice) buries the one line that matters.
func usageHint(msg, hint string) error {
	if hint == "" {
		return cli.Exit(msg, 2)
	}
	return cli.Exit(msg+"; "+hint, 2)
}

// guardUsage makes every command answer a usage mistake with one line and a hint:
// unknown flags, unknown commands and subcommands.
func guardUsage(app *cli.App) {
	app.OnUsageError = onUsageError
	app.Action = unknownCommand
	var walk func([]*cli.Command)
	walk = func(cmds []*cli.Command) {
		for _, c := range cmds {
			c.OnUsageError = onUsageError
			if len(c.Subcommands) > 0 && c.Action == nil {
				c.Action = unknownCommand
			}
			requireFlags(c)
			limitArgs(c)
			walk(c.Subcommands)
		}
	}
	walk(app.Commands)
}

// unknownCommand runs where urfave/cli would answer "No help topic for 'lsit-tools'"
// (exit 3): a name that is no command gets "did you mean", no name gets the help.
func unknownCommand(c *cli.Context) error {
	cmds, path := c.App.Commands, "nexus"
	root := c.Command == nil || c.Command.Name == c.App.Name
	if !root {
		cmds, path = c.Command.Subcommands, "nexus "+c.Command.Name
	}
	if !c.Args().Present() || c.Args().First() == "help" {
		if root {
			return cli.ShowAppHelp(c)
		}
		return cli.ShowSubcommandHelp(c)
	}
	name := c.Args().First()
	var names []string
	for _, cmd := range cmds {
		if !cmd.Hidden {
			names = append(names, cmd.Names()...)
		}
	}
	msg := fmt.Sprintf("unknown command %q", path+" "+name)
	if near := suggest.Closest(name, names); near != "" {
		return usageHint(msg, fmt.Sprintf("did you mean `%s %s`?", path, near))
	}
	return usageHint(msg, fmt.Sprintf("`%s --help` lists the commands", path))
}

// onUsageError answers a flag mistake: for an unknown flag of a command that
// passes arguments on to a child (nexus add ... -- ARGS), the fix is nearly always
// a missing "--", and the hint shows the corrected command line.
func onUsageError(c *cli.Context, err error, _ bool) error {
	msg := err.Error()
	name := c.App.Name
	if c.Command != nil && c.Command.Name != "" {
		name = c.Command.HelpName
	}
	bad, unknown := strings.CutPrefix(msg, "flag provided but not defined: ")
	if !unknown {
		return usageHint(msg, fmt.Sprintf("`%s --help` lists its flags", name))
	}
	var flags []string
	if c.Command != nil {
		for _, f := range c.Command.Flags {
			flags = append(flags, f.Names()...)
		}
	}
	for _, f := range c.App.Flags {
		flags = append(flags, f.Names()...)
	}
	// A near miss of a flag of ours ("--comand") is a typo even where a child's
	// flag could follow: one-letter flags ("-y") are never near enough.
	flagName, _, _ := strings.Cut(strings.TrimLeft(bad, "-"), "=")
	near := ""
	if len(flagName) > 2 {
		near = suggest.Closest(flagName, flags)
	}
	if near != "" {
		return usageHint(msg, fmt.Sprintf("did you mean --%s? (`%s --help` lists the flags)", near, name))
	}
	if c.Command != nil && strings.Contains(c.Command.ArgsUsage, "-- ARGS") {
		typed, _ := c.App.Metadata[argsKey].([]string)
		return usageHint(msg, "put `--` before the server's own arguments: "+withDashDash(typed, bad))
	}
	return usageHint(msg, fmt.Sprintf("`%s --help` lists its flags", name))
}

// argCount is how many positional arguments a command's ArgsUsage allows, the
// one rule every command follows: the words outside brackets are required, one
// argument each ("NAME", "claude-desktop|...|FILE"); a bracketed word may be left
// out ("[NAME DURATION|off]": none to two); a word ending in "..." takes any
// number more (max -1), and what follows "--" is the child's.
func argCount(argsUsage string) (min, max int) {
	if strings.Contains(argsUsage, "...") {
		max = -1
	}
	depth := 0
	for _, w := range strings.Fields(argsUsage) {
		if w == "--" || w == "[--" {
			break
		}
		optional := depth > 0 || strings.HasPrefix(w, "[")
		depth += strings.Count(w, "[") - strings.Count(w, "]")
		if !optional {
			min++
		}
		if max >= 0 {
			max++
		}
	}
	return min, max
}

// needed says what a command that got too few arguments needs: "one NAME",
// "one of code-kg, doc-kg", "one or more ENTRY", or its whole ArgsUsage when it
// needs several.
func needed(argsUsage string, min int) string {
	if min > 1 {
		return argsUsage
	}
	first := strings.Fields(argsUsage)[0]
	if w, ok := strings.CutSuffix(first, "..."); ok {
		return "one or more " + w
	}
	if strings.Contains(first, "|") {
		return "one of " + strings.ReplaceAll(first, "|", ", ")
	}
	return "one " + first
}

// limitArgs checks the count of positional arguments before a leaf command runs:
// one that ignored extra ones would do something other than what was typed, and
// one that is missing its arguments says how to call it, the same way for every
// command. The commands check the values themselves.
func limitArgs(c *cli.Command) {
	if c.Action == nil || len(c.Subcommands) > 0 || c.SkipFlagParsing {
		return
	}
	min, max := argCount(c.ArgsUsage)
	action := c.Action
	c.Action = func(ctx *cli.Context) error {
		name := strings.TrimPrefix(ctx.Command.HelpName, "nexus ")
		hint := fmt.Sprintf("`%s --help` shows its usage", ctx.Command.HelpName)
		n := ctx.Args().Len()
		if max >= 0 && n > max {
			extra := ctx.Args().Slice()[max:]
			what := "no arguments"
			if max > 0 {
				what = fmt.Sprintf("at most %d argument(s) (%s)", max, ctx.Command.ArgsUsage)
			}
			return usageHint(fmt.Sprintf("%s takes %s, got %q", name, what, strings.Join(extra, " ")), hint)
		}
		if n < min {
			return usageHint(fmt.Sprintf("%s needs %s", name, needed(ctx.Command.ArgsUsage, min)),
				fmt.Sprintf("write `%s %s`", ctx.Command.HelpName, ctx.Command.ArgsUsage))
		}
		return action(ctx)
	}
}

// withDashDash is the typed command line with "--" inserted before the flag the
// command did not know, which belongs to the child.
func withDashDash(typed []string, bad string) string {
	if len(typed) == 0 {
		return "nexus ... -- " + bad + " ..."
	}
	out := []string{"nexus"}
	rest := typed[1:]
	i := slices.IndexFunc(rest, func(a string) bool { return a == bad || strings.HasPrefix(a, bad+"=") })
	if i < 0 || slices.Contains(rest[:i], "--") {
		return strings.Join(append(out, rest...), " ")
	}
	out = append(out, rest[:i]...)
	out = append(out, "--")
	return strings.Join(append(out, rest[i:]...), " ")
}

// requireFlags checks a command's required string flags itself: urfave/cli reports a
// missing one with exit 1 and no hint, as if the command had failed.
func requireFlags(c *cli.Command) {
	var required []*cli.StringFlag
	for _, f := range c.Flags {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Required {
			sf.Required = false
			required = append(required, sf)
		}
	}
	if len(required) == 0 || c.Action == nil {
		return
	}
	action := c.Action
	c.Action = func(ctx *cli.Context) error {
		for _, f := range required {
			if !ctx.IsSet(f.Name) {
				placeholder := "VALUE"
				if _, rest, ok := strings.Cut(f.Usage, "`"); ok {
					placeholder, _, _ = strings.Cut(rest, "`") // urfave/cli's `NAME` convention
				}
				flag := fmt.Sprintf("--%s %s", f.Name, placeholder)
				return usageHint(fmt.Sprintf("%s needs %s", ctx.Command.HelpName, flag),
					fmt.Sprintf("write `%s %s %s`", ctx.Command.HelpName, flag, ctx.Command.ArgsUsage))
			}
		}
		return action(ctx)
	}
}
