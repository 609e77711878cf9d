package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nexus-mcp/nexus/aggregation"
	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/run"
	"github.com/nexus-mcp/nexus/secrets"
)

// Check states.
const (
	checkOK   = "ok"
	checkWarn = "warn"
	checkFail = "fail"
)

// check is one finding of `nexus doctor`.
type check struct {
	Area   string   `json:"area"` // config, catalog, keychain, servers, memory
	Name   string   `json:"name"`
	Status string   `json:"status"`
	Detail string   `json:"detail"`
	Fix    string   `json:"fix,omitempty"`
	TookMS *int64   `json:"tookMs,omitempty"`
	Tools  *int     `json:"tools,omitempty"`
	Stderr []string `json:"stderr,omitempty"`
}

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "check the config layers, the keychain, every server and the memory database, and say what to fix",
		Description: "Each server is started on its own, as `nexus serve` would start it, and timed;\n" +
			"a server that fails shows its error and the last lines of its stderr.\n" +
			"Exits 1 when something is broken.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "give each server `DURATION` to start and list its tools"},
			&cli.BoolFlag{Name: "retry", Usage: "first make every running nexus serve of this NEXUS_HOME try its failed servers once more"},
		},
		Action: doctorAction,
	}
}

// doctorAction is the action of `nexus doctor`.
func doctorAction(c *cli.Context) error {
	e, err := newEnv(c, slog.LevelError)
	if err != nil {
		return err
	}
	var checks []check
	if c.Bool("retry") {
		checks = append(checks, e.retryRunning(c.Context))
	}
	checks = append(checks, e.doctor(c.Context, c.Duration("timeout"), !c.Bool("json") && isTerminal(os.Stderr))...)
	failed := 0
	for _, ch := range checks {
		if ch.Status == checkFail {
			failed++
		}
	}
	if c.Bool("json") {
		if err := printJSON(e.stdout, map[string]any{"ok": failed == 0, "problems": failed, "checks": checks}); err != nil {
			return err
		}
	} else {
		printChecks(e.stdout, checks)
		if failed == 0 {
			fmt.Fprintln(e.stdout, "\nno problems found")
		}
	}
	if failed > 0 {
		return cli.Exit(fmt.Sprintf("%d problem(s) found; see the fix lines above, then run nexus doctor again", failed), 1)
	}
	return nil
}

func printChecks(w io.Writer, checks []check) {
	area := ""
	for _, ch := range checks {
		if ch.Area != area {
			if area != "" {
				fmt.Fprintln(w)
			}
			area = ch.Area
			fmt.Fprintln(w, area)
		}
		label := map[string]string{checkOK: "ok  ", checkWarn: "WARN", checkFail: "FAIL"}[ch.Status]
		fmt.Fprintf(w, "  %s  %s: %s\n", label, ch.Name, oneLine(ch.Detail))
		if len(ch.Stderr) > 0 {
			fmt.Fprintln(w, "        stderr (last lines):")
			for _, l := range ch.Stderr {
				fmt.Fprintf(w, "          | %s\n", l)
			}
		}
		if ch.Fix != "" {
			fmt.Fprintf(w, "        fix: %s\n", oneLine(ch.Fix))
		}
	}
}

func (e *env) doctor(ctx context.Context, timeout time.Duration, progress bool) []check {
	var checks []check
	cfg, layerChecks := e.checkLayers()
	checks = append(checks, layerChecks...)
	checks = append(checks, e.checkCatalog())
	checks = append(checks, e.checkKeychain(ctx, cfg)...)
	if cfg == nil {
		checks = append(checks, check{Area: "servers", Name: "servers", Status: checkWarn,
			Detail: "not checked: the config does not load", Fix: "fix the config layer above first"})
		checks = append(checks, check{Area: "memory", Name: "memory", Status: checkWarn,
			Detail: "not checked: the config does not load", Fix: "fix the config layer above first"})
		return checks
	}
	checks = append(checks, e.checkServers(ctx, cfg, timeout, progress)...)
	checks = append(checks, e.checkPins(cfg))
	checks = append(checks, e.checkClients(cfg)...)
	checks = append(checks, e.checkMemory(ctx, cfg))
	return checks
}

