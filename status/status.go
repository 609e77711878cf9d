// Package status serves the gateway's console: its servers and their state, the
// last hour of calls, latency and errors as plots, what memory saved, what each
// agent's policy lets it call (grouped by server, with the deciding rule), and
// a filterable view of the recent audit trail. The page is HTML rendered on the
// server from an embedded html/template, its plots inline SVG drawn in Go:
// nothing to build, no script, no CDN; it works offline.
//
// The few actions (clearing memory, approving held tools) are forms that POST
// to Actions, behind aggregation.Gateway.GuardAction and a CSRF token bound to
// the credential the page was read with (console.go).
package status

import (
	"context"
	"embed"
	"fmt"
	"github.com/nexus-mcp/nexus/internal/size"
	"html/template"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nexus-mcp/nexus/aggregation"
	"github.com/nexus-mcp/nexus/audit"
	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/policy"
	"github.com/nexus-mcp/nexus/telemetry"
)

//go:embed page.html
var files embed.FS

// page is parsed once, when first shown rather than as every process starts
// (most never show it); a template is immutable once parsed and safe for
// concurrent use.
var page = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("page.html").Funcs(template.FuncMap{
		"ago":      func(t time.Time) string { return time.Since(t).Round(time.Second).String() },
		"outcomes": func() []string { return []string{"ok", "tool_error", "rpc_error", "refused", "timeout"} },
		"clock": func(s string) string { // an entry's RFC 3339 time as hh:mm:ss
			if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
				return t.UTC().Format("15:04:05")
			}
			return s
		},
	}).ParseFS(files, "page.html"))
})

// Sources are what the page shows.
type Sources struct {
	Gateway *aggregation.Gateway
	// Refusals returns the latest refusals, newest first; nil when no audit trail is
	// kept.
	Refusals func(ctx context.Context, limit int) ([]audit.Record, error)
	// Redact removes secret values from every text the page shows (the wire's
	// redactor: a child's handshake error may hold the key it was given, a tool
	// may be named after one); nil shows text as it is.
	Redact func(string) string
	// Timeline is the last hour of calls, minute by minute (the plots); nil
	// draws none.
	Timeline func() []telemetry.Point
	// Day is the last day, hour by hour; nil draws no day plot.
	Day func() []telemetry.Point
	// Recent returns the latest decisions m selects, newest first (the trail
	// view); nil shows none.
	Recent func(m audit.Match, limit int) []audit.Entry
	// ClearMemory empties memory; Approve approves the tools a server's pins
	// hold. nil offers no such action.
	ClearMemory func(ctx context.Context) (int64, error)
	Approve     func(ctx context.Context, server string) (int, error)
}

// Handler serves the page at "/" (any other path is 404). Guard it: it shows
// what the gateway does to whoever may see it (aggregation.Gateway.Guard).
func Handler(src Sources) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		data := build(r.Context(), src)
		data.filter(r, src)
		data.actions(r, src)
		if src.Redact != nil {
			data.redact(src.Redact)
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
		if err := page().Execute(w, data); err != nil {
			http.Error(w, "rendering the status page: "+err.Error(), http.StatusInternalServerError)
		}
	})
}

// view is the page's data.
type view struct {
	Version  string
	Now      time.Time
	Servers  []server
	Agents   []agent
	Memory   memoryView
	Refusals []audit.Record
	// RefusalsNote says why there are no refusals to show, when it is not that
	// there were none.
	RefusalsNote string
	// Plots are the last hour's; nil without a timeline.
	Plots *plots
	// Trail is the recent decisions the filter Match selects; Agents named
	// for the filter's choice; TrailOn says there is a trail view at all.
	Trail   []audit.Entry
	Match   audit.Match
	TrailOn bool
	// CSRF is the token the action forms carry, "" when the page was read
	// without a credential (status.public): then no action is offered.
	CSRF                 string
	CanClear, CanApprove bool
	// Done says what the last action did (from its redirect).
	Done string
}

