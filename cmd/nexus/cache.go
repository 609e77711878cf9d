package main

import (
	"errors"
	"fmt"
	"github.com/nexus-mcp/nexus/internal/size"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nexus-mcp/nexus/audit"
	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/run"
)

// withMemory runs do with the memory the config opens, closed after.
func withMemory(c *cli.Context, do func(e *env, mem *memory.Memory) error) error {
	e, cfg, err := loadEnv(c, slog.LevelWarn)
	if err != nil {
		return err
	}
	mem, err := e.openMemory(c.Context, cfg)
	if err != nil {
		return err
	}
	defer mem.Close()
	return do(e, mem)
}

func cacheCommand() *cli.Command {
	return &cli.Command{
		Name:  "cache",
		Usage: "inspect and clear memory (remembered results of read-only tools)",
		Subcommands: []*cli.Command{
			{
				Name:   "stats",
				Usage:  "entries, bytes, hits and misses per tool, and the time saved",
				Flags:  []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
				Action: cacheStatsAction,
			},
			{
				Name:   "list",
				Usage:  "list remembered entries, most recently used first",
				Flags:  []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}, &cli.IntFlag{Name: "limit", Value: 100, Usage: "at most `N` entries"}},
				Action: cacheListAction,
			},
			{
				Name:      "ttl",
				Usage:     "say how long answers of a server or tool stay true (memory keeps nothing without a ttl)",
				ArgsUsage: "[NAME DURATION|off]",
				Description: "NAME is a server (all its tools), server.* or server.tool; DURATION is e.g. 30s,\n" +
					"5m, 12h, 1d or never; off removes what this command set. Without arguments, lists\n" +
					"what it set. A ttl in the config files wins over one set here for the same\n" +
					"pattern; both win over the catalog's suggestions. Running gateways apply it at once.",
				Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON (without arguments)"},
					&cli.BoolFlag{Name: "later", Usage: "set the ttl of a server no config layer has yet (one you add later); without it the name is refused as a likely misspelling"}},
				Action: cacheTTLAction,
			},
			{
				Name:  "clear",
				Usage: "forget remembered entries (all, or of one server or tool)",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "server", Usage: "only server `NAME`"},
					&cli.StringFlag{Name: "tool", Usage: "only canonical tool `NAME` (server.tool)"},
				},
				Action: cacheClearAction,
			},
		},
	}
}

// cacheClearAction is the action of `nexus cache clear`.
func cacheClearAction(c *cli.Context) error {
	return withMemory(c, func(e *env, mem *memory.Memory) error {
		n, err := mem.Clear(c.Context, c.String("server"), c.String("tool"))
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "forgot %s\n", count(n, "entry", "entries"))
		return nil
	})
}

// cacheTTLAction is the action of `nexus cache ttl`.
func cacheTTLAction(c *cli.Context) error {
	return cacheTTL(c)
}

