package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/nexus-mcp/nexus/catalog"
	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/policy"
	"github.com/nexus-mcp/nexus/run"
	"github.com/nexus-mcp/nexus/secrets"
)

// env is what every command needs: where Nexus keeps its files, the config layers,
// and a logger on stderr.
type env struct {
	home     string
	personal string
	layers   []string
	log      *slog.Logger
	stdout   io.Writer
	stderr   io.Writer
	redactor *secrets.Redactor
	insecure bool // --insecure-file-store
	serving  bool // nexus serve: a long-running gateway whose log is the record
	project  bool // --project
	shared   int  // layers[:shared] are shared (--config) layers
	optional map[string]bool
	// edits is the file a command that writes config edits: its own --config
	// FILE (add, remove), else the personal file.
	edits string

	storeOnce sync.Once
	store     secrets.Store
	rawStore  secrets.Store // store without the redacting wrapper (see oauthVault)
	storeErr  error
	storeFile string // the path of the insecure file store, when that is the store opened
}

func newEnv(c *cli.Context, defaultLevel slog.Level) (*env, error) {
	home, err := config.Home()
	if err != nil {
		return nil, err
	}
	root := appContext(c) // global flags; add/remove have a --config of their own
	e := &env{home: home, personal: config.PersonalFile(home), stdout: c.App.Writer, stderr: c.App.ErrWriter,
		insecure: root.Bool("insecure-file-store"), project: root.Bool("project")}
	e.redactor, _ = c.App.Metadata[redactorKey].(*secrets.Redactor)
	if e.redactor == nil {
		e.redactor = secrets.NewRedactor()
	}
	for _, f := range configLayers(root.StringSlice("config"), os.Getenv("NEXUS_CONFIG")) {
		abs, err := filepath.Abs(f)
		if err != nil {
			return nil, fmt.Errorf("config layer %s: %w", f, err)
		}
		e.layers = append(e.layers, abs)
	}
	e.shared = len(e.layers)
	e.layers = append(e.layers, e.personal)
	if e.edits, err = e.editTarget(c); err != nil {
		return nil, err
	}
	level := defaultLevel
	if s := c.String("log-level"); s != "" {
		if err := level.UnmarshalText([]byte(s)); err != nil {
			return nil, usageError(fmt.Sprintf("--log-level %q: use debug, info, warn or error", s))
		}
	}
	e.log = slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	e.secureHome()
	return e, nil
}

