package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nexus-mcp/nexus/audit"
	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/policy"
	"github.com/nexus-mcp/nexus/run"
)

func auditCommand() *cli.Command {
	return &cli.Command{
		Name:  "audit",
		Usage: "show the audit trail: refused calls, and allowed calls of tools that are not read-only",
		Description: "The trail is kept by nexus serve (and nexus call) in NEXUS_HOME/audit.db, or in the\n" +
			"shared PostgreSQL database with \"memory\": {\"backend\": \"postgres\"}. Newest first;\n" +
			"with --json, one JSON object a line, oldest first, in the schema of docs/operations.md\n" +
			"(\"The audit record\"): what audit.export writes, for a log system.\n\n" +
			"   nexus audit --refused --since 1h\n" +
			"   nexus audit --agent coder --tool code-kg.* --json",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "agent", Usage: "only calls of agent `NAME`"},
			&cli.StringFlag{Name: "tool", Usage: "only calls of canonical tool `NAME` (server.tool), or server.* for a server's"},
			&cli.StringFlag{Name: "since", Usage: "only the last `DURATION` (e.g. 30m, 1h, 2d)"},
			&cli.BoolFlag{Name: "refused", Usage: "only refused calls"},
			&cli.IntFlag{Name: "limit", Value: 100, Usage: "at most `N` records"},
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "with --json: then keep printing records as they are written, until interrupted"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON Lines: one record a line, oldest first (the schema of docs/operations.md)"},
		},
		Action: auditAction,
	}
}

// auditAction is the action of `nexus audit`.
func auditAction(c *cli.Context) error {
	f, err := auditFilter(c)
	if err != nil {
		return err
	}
	e, cfg, err := loadEnv(c, slog.LevelWarn)
	if err != nil {
		return err
	}
	store, err := run.OpenAuditToRead(c.Context, cfg, e.runEnv(c.Context, cfg))
	if errors.Is(err, run.ErrNoTrail) {
		if c.Bool("json") {
			return nil // no record: no line
		}
		fmt.Fprintf(e.stdout, "nexus: %v\n", err)
		return nil
	}
	if err != nil {
		return err
	}
	defer store.Close()
	recs, err := store.Query(c.Context, f)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		last, err := printLines(e.stdout, recs)
		if err != nil || !c.Bool("follow") {
			return err
		}
		return followTrail(c.Context, store, f, last, e.stdout)
	}
	if c.Bool("follow") {
		return usageError("--follow streams JSON Lines: add --json")
	}
	if len(recs) == 0 {
		fmt.Fprintln(e.stdout, "no record matches")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tAGENT\tTOOL\tDECISION\tRULE\tOUTCOME\tDURATION\tMEMORY")
	for _, r := range recs {
		decision := "allowed"
		if r.Refused {
			decision = "refused"
		}
		rule := r.Origin + ": " + r.Rule
		if r.Source != "" {
			rule += " (" + r.Source + ")"
		}
		mem := r.Memory
		if mem == "" {
			mem = "-"
		}
		tool := r.Tool
		if r.Method != "tools/call" {
			tool = r.Method + " " + tool
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Time.Local().Format(time.DateTime), r.Agent, tool, decision, rule, r.Outcome, r.Duration.Round(time.Microsecond), mem)
	}
	return tw.Flush()
}

// auditFilter reads the filter flags, refusing what would silently match nothing.
func auditFilter(c *cli.Context) (audit.Filter, error) {
	f := audit.Filter{Agent: c.String("agent"), Tool: c.String("tool"), Refused: c.Bool("refused"), Limit: c.Int("limit")}
	if f.Agent != "" && !policy.ValidAgentName(f.Agent) {
		return f, usageError(fmt.Sprintf("--agent %q: an agent name is 1-32 lower-case letters, digits or '-'", f.Agent))
	}
	if f.Tool != "" && (!strings.Contains(f.Tool, ".") || strings.HasPrefix(f.Tool, ".")) {
		return f, usageError(fmt.Sprintf("--tool %q: write a canonical name, server.tool, or server.* (nexus list-tools shows them)", f.Tool))
	}
	if s := c.String("since"); s != "" {
		d, err := config.ParseDuration(s)
		if err != nil || d <= 0 {
			return f, usageError(fmt.Sprintf("--since %q: write a duration such as 30m, 1h or 2d", s))
		}
		f.Since = time.Now().Add(-d)
	}
	if f.Limit <= 0 {
		return f, usageError(fmt.Sprintf("--limit %d: write a positive number", f.Limit))
	}
	return f, nil
}

// printLines prints records (newest first, as Query returns them) as JSON Lines,
// oldest first, and returns the ID of the newest.
func printLines(w io.Writer, recs []audit.Record) (int64, error) {
	var last int64
	for i := len(recs) - 1; i >= 0; i-- {
		if _, err := w.Write(recs[i].Entry().Line()); err != nil {
			return last, err
		}
		last = max(last, recs[i].ID)
	}
	return last, nil
}

// followEvery is how often --follow asks the store for new records: the
// gateway's writer flushes every 200ms.
const followEvery = 500 * time.Millisecond

// followTrail prints the records f selects written after the one of ID last, as
// they come, until ctx ends (Ctrl-C). A store that fails is retried.
func followTrail(ctx context.Context, store *audit.Store, f audit.Filter, last int64, w io.Writer) error {
	f.Since, f.Limit = time.Time{}, 1000
	tick := time.NewTicker(followEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		f.After = last
		recs, err := store.Query(ctx, f)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			continue
		}
		if last, err = printLines(w, recs); err != nil {
			return err
		}
		if last == 0 {
			last = f.After
		}
	}
}