type server struct {
	aggregation.Status
	ToolNames []string
}

type agent struct {
	Name    string
	Policy  string // the policy that applies: policy.agents.NAME, policy.default...
	Allowed []string
	Refused int
	// Groups are its tools by server, each with the rule that decided it.
	Groups []group
	// Mode is the agent's toolset; the tokens (estimated: bytes/4) are those of
	// its tools/list listing every tool, in search mode, and as sent now.
	Mode                                  string
	AllTokens, SearchTokens, ListedTokens int
}

// group is what an agent may call of one server.
type group struct {
	Server         string
	Allowed, Total int
	Tools          []decided
}

// decided is one tool and the rule that decided it for an agent.
type decided struct {
	Name    string
	Allowed bool
	Rule    string
}

type memoryView struct {
	On                                   bool
	Note                                 string
	Entries, Bytes                       int64
	Size                                 string // Bytes in the CLI's unit (size.IEC)
	Hits, SemanticHits, Misses, Bypasses int64
	HitRate                              string
	// Saved is the time the hits saved, as memory measured it.
	Saved string
	// Measured is what memory's verification (memory.verify) found, per
	// tool: false hits of similarity answers and stale exact answers.
	Measured []measuredView
}

// measuredView is one tool's verification figures, as the page shows them.
type measuredView struct {
	Tool             string
	FalseHits, Stale string // "k of n (low-high%)", or "-"
	Blocked          bool
	Distrusted       string
}

// rateOf writes k of n with the interval of their rate.
func rateOf(k, n int64, iv memory.Interval) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%d of %d (%.0f-%.0f%%)", k, n, 100*iv.Low, 100*iv.High)
}

func build(ctx context.Context, src Sources) view {
	g := src.Gateway
	v := view{Version: aggregation.Version, Now: time.Now()}
	tools := g.Tools()
	perServer := map[string][]string{}
	for _, t := range tools {
		perServer[t.Server] = append(perServer[t.Server], t.Exposed())
	}
	for _, st := range g.Servers() {
		v.Servers = append(v.Servers, server{Status: st, ToolNames: perServer[st.Name]})
	}

	cfg := g.Config()
	// Once an agent has a token, HTTP clients without one are refused: the
	// anonymous agent is listed only while it can still connect, or when the
	// policy names it.
	tokens := false
	for _, a := range cfg.Agents {
		tokens = tokens || a.TokenSHA256 != ""
	}
	_, namedAnonymous := cfg.Policy.Agents[policy.Anonymous]
	pol := g.Policy()
	for _, n := range cfg.AgentNames() {
		if n == policy.Anonymous && tokens && !namedAnonymous {
			continue
		}
		// The policy that applies to the agent, whatever it offers today.
		cost := g.ManifestCost(n)
		a := agent{Name: n, Policy: pol.Decide(n, policy.Tool{Name: "-.-"}).Origin, Mode: cost.Mode,
			AllTokens: aggregation.EstimateTokens(cost.AllBytes), SearchTokens: aggregation.EstimateTokens(cost.SearchBytes),
			ListedTokens: aggregation.EstimateTokens(cost.ListedBytes)}
		byServer := map[string]int{}
		for _, e := range g.Explain(n) {
			if e.Kind != "tool" {
				continue
			}
			if e.Allowed {
				a.Allowed = append(a.Allowed, e.Name)
			} else {
				a.Refused++
			}
			srv, _, _ := strings.Cut(e.Name, ".")
			i, ok := byServer[srv]
			if !ok {
				i = len(a.Groups)
				byServer[srv] = i
				a.Groups = append(a.Groups, group{Server: srv})
			}
			gr := &a.Groups[i]
			gr.Total++
			if e.Allowed {
				gr.Allowed++
			}
			gr.Tools = append(gr.Tools, decided{Name: e.Name, Allowed: e.Allowed, Rule: e.Rule})
		}
		v.Agents = append(v.Agents, a)
	}

	if mem := g.Memory(); mem == nil {
		v.Memory.Note = "memory is off"
	} else if st, err := mem.Stats(ctx); err != nil {
		v.Memory.Note = "memory stats: " + err.Error()
	} else {
		v.Memory = memoryView{On: true, Note: st.Disabled, Entries: st.Entries, Bytes: st.Bytes, Size: size.IEC(st.Bytes),
			Hits: st.Hits, SemanticHits: st.SemanticHits, Misses: st.Misses, Bypasses: st.Bypasses, HitRate: "no lookups yet",
			Saved: (time.Duration(st.SavedMS) * time.Millisecond).String()}
		if n := st.Hits + st.Misses; n > 0 {
			v.Memory.HitRate = fmt.Sprintf("%.1f%%", 100*float64(st.Hits)/float64(n))
		}
		for _, x := range st.Measured {
			v.Memory.Measured = append(v.Memory.Measured, measuredView{Tool: x.Tool,
				FalseHits: rateOf(x.FalseHits, x.SemanticChecks, x.FalseHitRate), Stale: rateOf(x.Stale, x.ExactChecks, x.StaleRate),
				Blocked: x.Blocked, Distrusted: strings.Join(x.Distrusted, ", ")})
		}
	}

	if src.Timeline != nil {
		p := drawPlots(src.Timeline())
		if src.Day != nil {
			p.Day, p.DayCalls = drawDay(src.Day())
		}
		v.Plots = &p
	}
	if src.Refusals == nil {
		v.RefusalsNote = "the audit trail is off"
	} else if recs, err := src.Refusals(ctx, 20); err != nil {
		v.RefusalsNote = "reading the audit trail: " + err.Error()
	} else {
		v.Refusals = recs
	}
	return v
}