// configLayers are the shared layers: those given with --config, else those
// NEXUS_CONFIG lists, separated like PATH (':', or ';' on Windows), since a list of
// files is what a variable holds. Empty elements are skipped.
func configLayers(flags []string, envList string) []string {
	if len(flags) > 0 {
		return flags
	}
	var out []string
	for _, f := range filepath.SplitList(envList) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// listSeparatorName names the OS's path-list separator for help texts.
const listSeparatorName = "the OS path-list separator (':', ';' on Windows)"

// secureHome makes an existing NEXUS_HOME private to the user, and says so when it
// was not: its files may hold tokens, cached results and the audit trail. A home
// that cannot be changed (another user's) is reported, not fatal: the command may
// only read it.
func (e *env) secureHome() {
	changed, err := config.SecureHome(e.home)
	for _, c := range changed {
		e.log.Warn("NEXUS_HOME: made private, it was open to other users", "path", c.Path,
			"from", fmt.Sprintf("%#o", c.From), "to", fmt.Sprintf("%#o", c.To))
	}
	if err != nil {
		e.log.Warn("NEXUS_HOME could not be made private to you", "err", err)
	}
}

// load reads the layers: the --config files (shared), the project's
// .nexus/config.json when opted in (shared), then the personal file.
// loadEnv is newEnv followed by loading the config layers: most commands start so.
func loadEnv(c *cli.Context, defaultLevel slog.Level) (*env, *config.Config, error) {
	e, err := newEnv(c, defaultLevel)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := e.load()
	if err != nil {
		return nil, nil, err
	}
	return e, cfg, nil
}

// appContext is the context of the app itself, where the global flags live (the
// lineage ends with a bare context that holds no flags).
func appContext(c *cli.Context) *cli.Context {
	lineage := c.Lineage()
	for i := len(lineage) - 1; i >= 0; i-- {
		if lineage[i].App != nil && lineage[i].Command == nil {
			return lineage[i]
		}
	}
	return c
}

func (e *env) load() (*config.Config, error) {
	layers := make([]config.Layer, 0, len(e.layers)+1)
	for i, p := range e.layers {
		layers = append(layers, config.Layer{Path: p, Shared: i < e.shared, Optional: p == e.personal || e.optional[p]})
	}
	if p := e.projectLayer(); p != "" {
		layers = append(layers[:e.shared:e.shared], append([]config.Layer{{Path: p, Shared: true}}, layers[e.shared:]...)...)
	}
	cfg, err := config.LoadLayers(layers)
	if err != nil {
		return nil, err
	}
	if err := e.addTTLSources(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// addTTLSources gives cfg the result lifetimes that live outside its files: those
// set with `nexus cache ttl`, and those of the catalog entries its servers were
// installed from.
func (e *env) addTTLSources(cfg *config.Config) error {
	path := config.CommandTTLFile(e.home)
	raw, err := config.ReadCommandTTL(path)
	if err != nil {
		return err
	}
	command, err := config.ParseCommandTTL(raw)
	if err != nil {
		return fmt.Errorf("%s: %w (it is written by nexus cache ttl; fix it with that command or delete the file)", path, err)
	}
	catalogTTL := map[string]memory.TTL{}
	var cat *catalog.Catalog
	for _, name := range cfg.ServerNames() {
		srv := cfg.Servers[name]
		if srv.Catalog == "" {
			continue
		}
		if cat == nil {
			if cat, err = e.loadCatalog(); err != nil {
				return err
			}
		}
		entry, ok := cat.Get(srv.Catalog)
		if !ok {
			return fmt.Errorf("%s: servers.%s.catalog: no catalog entry %q (nexus catalog lists them); remove the key to keep no suggested lifetimes", srv.Source, name, srv.Catalog)
		}
		life, err := entry.Lifetimes(name)
		if err != nil {
			return err
		}
		maps.Copy(catalogTTL, life)
	}
	cfg.SetTTLSources(command, catalogTTL)
	return nil
}

// projectLayer finds .nexus/config.json from the working directory upward, when the
// user opted in with --project or "projectLayers": true in the personal file. It is
// opt-in because a repository you clone should not silently start processes.
func (e *env) projectLayer() string {
	if !e.project {
		personal, err := config.Load([]string{e.personal}, map[string]bool{e.personal: true})
		if err != nil || !personal.ProjectLayers {
			return ""
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		p := filepath.Join(dir, ".nexus", "config.json")
		if _, err := os.Stat(p); err == nil && p != e.personal {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// editTarget is the layer a command edits: the command's own --config FILE (add
// and remove have one), else the personal file. A shared layer edited this way is
// also read, as a layer the command may be about to create.
func (e *env) editTarget(c *cli.Context) (string, error) {
	own := c.Command != nil && slices.ContainsFunc(c.Command.Flags, func(f cli.Flag) bool { return slices.Contains(f.Names(), "config") })
	f := ""
	if own {
		f = c.String("config")
	}
	if f == "" {
		return e.personal, nil
	}
	abs, err := filepath.Abs(f)
	if err != nil {
		return "", fmt.Errorf("--config %s: %w", f, err)
	}
	if !slices.Contains(e.layers, abs) {
		e.layers = slices.Insert(e.layers, e.shared, abs)
		e.shared++
	}
	e.optional = map[string]bool{abs: true}
	return abs, nil
}

// runEnv is the environment run builds a gateway of cfg with: this command's
// home, logger and redactor, its secret resolver and OAuth sessions.
func (e *env) runEnv(ctx context.Context, cfg *config.Config) run.Env {
	return run.Env{Home: e.home, Logger: e.log, Stderr: e.stderr, Redactor: e.redactor,
		Resolve: e.resolver(ctx, cfg), HTTPClient: e.oauthHTTP(ctx, cfg), BeforeStart: e.registerChildValues}
}

// startGateway builds the gateway of cfg and connects to its children, for a
// command that ends once it has its answer: a child that fails to start is
// reported once, not retried (serve keeps retrying; it does not come here).
func (e *env) startGateway(ctx context.Context, cfg *config.Config, opts run.Options) (*run.Runtime, error) {
	opts.OneAttempt = true
	env := e.runEnv(ctx, cfg)
	key, err := stateKey(os.Getenv("NEXUS_STATE_KEY"))
	if err != nil {
		return nil, err
	}
	env.StateKey = key
	return run.Build(ctx, cfg, env, opts)
}

// openMemory opens the memory cfg configures (run.OpenMemory).
func (e *env) openMemory(ctx context.Context, cfg *config.Config) (*memory.Memory, error) {
	return run.OpenMemory(ctx, cfg, e.runEnv(ctx, cfg))
}

// secrets opens the secret store once, when first needed: most commands never touch
// the keychain, and a locked desktop keychain should not slow them down.
func (e *env) secrets(ctx context.Context, cfg *config.Config) (secrets.Store, error) {
	e.storeOnce.Do(func() {
		if cfg == nil {
			cfg, _ = e.load()
		}
		insecure := e.insecure || (cfg != nil && cfg.Secrets.InsecureFileStore)
		var st secrets.Store
		st, e.storeErr = secrets.Open(ctx, secrets.Options{
			FilePath: filepath.Join(e.home, "secrets", "secrets.json"), InsecureFile: insecure, Logger: e.log, QuietFileStore: !e.serving})
		if e.storeErr == nil {
			if f, ok := st.(*secrets.File); ok {
				e.storeFile = f.Path
			}
			if insecure {
				if err := os.MkdirAll(filepath.Join(e.home, "secrets"), 0o700); err != nil {
					e.storeErr = fmt.Errorf("creating the secrets directory: %w", err)
					return
				}
			}
			e.store, e.rawStore = secrets.Redacting(st, e.redactor), st
		}
	})
	return e.store, e.storeErr
}

// storeName says where the store opened keeps values, for messages: the keychain or
// the file.
func (e *env) storeName() string {
	if e.storeFile != "" {
		return "the insecure file store " + e.storeFile
	}
	return "the OS keychain"
}

// resolver expands ${keyring:NAME} and ${env:NAME} in env and header values when a
// child starts; keychain values are registered with the redactor as they are read.
func (e *env) resolver(ctx context.Context, cfg *config.Config) func(string) (string, error) {
	return func(value string) (string, error) {
		var store secrets.Store
		if len(secrets.Refs(value)) > 0 {
			st, err := e.secrets(ctx, cfg)
			if err != nil {
				return "", err
			}
			store = st
		}
		v, _, err := secrets.Expand(ctx, value, store, os.LookupEnv)
		return v, err
	}
}

// registerChildValues registers with the redactor what a server is given from the
// environment or as a literal secret-looking value, before it starts (keychain values
// are registered as the resolver reads them).
func (e *env) registerChildValues(s *config.Server) {
	secrets.RegisterChildValues(e.redactor, s.Name, s.Env, s.Headers, os.LookupEnv)
}

// checkAgent refuses an agent name config could not hold: a refusal hint naming it
// would give a command that fails.
func checkAgent(name string) error {
	if name == "" || policy.ValidAgentName(name) {
		return nil
	}
	return usageError(fmt.Sprintf("agent name %q: use 1-32 lower-case letters, digits or '-', starting with a letter or digit (e.g. coder)", name))
}

// usageError is a mistake in how a command was called; it carries the fix.
func usageError(msg string) error { return cli.Exit(msg, 2) }

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// parsePairs reads K=V flags.
func parsePairs(flag string, values []string) (map[string]string, error) {
	if len(values) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range values {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageError(fmt.Sprintf("--%s %q: write KEY=VALUE", flag, kv))
		}
		out[k] = v
	}
	return out, nil
}

// stateKey decodes NEXUS_STATE_KEY, the key that seals the requestState of calls
// waiting for a 2026-07-28 client's input: replicas given the same one accept each
// other's. Unset, the gateway makes a random key of its own.
func stateKey(hexKey string) ([]byte, error) {
	if hexKey == "" {
		return nil, nil
	}
	key, err := hex.DecodeString(strings.TrimSpace(hexKey))
	if err != nil || len(key) < 32 {
		return nil, fmt.Errorf("NEXUS_STATE_KEY must be at least 64 hex digits (32 bytes), as `openssl rand -hex 32` prints")
	}
	return key, nil
}