// cacheListAction is the action of `nexus cache list`.
func cacheListAction(c *cli.Context) error {
	return withMemory(c, func(e *env, mem *memory.Memory) error {
		entries, err := mem.List(c.Context, c.Int("limit"))
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(e.stdout, entries)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOOL\tARGS\tSIZE\tHITS\tAGE\tEXPIRES")
		for _, en := range entries {
			exp := "never"
			if en.ExpiresAt != nil {
				exp = time.Until(*en.ExpiresAt).Round(time.Second).String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", en.Tool, truncate(string(en.Args), 50), sizeIEC(int64(en.Size)), en.Hits, time.Since(en.CreatedAt).Round(time.Second), exp)
		}
		return tw.Flush()
	})
}

// cacheStatsAction is the action of `nexus cache stats`.
func cacheStatsAction(c *cli.Context) error {
	return withMemory(c, func(e *env, mem *memory.Memory) error {
		st, err := mem.Stats(c.Context)
		if err != nil {
			return err
		}
		refusals, trailErr := e.refusalCounts(c)
		if c.Bool("json") {
			return printJSON(e.stdout, struct {
				memory.Stats
				Refusals []audit.Count `json:"refusals"`
			}{st, refusals})
		}
		defer e.printRefusals(refusals, trailErr)
		if st.Disabled != "" {
			fmt.Fprintf(e.stdout, "memory is stepping aside: %s\n", st.Disabled)
		}
		fmt.Fprintf(e.stdout, "%s: %s, %s (bounds %d entries, %s)\n", st.Path, count(st.Entries, "entry", "entries"), sizeIEC(st.Bytes), st.MaxEntries, sizeIEC(st.MaxBytes))
		fmt.Fprintf(e.stdout, "hits %d (semantic %d), misses %d, bypasses %d, coalesced %d, time saved %s\n", st.Hits, st.SemanticHits, st.Misses, st.Bypasses, st.Coalesced, time.Duration(st.SavedMS)*time.Millisecond)
		fmt.Fprintf(e.stdout, "similarity: gray zone accepted %d, rejected %d, unverified %d; guard refusals %d; embedder failures %d\n",
			st.GrayAccepted, st.GrayRejected, st.GrayUnverified, st.GuardRejections, st.EmbedFailures)
		if len(st.Tools) == 0 {
			return nil
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOOL\tTTL\tFROM\tHITS\tSEMANTIC\tMISSES\tBYPASSES\tSAVED")
		for _, t := range st.Tools {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", t.Tool, t.TTL, orDash(t.TTLFrom), t.Hits, t.SemanticHits, t.Misses, t.Bypasses, time.Duration(t.SavedMS)*time.Millisecond)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		printMeasured(e, st.Measured)
		return nil
	})
}

// cacheTTL is `nexus cache ttl`: it edits the lifetimes file and has the running
// gateways reload.
func cacheTTL(c *cli.Context) error {
	if n := c.NArg(); n != 0 && n != 2 {
		return usageError("cache ttl takes a NAME and a DURATION (e.g. nexus cache ttl files 5m), or nothing to list")
	}
	e, cfg, err := loadEnv(c, slog.LevelWarn)
	if err != nil {
		return err
	}
	path := config.CommandTTLFile(e.home)
	set, err := config.ReadCommandTTL(path)
	if err != nil {
		return err
	}
	if c.NArg() == 0 {
		if c.Bool("json") {
			return printJSON(e.stdout, set)
		}
		if len(set) == 0 {
			fmt.Fprintln(e.stdout, "no ttl set with nexus cache ttl (nexus list-tools shows every tool's ttl and where it came from)")
			return nil
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PATTERN\tTTL")
		for _, p := range slices.Sorted(maps.Keys(set)) {
			fmt.Fprintf(tw, "%s\t%s\n", p, set[p])
		}
		return tw.Flush()
	}
	name, value := c.Args().Get(0), strings.TrimSpace(c.Args().Get(1))
	pattern := name
	if !strings.Contains(name, ".") && name != "*" {
		pattern = name + ".*" // a server: every tool of it
	}
	if value == "off" {
		if _, ok := set[pattern]; !ok {
			return usageError(fmt.Sprintf("no ttl for %s was set with nexus cache ttl (nexus cache ttl lists them)", pattern))
		}
		delete(set, pattern)
	} else {
		set[pattern] = value
		if _, err := config.ParseCommandTTL(map[string]string{pattern: value}); err != nil {
			return usageError(err.Error())
		}
	}
	if value != "off" && !c.Bool("later") {
		if err := knownServer(cfg, pattern, "--later"); err != nil {
			return err
		}
	}
	if err := config.WriteCommandTTL(path, set); err != nil {
		return err
	}
	if value == "off" {
		fmt.Fprintf(e.stdout, "removed the ttl of %s\n", pattern)
	} else {
		fmt.Fprintf(e.stdout, "answers of %s are kept for %s\n", pattern, value)
	}
	if raw, ok := cfg.TTL[pattern]; ok {
		fmt.Fprintf(e.stdout, "note: the config sets %s for %s, which wins; edit or remove it there\n", raw, pattern)
	}
	e.confirmRunning(c.Context)
	return nil
}

// printMeasured prints what verification measured per tool: answers
// checked against the child, how many differed, and the rate with its 95%
// interval, for similarity answers (false hits) and exact ones (stale).
func printMeasured(e *env, ms []memory.Measured) {
	if len(ms) == 0 {
		return
	}
	fmt.Fprintln(e.stdout, "verified against the child (rate, 95% interval):")
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tSIMILARITY CHECKED\tFALSE HITS\tFALSE-HIT RATE\tEXACT CHECKED\tSTALE\tSTALE RATE\tSIMILARITY HITS")
	for _, m := range ms {
		state := "on"
		if m.Blocked {
			state = "off: over memory.maxFalseHitRate"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%d\t%s\t%s\n", m.Tool, m.SemanticChecks, m.FalseHits, interval(m.FalseHitRate, m.SemanticChecks),
			m.ExactChecks, m.Stale, interval(m.StaleRate, m.ExactChecks), state)
	}
	_ = tw.Flush()
}

// interval prints a rate and its interval: "2.0% (0.4-10.5%)", "-" with
// nothing checked.
func interval(i memory.Interval, n int64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%% (%.1f-%.1f%%)", 100*i.Rate, 100*i.Low, 100*i.High)
}

// orDash is s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// sizeIEC writes a byte count for people: "256 MiB", "1.5 KiB", "512 B" (--json
// keeps the raw numbers), as the status page does.
func sizeIEC(n int64) string { return size.IEC(n) }

// refusalCounts are the refusals the audit trail holds, per agent and tool: with
// the postgres backend, those of every replica.
func (e *env) refusalCounts(c *cli.Context) ([]audit.Count, error) {
	cfg, err := e.load()
	if err != nil {
		return nil, err
	}
	store, err := run.OpenAuditToRead(c.Context, cfg, e.runEnv(c.Context, cfg))
	if err != nil {
		return nil, err
	}
	defer store.Close()
	counts, err := store.Refusals(c.Context, time.Time{})
	if counts == nil {
		counts = []audit.Count{}
	}
	return counts, err
}

// printRefusals ends `cache stats` with the refusal counts.
func (e *env) printRefusals(counts []audit.Count, err error) {
	switch {
	case errors.Is(err, run.ErrNoTrail):
		fmt.Fprintln(e.stdout, "refusals: none recorded (no audit trail yet)")
		return
	case err != nil:
		fmt.Fprintf(e.stdout, "refusals: the audit trail could not be read: %v\n", err)
		return
	}
	var total int64
	for _, n := range counts {
		total += n.N
	}
	fmt.Fprintf(e.stdout, "refusals (audit trail): %d\n", total)
	if len(counts) == 0 {
		return
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tTOOL\tREFUSALS")
	for _, n := range counts {
		fmt.Fprintf(tw, "%s\t%s\t%d\n", n.Agent, n.Tool, n.N)
	}
	_ = tw.Flush()
}