// redact passes every text of the page through r. Each string is redacted whole,
// before html/template escapes it: escaping would change the spelling of a value
// holding <, >, &, ' or ", and the redactor would no longer see it.
func (v *view) redact(r func(string) string) {
	all := func(list []string) {
		for i := range list {
			list[i] = r(list[i])
		}
	}
	for i := range v.Servers {
		s := &v.Servers[i]
		s.Name, s.Transport, s.Target, s.Error, s.Source = r(s.Name), r(s.Transport), r(s.Target), r(s.Error), r(s.Source)
		all(s.ToolNames)
	}
	for i := range v.Agents {
		a := &v.Agents[i]
		a.Name, a.Policy = r(a.Name), r(a.Policy)
		all(a.Allowed)
		for j := range a.Groups {
			gr := &a.Groups[j]
			gr.Server = r(gr.Server)
			for k := range gr.Tools {
				gr.Tools[k].Name, gr.Tools[k].Rule = r(gr.Tools[k].Name), r(gr.Tools[k].Rule)
			}
		}
	}
	for i := range v.Trail {
		x := &v.Trail[i]
		x.Agent, x.ClientName, x.ClientVersion, x.Session = r(x.Agent), r(x.ClientName), r(x.ClientVersion), r(x.Session)
		x.Tool, x.Server, x.Rule, x.Policy, x.PolicySource = r(x.Tool), r(x.Server), r(x.Rule), r(x.Policy), r(x.PolicySource)
		x.Arguments = nil // the view shows the hash, never the arguments
	}
	v.Match.Agent, v.Match.Tool = r(v.Match.Agent), r(v.Match.Tool)
	v.Memory.Note = r(v.Memory.Note)
	for i := range v.Memory.Measured {
		v.Memory.Measured[i].Tool = r(v.Memory.Measured[i].Tool)
	}
	for i := range v.Refusals {
		x := &v.Refusals[i]
		x.Agent, x.Method, x.Tool, x.Server = r(x.Agent), r(x.Method), r(x.Tool), r(x.Server)
		x.Rule, x.Origin, x.Source = r(x.Rule), r(x.Origin), r(x.Source)
	}
	v.RefusalsNote = r(v.RefusalsNote)
}
