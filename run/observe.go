package run

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/nexus-mcp/nexus/aggregation"
	"github.com/nexus-mcp/nexus/audit"
	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/pins"
	"github.com/nexus-mcp/nexus/status"
	"github.com/nexus-mcp/nexus/telemetry"
)

// observation is what a serving gateway is watched with: its metrics, its audit
// trail and its traces. It is the gateway's one Observer: each finished call is
// counted and, when it is a refusal or may have changed something, queued for the
// trail. Close flushes and stops all three, after the gateway is closed.
type observation struct {
	metrics *telemetry.Metrics // nil when no one can scrape them
	store   *audit.Store       // nil when the trail is off or could not be opened
	trail   *audit.Writer
	tracing *telemetry.Tracing // nil when tracing is off
	// timeline is the last hour of calls, minute by minute, for the console.
	timeline *telemetry.Timeline
	// recent are the latest decisions, every one, for the console's trail view.
	recent *audit.Recent
	// export is audit.export's file, nil without one.
	export *audit.Exporter
	// logs sends the same entries as OpenTelemetry log records where tracing
	// is configured; nil otherwise.
	logs   *telemetry.AuditLogs
	redact func([]byte) []byte
	// text redacts what people and scrapers read: the status page, metric labels.
	text func(string) string
	// cfg is the config in force (it changes on reload), for audit.arguments.
	cfg func() *config.Config
	// home is NEXUS_HOME, where the console's approvals write the pin file.
	home string
}

// observe builds what cfg and the command ask for. Nothing here may stop the
// gateway from serving: a trail or a collector that cannot be reached is logged
// and the gateway runs without it.
func observe(ctx context.Context, cfg *config.Config, e Env, metrics bool) *observation {
	red := e.redactor()
	o := &observation{redact: red.JSON, text: red.String, cfg: func() *config.Config { return cfg },
		timeline: telemetry.NewTimeline(), recent: audit.NewRecent(recentEntries), home: e.Home}
	if x := cfg.Audit.Export; x.Path != "" {
		path := x.Path
		if !filepath.IsAbs(path) {
			path = filepath.Join(e.Home, path)
		}
		maxBytes, keep := x.MaxBytes, x.Keep
		if maxBytes == 0 {
			maxBytes = config.DefaultAuditExportMaxBytes
		}
		if keep == 0 {
			keep = config.DefaultAuditExportKeep
		}
		if ex, err := audit.NewExporter(path, maxBytes, keep, e.Logger); err != nil {
			e.Logger.Warn("the audit export is off for this run", "err", err)
		} else {
			o.export = ex
		}
	}
	if metrics {
		o.metrics = telemetry.NewMetrics(o.text)
	}
	if cfg.Audit.On() {
		store, err := OpenAudit(ctx, cfg, e)
		if err != nil {
			e.Logger.Warn("the audit trail is off for this run", "err", err)
		} else {
			o.store = store
			o.trail = audit.NewWriter(store, audit.WriterOptions{Logger: e.Logger, MaxAge: cfg.Audit.Age(), MaxBytes: cfg.Audit.Bytes()})
		}
	}
	if cfg.Audit.On() {
		if l, err := telemetry.NewAuditLogs(cfg.Tracing.Endpoint, aggregation.Version, e.Logger); err != nil {
			e.Logger.Warn("audit log records are off for this run", "err", err)
		} else if l != nil {
			o.logs = l
			e.Logger.Info("audit: records are also sent as OpenTelemetry logs", "url", l.URL())
		}
	}
	tr, err := telemetry.NewTracing(ctx, cfg.Tracing.Endpoint, aggregation.Version)
	if err != nil {
		e.Logger.Warn("tracing is off for this run", "err", err)
	} else if tr != nil {
		o.tracing = tr
		e.Logger.Info("tracing: spans are sent with OTLP/HTTP", "endpoint", tr.Endpoint)
	}
	return o
}

// OpenAudit opens the trail where the config keeps shared state: the PostgreSQL
// database of the postgres memory backend (shared by replicas), else audit.db in
// e.Home.
func OpenAudit(ctx context.Context, cfg *config.Config, e Env) (*audit.Store, error) {
	if cfg.Memory.Backend == config.BackendPostgres {
		dsn, err := e.resolve(cfg.Memory.DSN)
		if err != nil {
			return nil, fmt.Errorf("memory.dsn: %w", err)
		}
		return audit.OpenPostgres(dsn)
	}
	if err := os.MkdirAll(e.Home, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", e.Home, err)
	}
	return audit.OpenSQLite(ctx, filepath.Join(e.Home, "audit.db"))
}

// OpenAuditToRead opens the trail for `nexus audit` and `nexus cache stats`; a
// SQLite trail that was never written is ErrNoTrail, not created.
func OpenAuditToRead(ctx context.Context, cfg *config.Config, e Env) (*audit.Store, error) {
	if cfg.Memory.Backend != config.BackendPostgres {
		path := filepath.Join(e.Home, "audit.db")
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w at %s: nexus serve writes it when calls are refused or change something", ErrNoTrail, path)
		}
	}
	return OpenAudit(ctx, cfg, e)
}

