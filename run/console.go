package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nexus-mcp/nexus/aggregation"
	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/internal/proc"
)

// Every serving gateway, stdio included, publishes its console for `nexus
// console`: the pages and actions of --metrics' address (pagesMux), behind the
// same guards, on a Unix socket $NEXUS_HOME/run/<pid>.sock, with a record beside
// it, run/<pid>.json, that says which gateway it is. The socket is the user's
// alone: run/ is 0700 and the socket 0600, so no other user of the machine
// connects, and no web page can (a browser speaks TCP). `nexus console` finds the
// gateways (Running) and proxies a browser on loopback to one (ConsoleProxy),
// Host and Origin unchanged: the gateway's own checks (a token or a login for
// the pages; the token, the page's origin and its CSRF token for an action; a
// loopback Host against DNS rebinding) hold through the proxy as they do on
// --metrics' address.
//
// A clean exit removes the record and the socket. A gateway killed leaves them:
// Running removes them once their process is provably gone (ReloadRunning's
// test, proc.Start), and skips any whose socket does not answer.

// Published is the record a gateway keeps in run/<pid>.json while its console
// socket is open.
type Published struct {
	PID int `json:"pid"`
	// Start is when the process started, as proc.Start says; "" when unknown.
	Start   string    `json:"start,omitempty"`
	Started time.Time `json:"started"`
	Version string    `json:"version"`
	// Front is "stdio" or "http"; URL is the HTTP front's /mcp, Metrics the
	// --metrics address's status page.
	Front   string `json:"front"`
	URL     string `json:"url,omitempty"`
	Metrics string `json:"metrics,omitempty"`
	// Agent is the agent a stdio client was named with --agent, if any.
	Agent string `json:"agent,omitempty"`
	// Config are the config files the gateway read, first to last.
	Config []string `json:"config"`
	// Socket is the console's Unix socket.
	Socket string `json:"socket"`
}

// ConsoleSocket is where the gateway with pid publishes its console.
func ConsoleSocket(home string, pid int) string {
	return filepath.Join(home, "run", strconv.Itoa(pid)+".sock")
}

func consoleRecord(home string, pid int) string {
	return filepath.Join(home, "run", strconv.Itoa(pid)+".json")
}

// maxSocketPath is the longest Unix socket path every system takes (macOS's
// sun_path holds 104 bytes with the terminating NUL; Linux's 108).
const maxSocketPath = 103

// pagesMux serves the status page, /metrics, the console's actions and /login,
// each behind its guard: on --metrics' address and on the console socket.
func pagesMux(g *Runtime) *http.ServeMux {
	mux := http.NewServeMux()
	for pattern, h := range g.obs.pages(g.Gateway) {
		mux.Handle(pattern, g.Guard(h))
	}
	for pattern, h := range g.obs.actions(g.Gateway) {
		mux.Handle(pattern, g.GuardAction(h))
	}
	mux.Handle("/login", g.LoginPage())
	return mux
}

// localServers is the path, on the console socket only, where a command of the
// same user reads the gateway's servers as Status JSON (nexus list-servers
// --live). ConsoleProxy never forwards it: through the proxy it would be
// readable without the console's login.
const localServers = "/local/servers"

// socketMux is what the console socket serves: the pages of pagesMux, and the
// servers' status for the user's own commands, redacted as every page is.
func socketMux(g *Runtime, e Env) *http.ServeMux {
	mux := pagesMux(g)
	redact := e.redactor()
	mux.HandleFunc("GET "+localServers, func(w http.ResponseWriter, r *http.Request) {
		b, err := json.Marshal(g.Servers())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(redact.JSON(b))
	})
	return mux
}

// Servers asks the gateway that published rec for its servers' status.
func (rec Published) Servers(ctx context.Context) ([]aggregation.Status, error) {
	var d net.Dialer
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", rec.Socket)
		},
	}}
	ctx, cancel := context.WithTimeout(ctx, answerWait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://localhost"+localServers, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("asking the running gateway (pid %d) for its servers: %w", rec.PID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("asking the running gateway (pid %d) for its servers: %s", rec.PID, resp.Status)
	}
	var out []aggregation.Status
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&out); err != nil {
		return nil, fmt.Errorf("reading the running gateway's servers (pid %d): %w", rec.PID, err)
	}
	return out, nil
}