// retryRunning makes every running gateway of this home reload, which makes each
// server that gave up try once more; a server that is not running then comes back
// without waiting for a call to one of its tools.
func (e *env) retryRunning(ctx context.Context) check {
	ch := check{Area: "running gateways", Name: "retry", Status: checkOK}
	n, err := run.ReloadRunning(ctx, e.home, e.log)
	switch {
	case err != nil:
		ch.Status, ch.Detail = checkWarn, err.Error()
		ch.Fix = "nexus list-servers --live shows what each server is doing"
	case n == 0:
		ch.Detail = "no running gateway to retry (or this platform has no signals: a call to a failed server's tool retries it)"
	default:
		ch.Detail = fmt.Sprintf("%d running gateway(s) asked their failed servers to try once more", n)
	}
	return ch
}

// checkLayers reads each layer, then the merged config, and names the layer that
// breaks it. It returns the merged config when it loads.
func (e *env) checkLayers() (*config.Config, []check) {
	layers := append([]string(nil), e.layers...)
	if p := e.projectLayer(); p != "" && !containsString(layers, p) {
		layers = append(layers[:e.shared:e.shared], append([]string{p}, layers[e.shared:]...)...)
	}
	var checks []check
	index := map[string]int{}
	for _, l := range layers {
		ch := check{Area: "config layers", Name: l, Status: checkOK, Detail: "valid JSON"}
		_, err := os.ReadFile(l)
		switch {
		case errors.Is(err, fs.ErrNotExist) && l == e.personal:
			ch.Detail = "not created yet (nexus add creates it)"
		case errors.Is(err, fs.ErrNotExist):
			ch.Status, ch.Detail = checkFail, "does not exist"
			ch.Fix = "fix the path given with --config or NEXUS_CONFIG, or create the file"
		case err != nil:
			ch.Status, ch.Detail = checkFail, err.Error()
			ch.Fix = "check the file's permissions"
		}
		index[l] = len(checks)
		checks = append(checks, ch)
	}
	cfg, err := e.load()
	if err == nil {
		for i := range checks {
			if checks[i].Status == checkOK && checks[i].Detail == "valid JSON" {
				checks[i].Detail = "valid"
			}
		}
		n := len(cfg.Servers)
		checks = append(checks, check{Area: "config layers", Name: "merged config", Status: checkOK,
			Detail: fmt.Sprintf("valid: %d server(s) from %d layer(s)", n, len(layers))})
		return cfg, checks
	}
	// Each problem once, as config validate and serve report it, under its layer.
	var problems []check
	bad := map[int]bool{} // layers whose problems stand in for their own line
	for _, p := range config.Problems(err) {
		ch := check{Area: "config layers", Name: "merged config", Status: checkFail, Detail: p.Error(),
			Fix: "fix it as the message says (nexus config validate lists every problem)"}
		var ce *config.Error
		if errors.As(p, &ce) {
			if i, ok := index[ce.File]; ok {
				bad[i] = true
				ch.Name, ch.Detail = ce.File, ce.Msg
				if ce.Line > 0 {
					ch.Name = fmt.Sprintf("%s:%d:%d", ce.File, ce.Line, ce.Col)
				}
				if ce.Key != "" {
					ch.Detail = ce.Key + ": " + ce.Msg
				}
			}
		}
		problems = append(problems, ch)
	}
	var out []check
	for i, ch := range checks {
		if !bad[i] {
			out = append(out, ch)
		}
	}
	return nil, append(out, problems...)
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (e *env) checkCatalog() check {
	cat, err := e.loadCatalog()
	if err != nil {
		ch := check{Area: "catalog", Name: "catalog", Status: checkFail, Detail: err.Error(), Fix: "fix or remove the catalog file named"}
		var ce *config.Error
		if errors.As(err, &ce) {
			ch.Name = ce.File
		}
		return ch
	}
	detail := fmt.Sprintf("%d entries", len(cat.Names()))
	if len(cat.Files) > 0 {
		detail += " (builtin + " + strings.Join(cat.Files, ", ") + ")"
	}
	return check{Area: "catalog", Name: "catalog", Status: checkOK, Detail: detail}
}

// checkKeychain probes the secret store and every ${keyring:NAME} the config uses.
func (e *env) checkKeychain(ctx context.Context, cfg *config.Config) []check {
	used := map[string][]string{}
	if cfg != nil {
		used = secretUses(cfg)
	}
	insecure := e.insecure || (cfg != nil && cfg.Secrets.InsecureFileStore)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	store, err := secrets.Open(pctx, secrets.Options{FilePath: filepath.Join(e.home, "secrets", "secrets.json"),
		InsecureFile: insecure, Logger: slog.New(slog.DiscardHandler)})
	ch := check{Area: "keychain", Name: "secret store", Status: checkOK}
	switch {
	case err != nil && len(used) > 0 && e.inFileStore(ctx, used):
		ch.Status, ch.Detail = checkFail, "the OS keychain is unavailable; the secrets the config uses are in the insecure file store, which this run was not told to use"
		ch.Fix = e.fileStoreFix()
		return []check{ch}
	case err != nil && len(used) > 0:
		ch.Status, ch.Detail = checkFail, firstLine(err.Error())
		ch.Fix = fmt.Sprintf("the config uses %d keychain secret(s), which cannot be read: %s", len(used), fixPart(err.Error()))
		return []check{ch}
	case err != nil:
		ch.Status, ch.Detail = checkWarn, firstLine(err.Error())+" (no server uses a keychain secret yet)"
		ch.Fix = "needed before `nexus add --env` or a catalog entry with a secret: " + fixPart(err.Error())
		return []check{ch}
	}
	if _, isFile := store.(*secrets.File); isFile {
		ch.Status = checkWarn
		ch.Detail = "the OS keychain is unavailable; secrets are in a plain file readable only by you (insecure file store)"
		ch.Fix = "unlock or install an OS keychain to keep secrets encrypted at rest"
	} else {
		ch.Detail = "the OS keychain answers"
	}
	checks := []check{ch}
	for _, name := range slices.Sorted(maps.Keys(used)) {
		_, err := store.Get(pctx, name)
		switch {
		case err == nil:
			continue
		case errors.Is(err, secrets.ErrNotFound):
			checks = append(checks, check{Area: "keychain", Name: name, Status: checkFail,
				Detail: "missing, used by " + strings.Join(used[name], ", "),
				Fix:    "store it with: nexus secrets set " + name})
		default:
			checks = append(checks, check{Area: "keychain", Name: name, Status: checkFail,
				Detail: "cannot be read: " + firstLine(err.Error()), Fix: fixPart(err.Error())})
		}
	}
	if len(used) > 0 && len(checks) == 1 {
		checks[0].Detail += fmt.Sprintf("; all %d secret(s) the config uses are there", len(used))
	}
	return checks
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// fixPart is the "To fix: ..." part of an error from the secrets package, or the error.
func fixPart(s string) string {
	if _, fix, ok := strings.Cut(s, "To fix: "); ok {
		return fix
	}
	if _, rest, ok := strings.Cut(s, "\n"); ok {
		return rest
	}
	return "see the message above"
}

// stderrCapture is a log handler that keeps what a lone child's gateway logs about
// its stderr, for the report.
type stderrCapture struct {
	mu    *sync.Mutex
	lines *[]string // stderr lines as the child wrote them
	tail  *string   // the stderr tail of the last failed start
}

func newStderrCapture() stderrCapture {
	return stderrCapture{mu: &sync.Mutex{}, lines: new([]string), tail: new(string)}
}

func (s stderrCapture) Enabled(context.Context, slog.Level) bool { return true }

func (s stderrCapture) Handle(_ context.Context, r slog.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if strings.HasPrefix(r.Message, "[") {
		if _, line, ok := strings.Cut(r.Message, "] "); ok {
			*s.lines = append(*s.lines, line)
			if len(*s.lines) > 20 {
				*s.lines = (*s.lines)[len(*s.lines)-20:]
			}
		}
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "stderr" && a.Value.String() != "" {
			*s.tail = a.Value.String()
		}
		return true
	})
	return nil
}

func (s stderrCapture) WithAttrs([]slog.Attr) slog.Handler { return s }
func (s stderrCapture) WithGroup(string) slog.Handler      { return s }

func (s stderrCapture) result() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if *s.tail != "" {
		return strings.Split(strings.TrimRight(*s.tail, "\n"), "\n")
	}
	return append([]string(nil), *s.lines...)
}

