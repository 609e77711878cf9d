package run

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/nexus-mcp/nexus/aggregation"
	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/memory/embedder"
	"github.com/nexus-mcp/nexus/memory/postgres"
	"github.com/nexus-mcp/nexus/memory/sqlite"
	"github.com/nexus-mcp/nexus/secrets"
	"github.com/nexus-mcp/nexus/upstream"
)

// Env is what a runtime is built with from the command that runs it: where
// Nexus keeps its files, how it logs, and the hooks into the secrets and
// OAuth sessions the command owns.
type Env struct {
	// Home is NEXUS_HOME: memory.db, audit.db and run/ live there.
	Home   string
	Logger *slog.Logger
	// Stderr receives the notices meant for a person ("nexus: listening
	// on ..."); nil: io.Discard.
	Stderr io.Writer
	// Redactor removes registered secrets from what is stored, logged or
	// shown; nil: a redactor of its own.
	Redactor *secrets.Redactor
	// Resolve expands the secret references of config values
	// (${keyring:NAME}, ${env:NAME}); nil: values are used as written.
	Resolve func(string) (string, error)
	// HTTPClient is the client of a remote child (its OAuth session);
	// nil: the transport's own.
	HTTPClient func(*config.Server) *http.Client
	// BeforeStart runs before a child starts (the command registers the
	// values it is given with the redactor); nil: nothing.
	BeforeStart func(*config.Server)
	// Load reads the config layers again, for Serve's reloads; Watched are
	// the files whose edits trigger one. Build does not use them.
	Load    func() (*config.Config, error)
	Watched []string
	// StateKey seals the requestState and task handles of 2026-07-28 clients
	// (aggregation.Options.StateKey); nil: a random key per process.
	StateKey []byte
}

func (e Env) redactor() *secrets.Redactor {
	if e.Redactor == nil {
		return secrets.NewRedactor()
	}
	return e.Redactor
}

func (e Env) stderr() io.Writer {
	if e.Stderr == nil {
		return io.Discard
	}
	return e.Stderr
}

func (e Env) resolve(v string) (string, error) {
	if e.Resolve == nil {
		return v, nil
	}
	return e.Resolve(v)
}

// Options select what a command's gateway runs with.
type Options struct {
	NoMemory  bool
	ToolNames string
	// MaxNameLength overrides names.maxLength (serve --max-name-length).
	MaxNameLength int
	// NoWait returns as soon as the children are starting: serve answers its client
	// at once.
	NoWait bool
	// WaitFor names the servers to wait for; none means every one.
	WaitFor []string
	// Observe keeps the audit trail and traces (observe.go); Metrics also counts
	// for a /metrics page.
	Observe, Metrics bool
	// OneAttempt: a child that fails to start is not retried
	// (aggregation.Options.OneAttempt); one-shot commands.
	OneAttempt bool
	// KeepLists keeps the lists of lazy servers in the home for the next run,
	// and starts a lazy server seen before only when a request needs it
	// (aggregation.Options.ListsDir): serve. A command that checks servers
	// (list-servers --live, doctor) starts them all.
	KeepLists bool
}

// Runtime is a started gateway and what must be closed with it.
type Runtime struct {
	*aggregation.Gateway
	mem *memory.Memory
	obs *observation // nil when not observed
}

// Close closes the gateway, then what observed it, then memory.
func (r *Runtime) Close() {
	if r.Gateway != nil {
		r.Gateway.Close()
	}
	if r.obs != nil {
		r.obs.Close()
	}
	if r.mem != nil {
		_ = r.mem.Close()
	}
}

