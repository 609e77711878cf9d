package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nexus-mcp/nexus/aggregation"
	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/run"
)

// progressDelay is how long a wait stays silent: most starts are over before a
// person notices, and a line flashing by is noise.
const progressDelay = 500 * time.Millisecond

// waitProgress tells a person at a terminal which servers are still connecting and
// for how long (npx may spend half a minute downloading one), on one line of stderr
// rewritten in place. A nil *waitProgress does nothing: for pipes, files and --json.
type waitProgress struct {
	w     io.Writer
	start time.Time
	stop  chan struct{}
	done  chan struct{}

	mu      sync.Mutex
	pending []string // servers still connecting, sorted
	shown   bool     // the wait lasted long enough to show a line
	onLine  bool     // a progress line is on the screen now
}

// startProgress starts reporting on servers when on is true (stderr is a terminal
// and the output is not for a program) and there is something to wait for.
func startProgress(w io.Writer, on bool, servers []string) *waitProgress {
	if !on || len(servers) == 0 {
		return nil
	}
	p := &waitProgress{w: w, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{}),
		pending: slices.Sorted(slices.Values(servers))}
	go p.run()
	return p
}

func (p *waitProgress) run() {
	defer close(p.done)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			if elapsed := time.Since(p.start); elapsed >= progressDelay && len(p.pending) > 0 {
				fmt.Fprint(p.w, "\r\033[K"+progressLine(p.pending, elapsed))
				p.shown, p.onLine = true, true
			}
			p.mu.Unlock()
		}
	}
}

// settled marks a server as no longer connecting (ready or failed).
func (p *waitProgress) settled(server string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = slices.DeleteFunc(p.pending, func(s string) bool { return s == server })
}

// write runs print with the progress line out of the way, so that a log line does
// not land in the middle of it; the next tick redraws it.
func (p *waitProgress) write(print func()) {
	if p == nil {
		print()
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked()
	print()
}

func (p *waitProgress) clearLocked() {
	if p.onLine {
		fmt.Fprint(p.w, "\r\033[K")
		p.onLine = false
	}
}

// finish stops the progress line and, when one was shown, replaces it with summary
// (given the total wait); it returns the wait.
func (p *waitProgress) finish(summary func(took time.Duration) string) {
	if p == nil {
		return
	}
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked()
	if p.shown {
		fmt.Fprintln(p.w, summary(time.Since(p.start)))
	}
}

// progressLine names the servers still connecting, at most a line's worth.
func progressLine(pending []string, elapsed time.Duration) string {
	const max = 4
	names := strings.Join(pending[:min(len(pending), max)], ", ")
	if len(pending) > max {
		names += fmt.Sprintf(" and %d more", len(pending)-max)
	}
	return fmt.Sprintf("nexus: waiting for %s to connect (%s)", names, elapsed.Truncate(time.Second/10))
}

// gatewaySummary is the one line after a gateway's start: how many servers are
// ready, and which are not, with their state.
func gatewaySummary(servers []aggregation.Status) func(time.Duration) string {
	return func(took time.Duration) string {
		ready := 0
		var not []string
		for _, s := range servers {
			if s.Up() {
				ready++
				continue
			}
			not = append(not, fmt.Sprintf("%s (%s)", s.Name, s.State))
		}
		line := fmt.Sprintf("nexus: %d of %d server(s) ready after %s", ready, len(servers), took.Round(time.Second/10))
		if len(not) > 0 {
			line += "; not ready: " + strings.Join(not, ", ")
		}
		return line
	}
}

// progressHandler passes log records on to the command's handler, keeping them
// clear of the progress line, and learns from the gateway's "child connected" and
// "child failed to start" records which servers have settled. It reads the log
// because the gateway reports no events; see the report for the hook this stands in
// for.
type progressHandler struct {
	inner  slog.Handler
	p      *waitProgress
	server string // the "server" attribute of a child's logger
}

// settledMessages are the gateway's log messages that end a server's first attempt.
var settledMessages = []string{"child connected", "child failed to start"}

func (h progressHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.inner.Enabled(ctx, l)
}

func (h progressHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.server != "" && slices.Contains(settledMessages, r.Message) {
		h.p.settled(h.server)
	}
	if !h.inner.Enabled(ctx, r.Level) {
		return nil
	}
	var err error
	h.p.write(func() { err = h.inner.Handle(ctx, r) })
	return err
}

func (h progressHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	for _, a := range attrs {
		if a.Key == "server" {
			h.server = a.Value.String()
		}
	}
	h.inner = h.inner.WithAttrs(attrs)
	return h
}

func (h progressHandler) WithGroup(name string) slog.Handler {
	h.inner = h.inner.WithGroup(name)
	return h
}

// startGatewayShowingProgress is startGateway that, when a person is waiting (stderr
// a terminal, and quiet unset: no --json), shows which servers are still connecting
// and ends with a one-line summary.
func (e *env) startGatewayShowingProgress(ctx context.Context, cfg *config.Config, opts run.Options, quiet bool) (*run.Runtime, error) {
	var names []string
	for _, s := range cfg.EnabledServers() {
		names = append(names, s.Name)
	}
	p := startProgress(e.stderr, !quiet && isTerminal(os.Stderr), names)
	if p != nil {
		e.log = slog.New(progressHandler{inner: e.log.Handler(), p: p})
	}
	g, err := e.startGateway(ctx, cfg, opts)
	if err != nil {
		p.finish(func(took time.Duration) string {
			return fmt.Sprintf("nexus: stopped waiting after %s", took.Round(time.Second/10))
		})
		return nil, err
	}
	p.finish(gatewaySummary(g.Servers()))
	return g, nil
}