// checkServers starts each enabled server alone, in parallel, and times it.
func (e *env) checkServers(ctx context.Context, cfg *config.Config, timeout time.Duration, progress bool) []check {
	names := cfg.ServerNames()
	if len(names) == 0 {
		return []check{{Area: "servers", Name: "servers", Status: checkWarn, Detail: "none configured",
			Fix: "add one: nexus catalog list, then nexus add NAME"}}
	}
	out := make([]check, len(names))
	var enabled []string
	for _, s := range cfg.EnabledServers() {
		enabled = append(enabled, s.Name)
	}
	p := startProgress(e.stderr, progress, enabled)
	var wg sync.WaitGroup
	for i, name := range names {
		s := cfg.Servers[name]
		if s.Disabled {
			out[i] = check{Area: "servers", Name: name, Status: checkOK, Detail: "disabled (not started)"}
			continue
		}
		wg.Go(func() {
			out[i] = e.checkServer(ctx, cfg, s, timeout)
			p.settled(name)
		})
	}
	wg.Wait()
	p.finish(func(took time.Duration) string {
		return fmt.Sprintf("nexus: checked %d server(s) in %s", len(enabled), took.Round(time.Second/10))
	})
	return out
}

// checkServer starts s alone. What the report says of it (its error, its stderr)
// passes the redactor here, and again on the way out.
func (e *env) checkServer(ctx context.Context, cfg *config.Config, s *config.Server, timeout time.Duration) check {
	ch := e.startServer(ctx, cfg, s, timeout)
	ch.Detail, ch.Fix = e.redactor.String(ch.Detail), e.redactor.String(ch.Fix)
	for i, l := range ch.Stderr {
		ch.Stderr[i] = e.redactor.String(l)
	}
	return ch
}