// ErrNoTrail is OpenAuditToRead's error when no gateway wrote a trail yet.
var ErrNoTrail = errors.New("no audit trail yet")

// apply sets the observer and, when tracing is on, the tracer the gateway is built with.
func (o *observation) apply(opts *aggregation.Options) {
	opts.Observer = o
	if o.tracing != nil {
		opts.Tracer = o.tracing
	}
}

// attach reads the gateway's state for metrics, and its config in force.
func (o *observation) attach(g *aggregation.Gateway) {
	o.cfg = g.Config
	if o.metrics != nil {
		o.metrics.SetSource(g)
	}
}

// recentEntries bounds the decisions the console's trail view keeps in memory.
const recentEntries = 1000

// Observe is the gateway's observer: metrics and the timeline for every call;
// every decision to the console's recent entries and to audit.export; the
// trail for a refusal or an allowed call of a tool that is not read-only.
func (o *observation) Observe(c *aggregation.Call) {
	if o.metrics != nil {
		o.metrics.Observe(c)
	}
	o.timeline.Observe(c)
	if !c.Decided {
		return
	}
	kept := o.trail != nil && audited(c)
	// The arguments are redacted and hashed only for a record that is kept or
	// exported: the console's ring shows neither, and a read's path stays cheap.
	r := o.record(c, kept || o.export != nil || o.logs != nil)
	e := r.Entry()
	if o.export != nil {
		o.export.Add(e)
	}
	if o.logs != nil {
		o.logs.Add(e)
	}
	e.Arguments = nil // the console shows the hash: the ring holds no arguments
	o.recent.Add(e)
	if kept {
		o.trail.Add(r)
	}
}

// record is c as the trail keeps it. Every text a child or a client chose
// passes the redactor; the arguments are hashed after redaction, and kept only
// with audit.arguments "redacted". Nothing of the answer is kept but its
// outcome: a child's output and error text never reach a record.
func (o *observation) record(c *aggregation.Call, arguments bool) audit.Record {
	t := o.text
	r := audit.Record{Time: c.Start, Agent: t(c.Agent), Method: c.Method, Tool: t(c.Tool), Server: t(c.Server),
		Refused: c.Outcome == aggregation.OutcomeRefused, Rule: t(c.Rule), Origin: t(c.Origin), Source: t(c.Source),
		Outcome: string(c.Outcome), Duration: c.Duration, Child: c.Child, Memory: c.Memory,
		Session: t(c.Session), Client: t(c.Client), ClientVersion: t(c.ClientVersion), Revision: c.Revision}
	if r.Tool == "" {
		r.Tool = t(c.Requested)
	}
	if arguments && len(c.Arguments) > 0 {
		redacted := o.redact(append([]byte(nil), c.Arguments...))
		r.ArgumentsHash = audit.HashArguments(redacted)
		if o.cfg().Audit.Arguments.Redacted() {
			r.Arguments = redacted
		}
	}
	return r
}

// audited says which calls the trail keeps: every refusal, and every call the
// policy allowed to a tool that is not read-only. Read-only calls that were
// allowed are the bulk of the traffic and change nothing: metrics count them.
func audited(c *aggregation.Call) bool {
	if !c.Decided {
		return false
	}
	return !c.Allowed || !c.ReadOnly
}

// console is what the console shows and may change.
func (o *observation) console(g *aggregation.Gateway) status.Sources {
	src := status.Sources{Gateway: g, Redact: o.text, Timeline: o.timeline.Points, Day: o.timeline.Hours, Recent: o.recent.List,
		ClearMemory: func(ctx context.Context) (int64, error) { return g.Memory().Clear(ctx, "", "") },
		Approve: func(_ context.Context, server string) (int, error) {
			var done []pins.Change
			_, err := pins.Update(pins.Path(o.home), func(f *pins.File) (bool, error) {
				var err error
				done, err = pins.Approve(f, server, nil)
				return err == nil, err
			})
			return len(done), err
		}}
	if o.store != nil {
		src.Refusals = func(ctx context.Context, limit int) ([]audit.Record, error) {
			if err := o.trail.Flush(ctx); err != nil {
				return nil, err
			}
			return o.store.Query(ctx, audit.Filter{Refused: true, Limit: limit})
		}
	}
	return src
}

// actions are the console's state-changing handlers (behind GuardAction).
func (o *observation) actions(g *aggregation.Gateway) map[string]http.Handler {
	return status.Actions(o.console(g))
}

// pages are the read-only pages served beside /mcp, or on --metrics' address.
func (o *observation) pages(g *aggregation.Gateway) map[string]http.Handler {
	src := o.console(g)
	out := map[string]http.Handler{"/": status.Handler(src)}
	if o.metrics != nil {
		out["/metrics"] = o.metrics.Handler()
	}
	return out
}

// Close writes what the trail holds, then sends the spans left; the gateway is
// closed first, so no call is still being observed.
func (o *observation) Close() {
	if o.trail != nil {
		_ = o.trail.Close()
		_ = o.store.Close()
	}
	if o.export != nil {
		_ = o.export.Close()
	}
	if o.logs != nil {
		o.logs.Close()
	}
	if o.tracing != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = o.tracing.Shutdown(ctx)
	}
}