// publishConsole serves h on the console socket until ctx ends, and writes rec
// beside it; withdraw removes both. A console that cannot be published is
// logged: the gateway serves its client all the same.
func publishConsole(ctx context.Context, e Env, rec Published, h http.Handler, workers *sync.WaitGroup) (withdraw func()) {
	rec.PID = os.Getpid()
	sock, record := ConsoleSocket(e.Home, rec.PID), consoleRecord(e.Home, rec.PID)
	l, err := listenConsole(sock)
	if err != nil {
		e.Logger.Warn("the console is not published: nexus console cannot show this gateway", "err", err)
		return func() {}
	}
	rec.Socket = sock
	if start, err := proc.Start(rec.PID); err == nil {
		rec.Start = start
	}
	srv := aggregation.NewHTTPServer(h)
	shutdownWhenDone(ctx, srv, workers)
	workers.Go(func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			e.Logger.Error("the console socket stopped", "err", err)
		}
	})
	b, err := json.MarshalIndent(rec, "", "  ")
	if err == nil {
		err = config.WriteFileAtomic(record, append(b, '\n'), 0o600)
	}
	if err != nil {
		e.Logger.Warn("the console is not published: nexus console cannot find this gateway", "err", err)
	}
	return func() {
		_ = os.Remove(record)
		_ = os.Remove(sock)
	}
}

// listenConsole opens the console socket at path, in a directory only the user
// may enter, and makes it the user's alone. A socket left at path by a gateway
// that had this pid before is removed first.
func listenConsole(path string) (net.Listener, error) {
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("the socket path %s is longer than %d bytes: set NEXUS_HOME to a shorter path", path, maxSocketPath)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("making %s private: %w", dir, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing the stale socket %s: %w", path, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("making %s private: %w", path, err)
	}
	return l, nil
}

// Running lists the gateways of home whose console answers, oldest first. A
// record whose process is gone, or whose pid another process now has, is
// removed with its socket; one whose socket does not answer is skipped.
func Running(ctx context.Context, home string) ([]Published, error) {
	entries, err := os.ReadDir(filepath.Join(home, "run"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the running gateways: %w", err)
	}
	var out []Published
	for _, ent := range entries {
		name, ok := strings.CutSuffix(ent.Name(), ".json")
		pid, err := strconv.Atoi(name)
		if !ok || err != nil {
			continue
		}
		rec, err := readPublished(consoleRecord(home, pid))
		if err != nil || rec.PID != pid {
			continue
		}
		rec.Socket = ConsoleSocket(home, pid) // where it must be, whatever the record says
		if gone(pid, rec.Start) {
			_ = os.Remove(consoleRecord(home, pid))
			_ = os.Remove(rec.Socket)
			continue
		}
		if !answers(ctx, rec.Socket) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			continue
		}
		out = append(out, rec)
	}
	slices.SortFunc(out, func(a, b Published) int { return a.Started.Compare(b.Started) })
	return out, nil
}

func readPublished(path string) (Published, error) {
	var rec Published
	b, err := os.ReadFile(path)
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("%s: %w", path, err)
	}
	return rec, nil
}

// gone reports whether the process that published a record provably no longer
// runs: there is no process pid, or its start time is not the recorded one.
func gone(pid int, start string) bool {
	now, err := proc.Start(pid)
	switch {
	case errors.Is(err, os.ErrProcessDone):
		return true
	case err != nil || start == "":
		return false // cannot tell (no /proc): the socket says
	}
	return now != start
}

// answerWait bounds how long a console socket may take to accept.
const answerWait = 2 * time.Second

// answers reports whether a console socket accepts a connection.
func answers(ctx context.Context, sock string) bool {
	ctx, cancel := context.WithTimeout(ctx, answerWait)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// Answers reports whether the gateway that published rec still accepts
// connections on its console socket.
func (rec Published) Answers(ctx context.Context) bool {
	return answers(ctx, rec.Socket)
}

// ConsoleProxy serves the console of the gateway published at socket: each
// request goes to the socket with its Host and Origin as the browser sent them,
// since the gateway's guards compare the two and refuse a Host that is not
// loopback. No proxy of the environment is used.
func ConsoleProxy(socket string) http.Handler {
	var d net.Dialer
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = "nexus-console"
			pr.Out.Host = pr.In.Host
		},
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return d.DialContext(ctx, "unix", socket)
			},
			MaxIdleConns: 4, IdleConnTimeout: 30 * time.Second,
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, "502 bad gateway: the gateway does not answer (has it stopped? run nexus console again): "+err.Error(), http.StatusBadGateway)
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// What the socket serves the user's own commands stays on the socket.
		if p := path.Clean("/" + r.URL.Path); p == "/local" || strings.HasPrefix(p, "/local/") {
			http.NotFound(w, r)
			return
		}
		proxy.ServeHTTP(w, r)
	})
}