func (e *env) startServer(ctx context.Context, cfg *config.Config, s *config.Server, timeout time.Duration) check {
	ch := check{Area: "servers", Name: s.Name}
	one := *cfg
	one.Servers = map[string]*config.Server{s.Name: s}
	capture := newStderrCapture()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	secrets.RegisterChildValues(e.redactor, s.Name, s.Env, s.Headers, os.LookupEnv)
	start := time.Now()
	g, err := aggregation.New(&one, aggregation.Options{Logger: slog.New(capture), Resolve: e.resolver(ctx, cfg), Redact: e.redactor.JSON, RedactText: e.redactor.String,
		HTTPClient: e.oauthHTTP(ctx, cfg)})
	if err != nil {
		ch.Status, ch.Detail = checkFail, err.Error()
		ch.Fix = "fix servers." + s.Name + " in " + s.Source
		return ch
	}
	err = g.Start(ctx)
	if err == nil {
		err = g.Ready(ctx)
	}
	took := time.Since(start)
	ms := took.Milliseconds()
	ch.TookMS = &ms
	var st aggregation.Status
	if all := g.Servers(); len(all) == 1 {
		st = all[0]
	}
	g.Close()
	ch.Stderr = capture.result()
	target := strings.Join(append([]string{s.Command}, s.Args...), " ")
	if s.Transport != config.TransportStdio {
		target = s.URL
	}
	switch {
	case err != nil && ctx.Err() != nil:
		ch.Status = checkFail
		ch.Detail = fmt.Sprintf("did not start and list its tools within %s", timeout)
		ch.Fix = fmt.Sprintf("check that %s answers MCP on %s; give it longer with --timeout, or disable it with \"disabled\": true in %s", target, s.Transport, s.Source)
	case err != nil:
		ch.Status, ch.Detail = checkFail, err.Error()
		ch.Fix = "fix servers." + s.Name + " in " + s.Source
	case st.State == aggregation.StateReady:
		n := st.Tools
		ch.Tools = &n
		ch.Status = checkOK
		ch.Detail = fmt.Sprintf("ready, %d tool(s) in %s", n, took.Round(time.Millisecond))
		if st.Protocol != "" {
			ch.Detail += fmt.Sprintf("; speaks %s: %s", st.Protocol, st.ProtocolWhy)
		}
		ch.Stderr = nil
		if n == 0 {
			ch.Status = checkWarn
			ch.Fix = "the server started but offers no tools; check its arguments and environment"
		}
	case st.State == aggregation.StateNeedsLogin:
		ch.Status, ch.Detail = checkFail, st.Error
		ch.Fix = "run nexus auth login " + s.Name
	case secretUnreadable(st.Error):
		ch.Status, ch.Detail = checkFail, "not started: "+firstLine(st.Error)
		ch.Fix = "a secret it needs cannot be read: see the keychain checks above"
		if fix := e.fileStoreFix(); fix != "" {
			ch.Fix = fix
		}
	default:
		ch.Status = checkFail
		state := string(st.State)
		if st.State == aggregation.StateRetrying || state == "" {
			state = "failed to start"
		}
		ch.Detail = fmt.Sprintf("%s after %s: %s", state, took.Round(time.Millisecond), st.Error)
		ch.Fix = serverFix(s, st.Error, target)
	}
	return ch
}

