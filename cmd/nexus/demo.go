package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nexus-mcp/nexus/aggregation"
	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/policy"
	"github.com/nexus-mcp/nexus/run"
)

func demoCommand() *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "run the gateway on the built-in sample servers and show what it does",
		Description: "In a throw-away NEXUS_HOME, configures the sample code-kg and doc-kg servers as\n" +
			"children, then shows the merged manifest, read calls, a mutating call refused by\n" +
			"the default policy, a repeated read answered from memory, and a paraphrase answered\n" +
			"from memory while a near-miss is forwarded.\n" +
			"With --serve, serves that demo gateway over stdio instead, for Claude Desktop.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "serve", Usage: "serve the demo gateway over stdio"},
			&cli.StringFlag{Name: "agent", Usage: "with --serve, the agent `NAME` of the client", EnvVars: []string{"NEXUS_AGENT"}},
		},
		Action: demoAction,
	}
}

// demoAction is the action of `nexus demo`.
func demoAction(c *cli.Context) error {
	level := slog.LevelError
	if c.Bool("serve") {
		level = slog.LevelInfo
	}
	e, err := newEnv(c, level)
	if err != nil {
		return err
	}
	home, err := os.MkdirTemp("", "nexus-demo-")
	if err != nil {
		return fmt.Errorf("creating the demo's NEXUS_HOME: %w", err)
	}
	defer os.RemoveAll(home)
	e.home, e.personal, e.layers = home, config.PersonalFile(home), []string{config.PersonalFile(home)}
	if err := writeDemoConfig(e.personal); err != nil {
		return err
	}
	if c.Bool("serve") {
		return e.serve(c.Context, run.ServeOptions{Agent: c.String("agent"), Gateway: run.Options{Observe: true}})
	}
	return e.demo(c.Context)
}

// writeDemoConfig points the demo at this very binary's sample servers, installed as
// from their catalog entries (which say how long their answers stay true).
func writeDemoConfig(path string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the nexus binary: %w", err)
	}
	return config.Edit(path, func(d config.Document) error {
		for _, name := range []string{"code-kg", "doc-kg"} {
			srv := &config.Server{Transport: config.TransportStdio, Command: self, Args: []string{"sample-server", name}, Catalog: name + "-sample"}
			if err := d.SetServer(name, srv); err != nil {
				return err
			}
		}
		return nil
	})
}

