package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/nexus-mcp/nexus/aggregation"
	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/policy"
	"github.com/nexus-mcp/nexus/run"
)

func listToolsCommand() *cli.Command {
	return &cli.Command{
		Name:  "list-tools",
		Usage: "connect to every server and list the merged tools",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
			&cli.StringFlag{Name: "agent", Usage: "show only what agent `NAME` may call"},
			&cli.StringFlag{Name: "tool-names", Usage: "wire name `STYLE`: wire or dotted"},
			&cli.IntFlag{Name: "max-name-length", Usage: "the longest wire name, `N` from 20 to 64, as serve --max-name-length", EnvVars: []string{"NEXUS_MAX_NAME_LENGTH"}},
			&cli.BoolFlag{Name: "cost", Usage: "show only what each agent's tools/list costs, in tokens (estimated: bytes/4 of its JSON), with and without search mode"},
		},
		Action: listToolsAction,
	}
}

// listToolsAction is the action of `nexus list-tools`.
func listToolsAction(c *cli.Context) error {
	if err := checkAgent(c.String("agent")); err != nil {
		return err
	}
	e, cfg, err := loadEnv(c, slog.LevelWarn)
	if err != nil {
		return err
	}
	g, err := e.startGatewayShowingProgress(c.Context, cfg, run.Options{NoMemory: true, ToolNames: c.String("tool-names"), MaxNameLength: c.Int("max-name-length")}, c.Bool("json"))
	if err != nil {
		return err
	}
	defer g.Close()
	down := notConnected(g.Servers())
	agents := cfg.AgentNames()
	if c.IsSet("agent") {
		agents = []string{c.String("agent")}
	}
	costs := make([]manifestCost, len(agents))
	for i, a := range agents {
		costs[i] = newManifestCost(g.ManifestCost(a))
	}
	if c.Bool("cost") {
		if c.Bool("json") {
			return errors.Join(printJSON(e.stdout, costs), down)
		}
		return errors.Join(printCosts(e.stdout, costs), down)
	}
	type row struct {
		Canonical   string `json:"canonical"`
		Wire        string `json:"wire"`
		Server      string `json:"server"`
		ReadOnly    bool   `json:"readOnly"`
		Destructive bool   `json:"destructive,omitempty"`
		// TTL is how long memory keeps the tool's answers ("none": not kept),
		// TTLFrom who said so: "config", "command" or "catalog".
		TTL         string `json:"ttl"`
		TTLFrom     string `json:"ttlFrom,omitempty"`
		Description string `json:"description,omitempty"`
	}
	rows := []row{}
	agent := c.String("agent")
	rules := cfg.MemoryRules()
	for _, t := range g.Tools() {
		if c.IsSet("agent") && !g.Policy().Decide(agent, policy.Tool{Name: t.Canonical, ReadOnly: t.Hints.ReadOnly, Destructive: t.Hints.Destructive}).Allowed {
			continue
		}
		ttl, from := memory.TTL{}, ""
		if mt := t.MemoryTool(); rules.Cacheable(mt) && cfg.Memory.On() {
			ttl, from = rules.Freshness(mt)
		}
		rows = append(rows, row{t.Canonical, t.Wire, t.Server, t.Hints.ReadOnly, t.Hints.Destructive, ttl.String(), from, t.Description()})
	}
	if c.Bool("json") {
		return errors.Join(printJSON(e.stdout, rows), down)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tWIRE NAME\tSERVER\tREAD-ONLY\tTTL\tDESCRIPTION")
	for _, r := range rows {
		ro := "no"
		if r.ReadOnly {
			ro = "yes"
		}
		ttl := r.TTL
		if r.TTLFrom != "" {
			ttl += " (" + r.TTLFrom + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Canonical, r.Wire, r.Server, ro, ttl, truncate(r.Description, 70))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout)
	return errors.Join(printCosts(e.stdout, costs), down)
}

// notConnected is list-tools' failure when servers did not connect: the tools of
// the others are listed, and the exit status says the list is not whole. Each
// server's own error is already in the log above, once.
func notConnected(servers []aggregation.Status) error {
	var down []string
	for _, s := range servers {
		if s.State != aggregation.StateReady {
			down = append(down, fmt.Sprintf("%s (%s)", s.Name, s.State))
		}
	}
	if len(down) == 0 {
		return nil
	}
	return cli.Exit(fmt.Sprintf("%d of %d servers did not connect and their tools are missing: %s; the lines above say why, `nexus doctor` checks each",
		len(down), len(servers), strings.Join(down, ", ")), 1)
}

// manifestCost is one agent's line of list-tools --cost: bytes and the tokens
// they are estimated at.
type manifestCost struct {
	aggregation.ManifestCost
	AllTokens    int `json:"allTokens"`
	SearchTokens int `json:"searchTokens"`
	ListedTokens int `json:"listedTokens"`
	// Saved is what search mode saves over listing every tool, in tokens per turn.
	Saved int `json:"savedTokens"`
}

func newManifestCost(c aggregation.ManifestCost) manifestCost {
	m := manifestCost{ManifestCost: c, AllTokens: aggregation.EstimateTokens(c.AllBytes),
		SearchTokens: aggregation.EstimateTokens(c.SearchBytes), ListedTokens: aggregation.EstimateTokens(c.ListedBytes)}
	m.Saved = max(m.AllTokens-m.SearchTokens, 0)
	return m
}

// printCosts is the table of what each agent's manifest costs.
func printCosts(w io.Writer, costs []manifestCost) error {
	fmt.Fprintln(w, "Manifest per agent, in tokens sent on every turn (estimated: bytes/4 of the JSON tools/list):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tMODE\tTOOLS\tSENT\tEVERY TOOL\tSEARCH MODE\tSEARCH SAVES")
	for _, c := range costs {
		saves := "-"
		if c.AllTokens > 0 {
			saves = fmt.Sprintf("%d (%.0f%%)", c.Saved, 100*float64(c.Saved)/float64(c.AllTokens))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\n", c.Agent, c.Mode, c.Tools, c.ListedTokens, c.AllTokens, c.SearchTokens, saves)
	}
	return tw.Flush()
}

func callCommand() *cli.Command {
	return &cli.Command{
		Name:      "call",
		Usage:     "call one tool through the gateway, as serve would",
		ArgsUsage: "TOOL",
		Description: "TOOL is a canonical name (code-kg.kg_latest_graph) or a wire name.\n" +
			"The call passes the same policy and memory steps as a client's call.\n" +
			"Exit status: 0 on success, 1 when the tool reports an error or the call is refused.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "args", Usage: "the tool's arguments as a JSON `OBJECT`, @FILE to read them from a file, or - to read stdin", Value: "{}"},
			&cli.StringFlag{Name: "agent", Usage: "call as agent `NAME`", EnvVars: []string{"NEXUS_AGENT"}, Value: policy.Anonymous},
			&cli.BoolFlag{Name: "no-memory", Usage: "do not answer from or write to memory"},
			&cli.BoolFlag{Name: "json", Usage: "print the raw result as JSON (the default when stdout is not a terminal)"},
		},
		Action: callAction,
	}
}

// callAction is the action of `nexus call`.
func callAction(c *cli.Context) error {
	if err := checkAgent(c.String("agent")); err != nil {
		return err
	}
	args, err := callArgs(c.String("args"), c.App.Reader)
	if err != nil {
		return err
	}
	e, cfg, err := loadEnv(c, slog.LevelWarn)
	if err != nil {
		return err
	}
	// A call waits only for the servers its tool may belong to. It is audited
	// like a client's call.
	g, err := e.startGatewayShowingProgress(c.Context, cfg, run.Options{NoMemory: c.Bool("no-memory"),
		WaitFor: aggregation.OwnersOf(cfg, c.Args().First()), Observe: true}, c.Bool("json"))
	if err != nil {
		return err
	}
	defer g.Close()
	raw, err := g.Call(c.Context, c.String("agent"), c.Args().First(), args)
	var rpcErr *aggregation.RPCError
	if errors.As(err, &rpcErr) {
		return cli.Exit(rpcErr.Message, 1)
	}
	if err != nil {
		return err
	}
	if c.Bool("json") || !isTerminal(os.Stdout) {
		var pretty any
		if err := json.Unmarshal(raw, &pretty); err != nil {
			return fmt.Errorf("decoding the result: %w", err)
		}
		if err := printJSON(e.stdout, pretty); err != nil {
			return err
		}
	} else if err := printResult(e.stdout, raw); err != nil {
		return err
	}
	var res struct {
		IsError bool `json:"isError"`
	}
	if json.Unmarshal(raw, &res) == nil && res.IsError {
		return cli.Exit("", 1)
	}
	return nil
}

// callArgs reads call's --args: a JSON object written inline, @FILE, or - for
// stdin. A mistake is answered with where it is and how to write it, not with the
// decoder's own words alone.
func callArgs(value string, stdin io.Reader) (json.RawMessage, error) {
	from := "--args"
	data := []byte(value)
	switch {
	case value == "-":
		from = "--args - (stdin)"
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("reading --args from stdin: %w", err)
		}
		data = b
	case strings.HasPrefix(value, "@"):
		from = "--args " + value
		b, err := os.ReadFile(value[1:])
		if err != nil {
			return nil, usageError(fmt.Sprintf("%s: cannot read the file (%v); give a JSON file's path after @", from, errors.Unwrap(err)))
		}
		data = b
	}
	const how = `write a JSON object, e.g. --args '{"message": "hi"}', --args @args.json or --args - (stdin)`
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		where := ""
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := position(data, se.Offset)
			where = fmt.Sprintf(" at line %d, column %d", line, col)
		}
		if len(bytes.TrimSpace(data)) == 0 {
			return nil, usageError(fmt.Sprintf("%s is empty; %s", from, how))
		}
		return nil, usageError(fmt.Sprintf("%s is not valid JSON%s (%s); %s", from, where, strings.TrimPrefix(err.Error(), "json: "), how))
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, usageError(fmt.Sprintf("%s must be a JSON object of the tool's arguments by name, not %s; %s", from, jsonKind(v), how))
	}
	return json.RawMessage(bytes.TrimSpace(data)), nil
}

// position is the line and column of byte offset off in data, both from 1.
func position(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - bytes.LastIndexByte(before, '\n')
	return line, max(col-1, 1)
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}