// serverFix says what to do about a server that does not start.
func serverFix(s *config.Server, errText, target string) string {
	where := fmt.Sprintf("servers.%s in %s", s.Name, s.Source)
	low := strings.ToLower(errText)
	switch {
	case strings.Contains(low, "${env:") || strings.Contains(low, "environment variable"):
		return "set the environment variable its config refers to in the environment nexus runs in, or store the value in the keychain (nexus secrets set NAME) and refer to it as ${keyring:NAME}"
	case strings.Contains(low, "keyring") || strings.Contains(low, "keychain") || strings.Contains(low, "secret"):
		return "a secret it needs cannot be read: see the keychain checks above (nexus secrets set NAME stores one)"
	case s.Transport == config.TransportStdio && (strings.Contains(low, "executable file not found") || strings.Contains(low, "no such file")):
		return fmt.Sprintf("the program %q was not found: install it, or fix the command in %s (use a full path: clients start nexus with a minimal PATH)", s.Command, where)
	case s.Transport == config.TransportStdio && strings.Contains(low, "permission denied"):
		return fmt.Sprintf("%q is not executable: chmod +x it, or fix the command in %s", s.Command, where)
	case s.Transport == config.TransportStdio:
		return fmt.Sprintf("run it by hand to see why it fails (%s), then fix %s, or disable it with \"disabled\": true", target, where)
	case strings.Contains(low, "401") || strings.Contains(low, "403") || strings.Contains(low, "unauthorized") || strings.Contains(low, "forbidden"):
		return fmt.Sprintf("the server refused the credentials: check the headers in %s and the token in the keychain", where)
	default:
		return fmt.Sprintf("check that %s is up and is an MCP %s endpoint, then fix %s", target, s.Transport, where)
	}
}