func (e *env) demo(ctx context.Context) error {
	w := e.stdout
	cfg, err := e.load()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Nexus demo: two sample MCP servers behind one gateway (NEXUS_HOME=%s)\n\n", e.home)
	started := time.Now()
	g, err := e.startGateway(ctx, cfg, run.Options{})
	if err != nil {
		return err
	}
	defer g.Close()
	for _, s := range g.Servers() {
		if !s.Up() {
			return fmt.Errorf("sample server %s did not start (%s): %s", s.Name, s.State, s.Error)
		}
	}

	tools := g.Tools()
	step(w, 1, fmt.Sprintf("The merged manifest: %d tools from %d servers, connected in %s", len(tools), len(g.Servers()), time.Since(started).Round(time.Millisecond)))
	fmt.Fprintln(w, "   Each tool is <server>.<tool>; clients see the wire name <server>__<tool>.")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "   TOOL\tWIRE NAME\tREAD-ONLY")
	for _, t := range tools {
		ro := "yes"
		if !t.Hints.ReadOnly {
			ro = "no"
		}
		fmt.Fprintf(tw, "   %s\t%s\t%s\n", t.Canonical, t.Wire, ro)
	}
	tw.Flush()

	step(w, 2, "Read calls, routed to the server that owns each tool")
	reads := []struct{ tool, args string }{
		{"code-kg.kg_latest_graph", `{"repository":"syl2042/Nexus-Pocket","branch":"main"}`},
		{"doc-kg.doc_kg_search", `{"query":"open bugs in the auth module","limit":3}`},
	}
	for _, r := range reads {
		if _, err := demoCall(ctx, w, g.Gateway, policy.Anonymous, r.tool, r.args); err != nil {
			return err
		}
	}

	step(w, 3, "Policy: with no policy configured, an agent may call read-only tools only")
	fmt.Fprintln(w, "   The mutating code-kg.kg_regenerate is refused before it reaches code-kg:")
	if _, err := demoCall(ctx, w, g.Gateway, policy.Anonymous, "code-kg.kg_regenerate",
		`{"repository":"syl2042/Nexus-Pocket","branch":"main","dry_run":false,"confirmed_by_sr":true}`); err != nil {
		return err
	}

	step(w, 4, "Memory: a repeated read is answered without calling the child")
	args := `{"query":"deployment checklist for staging","limit":3}`
	for i := 0; i < 2; i++ {
		if _, err := demoCall(ctx, w, g.Gateway, policy.Anonymous, "doc-kg.doc_kg_search", args); err != nil {
			return err
		}
	}

	step(w, 5, "Similarity: a paraphrase is answered from memory, a near-miss is not")
	fmt.Fprintln(w, "   The same request in other words is served the stored answer, with the rewrites that make it one:")
	if _, err := demoCall(ctx, w, g.Gateway, policy.Anonymous, "doc-kg.doc_kg_search",
		`{"query":"staging deployment checklist","limit":3}`); err != nil {
		return err
	}
	fmt.Fprintln(w, "   As alike in words, but about another environment, a word no rewrite removes: the child answers:")
	if _, err := demoCall(ctx, w, g.Gateway, policy.Anonymous, "doc-kg.doc_kg_search",
		`{"query":"deployment checklist for production","limit":3}`); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nNext: `nexus demo --serve` serves this gateway over stdio for Claude Desktop;\n"+
		"`nexus add NAME --command PROGRAM` adds your own servers; `nexus serve` runs them.\n")
	return nil
}

func step(w io.Writer, n int, title string) {
	fmt.Fprintf(w, "\n%d. %s\n", n, title)
}

// demoCall makes one call through the gateway's chain and prints it readably.
func demoCall(ctx context.Context, w io.Writer, g *aggregation.Gateway, agent, tool, args string) (json.RawMessage, error) {
	start := time.Now()
	raw, err := g.Call(ctx, agent, tool, json.RawMessage(args))
	took := time.Since(start)
	fmt.Fprintf(w, "   $ nexus call %s --args '%s'\n", tool, args)
	var rpcErr *aggregation.RPCError
	if errors.As(err, &rpcErr) {
		fmt.Fprintf(w, "     error %d: %s\n", rpcErr.Code, rpcErr.Message)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var res struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool           `json:"isError"`
		Meta    map[string]any `json:"_meta"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("decoding the result of %s: %w", tool, err)
	}
	text := ""
	if len(res.Content) > 0 {
		text = res.Content[0].Text
	}
	memo := ""
	if c, ok := res.Meta[memory.MetaKey].(map[string]any); ok {
		memo = fmt.Sprintf(", memory: %v", c["status"])
		if c["status"] == memory.StatusSemanticHit {
			memo += fmt.Sprintf(" (similarity %v to %q)", c["similarity"], c["matched"])
			if rw, ok := c["rewrites"].([]any); ok && len(rw) > 0 {
				memo += fmt.Sprintf(", rewrites: %v", strings.Trim(fmt.Sprint(rw...), "[]"))
			}
		}
	}
	verdict := "ok in %s"
	switch {
	case res.IsError && strings.Contains(text, "may not call"):
		verdict = "refused by the policy in %s, without reaching the server"
	case res.IsError:
		verdict = "the tool answered with an error, in %s"
	}
	fmt.Fprintf(w, "     "+verdict+"%s\n", took.Round(10*time.Microsecond), memo)
	fmt.Fprintf(w, "     %s\n", truncate(strings.ReplaceAll(text, "\n", " "), 300))
	return raw, nil
}