// Build assembles the gateway of cfg (memory, tool search, observation),
// connects to its children and, unless opts.NoWait, waits until they made
// their first attempt (opts.WaitFor: those servers only).
func Build(ctx context.Context, cfg *config.Config, e Env, opts Options) (*Runtime, error) {
	r := &Runtime{}
	if !opts.NoMemory && cfg.Memory.On() {
		mem, err := OpenMemory(ctx, cfg, e)
		if err != nil {
			e.Logger.Warn("memory is off for this run", "err", err)
		} else {
			r.mem = mem
		}
	}
	guard, err := openPins(cfg, e)
	if err != nil {
		r.Close()
		return nil, err
	}
	red := e.redactor()
	gopts := aggregation.Options{Pins: guard, Logger: e.Logger, Memory: r.mem, ToolNames: opts.ToolNames, MaxNameLength: opts.MaxNameLength,
		Resolve: e.resolve, Redact: red.JSON, RedactText: red.String, BeforeStart: e.BeforeStart,
		HTTPClient: e.HTTPClient, StateKey: e.StateKey, OneAttempt: opts.OneAttempt}
	if e.Home != "" {
		// What a gateway killed before it could end its children left running
		// is ended now; this gateway's children are recorded in turn.
		gopts.Ledger = upstream.OpenLedger(filepath.Join(e.Home, "children"), e.Logger)
		if n := gopts.Ledger.Reap(); n > 0 {
			e.Logger.Warn("ended the children of a gateway that was killed", "groups", n)
		}
		if opts.KeepLists {
			gopts.ListsDir = filepath.Join(e.Home, "lists")
		}
	}
	if emb, err := searchEmbedder(cfg, e); err != nil {
		e.Logger.Warn("tool search ranks by words only", "err", err)
	} else if emb != nil {
		gopts.SearchEmbedder = emb
	}
	if opts.Observe {
		r.obs = observe(ctx, cfg, e, opts.Metrics)
		r.obs.apply(&gopts)
	}
	g, err := aggregation.New(cfg, gopts)
	if err != nil {
		r.Close()
		return nil, err
	}
	r.Gateway = g
	if r.obs != nil {
		r.obs.attach(g)
	}
	if err := g.Start(ctx); err != nil {
		r.Close()
		return nil, err
	}
	if !opts.NoWait {
		if err := g.Ready(ctx, opts.WaitFor...); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// OpenMemory opens the memory cfg configures: memory.db in e.Home, or the
// PostgreSQL database of memory.dsn, with its embedder and verifier.
func OpenMemory(ctx context.Context, cfg *config.Config, e Env) (*memory.Memory, error) {
	if err := os.MkdirAll(e.Home, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", e.Home, err)
	}
	red := e.redactor()
	opts := memory.Options{
		Backend:        sqlite.File(filepath.Join(e.Home, "memory.db")),
		MaxEntries:     cfg.Memory.MaxEntries,
		MaxBytes:       cfg.Memory.MaxBytes,
		MaxResultBytes: cfg.Memory.MaxResultBytes,
		Logger:         e.Logger,
		Redact:         red.JSON,
		RedactText:     red.String,
	}
	resolve := e.resolve
	if cfg.Memory.Backend == config.BackendPostgres {
		// Replicas share memory in PostgreSQL; the DSN is a reference like
		// every other secret, expanded here and never logged.
		dsn, err := resolve(cfg.Memory.DSN)
		if err != nil {
			return nil, fmt.Errorf("memory.dsn: %w", err)
		}
		if strings.TrimSpace(dsn) == "" {
			return nil, fmt.Errorf("memory.dsn: %q expands to nothing; set the variable it names", cfg.Memory.DSN)
		}
		opts.Backend = postgres.DSN(dsn)
	}
	endpoint := func(what string, ep config.Endpoint, dims int) (embedder.HTTPConfig, error) {
		return modelEndpoint(resolve, what, ep, dims)
	}
	if em := cfg.Memory.Embedder; em != nil {
		hc, err := endpoint("embedder", em.Endpoint, em.Dims)
		if err != nil {
			return nil, err
		}
		if opts.Embedder, err = embedder.New(embedder.Config{Provider: em.Provider, HTTPConfig: hc}); err != nil {
			return nil, fmt.Errorf("memory.embedder: %w", err)
		}
	}
	if v := cfg.Memory.Verifier; v != nil {
		hc, err := endpoint("verifier", *v, 0)
		if err != nil {
			return nil, err
		}
		verifier, err := embedder.NewChatVerifier(hc)
		if err != nil {
			return nil, fmt.Errorf("memory.verifier: %w", err)
		}
		opts.Verifier = verifier
	}
	if th := cfg.Memory.Thresholds; th != nil {
		opts.Thresholds = &memory.Thresholds{Serve: th.Serve, Verify: th.Verify}
	}
	mem, err := memory.Open(ctx, opts)
	if err != nil {
		return nil, err
	}
	mem.SetSettings(cfg.MemoryRules())
	return mem, nil
}

// modelEndpoint is the HTTP settings of memory's embedder or verifier, its key
// resolved.
func modelEndpoint(resolve func(string) (string, error), what string, ep config.Endpoint, dims int) (embedder.HTTPConfig, error) {
	key, err := resolve(ep.APIKey)
	if err != nil {
		return embedder.HTTPConfig{}, fmt.Errorf("memory.%s.apiKey: %w", what, err)
	}
	return embedder.HTTPConfig{BaseURL: ep.BaseURL, Model: ep.Model, APIKey: key, Dims: dims, Timeout: ep.Timeout.D}, nil
}

// searchEmbedder is the model memory.embedder names, for tool search to blend in;
// nil when there is none or it is the lexical one (tool search's own ranking
// already reads words).
func searchEmbedder(cfg *config.Config, e Env) (embedder.Embedder, error) {
	em := cfg.Memory.Embedder
	if em == nil || em.Provider == "" || strings.EqualFold(em.Provider, "lexical") {
		return nil, nil
	}
	hc, err := modelEndpoint(e.resolve, "embedder", em.Endpoint, em.Dims)
	if err != nil {
		return nil, err
	}
	emb, err := embedder.New(embedder.Config{Provider: em.Provider, HTTPConfig: hc})
	if err != nil {
		return nil, fmt.Errorf("memory.embedder: %w", err)
	}
	return emb, nil
}