func (e *env) checkMemory(ctx context.Context, cfg *config.Config) check {
	ch := check{Area: "memory", Name: "memory", Status: checkOK}
	if !cfg.Memory.On() {
		ch.Detail = "off in the config"
		return ch
	}
	if cfg.Memory.Backend == config.BackendPostgres {
		return e.checkPostgresMemory(ctx, cfg, ch)
	}
	path := filepath.Join(e.home, "memory.db")
	ch.Name = path
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		ch.Detail = "not created yet (made when nexus first serves)"
		return ch
	}
	mem, err := e.openMemory(ctx, cfg)
	if err != nil {
		ch.Status, ch.Detail = checkFail, err.Error()
		ch.Fix = "fix the memory settings the message names"
		return ch
	}
	defer mem.Close()
	if err := mem.Err(); err != nil {
		ch.Status, ch.Detail = checkFail, "memory steps aside: "+err.Error()
		ch.Fix = fmt.Sprintf("calls still work, uncached; to start afresh, move the file aside (mv %s %s.broken) and nexus makes a new one", path, path)
		return ch
	}
	st, err := mem.Stats(ctx)
	if err != nil {
		ch.Status, ch.Detail = checkFail, "reading its stats: "+err.Error()
		ch.Fix = fmt.Sprintf("move the file aside (mv %s %s.broken) and nexus makes a new one", path, path)
		return ch
	}
	ch.Detail = fmt.Sprintf("%s, %s; %d hits, %d misses", count(st.Entries, "entry", "entries"), humanBytes(st.Bytes), st.Hits, st.Misses)
	return ch
}

// checkPostgresMemory checks that the shared PostgreSQL memory answers.
func (e *env) checkPostgresMemory(ctx context.Context, cfg *config.Config, ch check) check {
	ch.Name = "memory (postgres)"
	mem, err := e.openMemory(ctx, cfg)
	if err != nil {
		ch.Status, ch.Detail = checkFail, err.Error()
		ch.Fix = "set the variable or keychain item memory.dsn names"
		return ch
	}
	defer mem.Close()
	st, err := mem.Stats(ctx)
	if st.Path != "" {
		ch.Name = st.Path // the DSN without its password
	}
	if err != nil {
		ch.Status, ch.Detail = checkFail, "cannot use the database: "+err.Error()
		ch.Fix = "calls still work, uncached; check that the database is up and memory.dsn's host, user and database"
		return ch
	}
	ch.Detail = fmt.Sprintf("%s, %s; %d hits, %d misses (shared by every replica)", count(st.Entries, "entry", "entries"), humanBytes(st.Bytes), st.Hits, st.Misses)
	return ch
}

func humanBytes(n int64) string {
	units := []string{"B", "KB", "MB", "GB"}
	f := float64(n)
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", f, units[i])
}

// oneLine keeps a check on its own lines of the report: error texts may carry a
// "To fix:" paragraph of their own.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// secretUnreadable reports whether a child's start failed on reading a secret, before
// any process ran (so "failed to start after 0s" would mislead).
func secretUnreadable(errText string) bool {
	low := strings.ToLower(errText)
	return strings.Contains(low, "keychain unavailable") || strings.Contains(low, "keyring")
}

// inFileStore reports whether the insecure file store exists and holds every secret
// in used: the values are there, only the flag to read them is missing.
func (e *env) inFileStore(ctx context.Context, used map[string][]string) bool {
	f := &secrets.File{Path: filepath.Join(e.home, "secrets", "secrets.json")}
	names, err := f.Names(ctx)
	if err != nil || len(names) == 0 {
		return false
	}
	for name := range used {
		if !slices.Contains(names, name) {
			return false
		}
	}
	return true
}

// fileStoreFix is the advice when the OS keychain is unusable but the insecure file
// store exists: use it, rather than set up a keychain the values are not in.
func (e *env) fileStoreFix() string {
	p := filepath.Join(e.home, "secrets", "secrets.json")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return fmt.Sprintf("the values are in the insecure file store %s: pass --insecure-file-store, or set \"secrets\": {\"insecureFileStore\": true} in %s", p, e.personal)
}
