package upstream

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/internal/egress"
	"github.com/nexus-mcp/nexus/oauth"
)

// A Dialer makes the transport of a configured server's next connection: a
// Process for a stdio server, mcp-go's SSE or streamable HTTP client for a
// remote one. It holds what is the same for every server of a gateway, set
// once; Dial reads the server's entry as it stands at each connection, so a
// reloaded entry takes effect at the next one.
type Dialer struct {
	// Resolve expands the ${...} references of an entry's env and headers
	// (secrets among them); nil takes them as written.
	Resolve func(string) (string, error)
	// HTTPClient makes a remote server's HTTP client; nil, or a nil client,
	// is Go's default. It may carry OAuth (oauth.Transport).
	HTTPClient func(*config.Server) *http.Client
	// Local carries the requests to a server on this machine or over plain
	// http (LocalTransport), unless HTTPClient gave a transport of its own;
	// nil leaves them to the client's.
	Local *http.Transport
	// Headers adds headers to each request to a remote server, from the
	// request's context (the trace context); nil adds none.
	Headers func(context.Context) map[string]string
	// MaxMessage is the bound on one message from a stdio server
	// (Options.MaxMessage) as the config says now.
	MaxMessage func() int64
	// Redact removes secret values from a stdio server's stderr (Options.Redact).
	Redact func(string) string
	// Ledger records stdio servers' process groups (Options.Ledger).
	Ledger *Ledger
}

// Dial makes the transport of the next connection to s; log is the server's
// logger and tail keeps a stdio server's last stderr lines. Nothing is started
// or dialled yet: that is the transport's Start.
func (d *Dialer) Dial(s *config.Server, log *slog.Logger, tail *Tail) (Transport, error) {
	switch s.Transport {
	case config.TransportStdio:
		p, err := d.process(s, log, tail)
		if err != nil {
			return nil, err // not a nil *Process, which is a Transport that is not nil
		}
		return p, nil
	case config.TransportSSE, config.TransportStreamableHTTP:
		return d.remote(s, log)
	}
	return nil, fmt.Errorf("unknown transport %q", s.Transport)
}

// remote is the transport of a server reached over SSE or streamable HTTP:
// mcp-go's client of that kind, with the entry's headers resolved, the
// request's own (Headers) and the server's HTTP client.
func (d *Dialer) remote(s *config.Server, log *slog.Logger) (Transport, error) {
	headers, err := d.resolveAll(s, s.Headers)
	if err != nil {
		return nil, err
	}
	var t transport.Interface
	if s.Transport == config.TransportSSE {
		opts := []transport.ClientOption{transport.WithHeaders(headers), transport.WithSSELogger(log), transport.WithHTTPClient(d.client(s))}
		if d.Headers != nil {
			opts = append(opts, transport.WithHeaderFunc(d.Headers))
		}
		t, err = transport.NewSSE(s.URL, opts...)
	} else {
		opts := []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(headers), transport.WithContinuousListening(),
			transport.WithHTTPLogger(log), transport.WithHTTPBasicClient(d.client(s))}
		if d.Headers != nil {
			opts = append(opts, transport.WithHTTPHeaderFunc(d.Headers))
		}
		t, err = transport.NewStreamableHTTP(s.URL, opts...)
	}
	if err != nil {
		return nil, err
	}
	return Remote(t), nil
}

// process is a stdio server's transport. Its stderr goes to the log a line at a
// time, prefixed with the server's name.
func (d *Dialer) process(s *config.Server, log *slog.Logger, tail *Tail) (*Process, error) {
	env, err := d.environment(s)
	if err != nil {
		return nil, err
	}
	var limit int64
	if d.MaxMessage != nil {
		limit = d.MaxMessage()
	}
	cmd := exec.Command(s.Command, s.Args...)
	cmd.Env = env
	cmd.Dir = s.Cwd
	return NewProcess(cmd, Options{Name: s.Name, Logger: log, MaxMessage: limit, Tail: tail, Redact: d.Redact, Ledger: d.Ledger,
		StderrLine: func(line string) { log.Info("[" + s.Name + "] " + line) }}), nil
}

// environment is a stdio server's whole environment, made explicitly: PATH and
// HOME (and on Windows the few variables programs cannot start without), then
// the entry's env. The gateway's own environment may hold tokens meant for
// nobody else.
func (d *Dialer) environment(s *config.Server) ([]string, error) {
	keep := []string{"PATH", "HOME"}
	if runtime.GOOS == "windows" {
		keep = append(keep, "SYSTEMROOT", "SYSTEMDRIVE", "USERPROFILE", "APPDATA", "LOCALAPPDATA", "TEMP", "TMP", "PATHEXT", "COMSPEC")
	}
	var env []string
	for _, k := range keep {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	vals, err := d.resolveAll(s, s.Env)
	if err != nil {
		return nil, err
	}
	for k, v := range vals {
		env = append(env, k+"="+v)
	}
	return env, nil
}

// resolveAll expands the references of each value of m, an entry's env or
// headers.
func (d *Dialer) resolveAll(s *config.Server, m map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if d.Resolve == nil {
			out[k] = v
			continue
		}
		r, err := d.Resolve(v)
		if err != nil {
			return nil, fmt.Errorf("%s of server %s: %w", k, s.Name, err)
		}
		out[k] = r
	}
	return out, nil
}

// client is the HTTP client of a remote server's next connection:
// HTTPClient's, following redirects only within the server's origin. Go's own
// policy would resend the server's headers (its static secrets) to another
// origin or over plain http, and an OAuth transport adds the token on every
// hop.
//
// A server on this machine, or reached over plain http, goes through the local
// transport (Local), unless HTTPClient gave a transport of its own.
func (d *Dialer) client(s *config.Server) *http.Client {
	var hc *http.Client
	if d.HTTPClient != nil {
		hc = d.HTTPClient(s)
	}
	hc = egress.WithRedirects(hc, egress.SameOrigin)
	u, err := url.Parse(s.URL)
	if d.Local == nil || err != nil || u.Scheme != "http" && !loopback(u.Hostname()) {
		return hc
	}
	switch t := hc.Transport.(type) {
	case nil:
		hc.Transport = d.Local
	case *oauth.Transport:
		if t.Base == nil {
			authorized := *t
			authorized.Base = d.Local
			hc.Transport = &authorized
		}
	}
	return hc
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// LocalIdleTimeout is how long a connection to a server on this machine, or
// over plain http (a container beside the gateway, say), may wait idle to be
// used again. Node's HTTP servers close an idle connection after 5 s, as
// uvicorn does; one reused as the server closes it fails a request the server
// never read. Dropped sooner, it is never reused so late, and opening another
// costs one round trip at most. An https server elsewhere keeps Go's default
// (90 s): there a new connection costs a TLS handshake too.
const LocalIdleTimeout = 3 * time.Second

// LocalTransport is the HTTP transport of the servers on this machine or over
// plain http (Dialer.Local): Go's default one, with connections dropped before
// a server drops them.
func LocalTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.IdleConnTimeout = LocalIdleTimeout
	return tr
}
