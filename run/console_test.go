package run

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/aggregation"
	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/internal/proc"
)

// writeRecord writes a console record as a gateway with rec.PID would, and a
// file where its socket would be.
func writeRecord(t *testing.T, home string, rec Published) {
	t.Helper()
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := config.WriteFileAtomic(consoleRecord(home, rec.PID), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ConsoleSocket(home, rec.PID), nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestRunningSkipsTheDead: a record of a process that has exited, or of a pid
// that another process has now, is no running gateway and is removed with its
// socket (where the system tells a process's start time); a record whose
// socket does not answer, or that cannot be read, is skipped and left.
func TestRunningSkipsTheDead(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	exited := exec.Command(os.Args[0], "-test.run=^$")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	dead := exited.Process.Pid
	self := os.Getpid()
	start, startErr := proc.Start(self)
	if err := os.MkdirAll(filepath.Join(home, "run"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeRecord(t, home, Published{PID: dead, Start: "1", Front: "stdio"})
	// This process, as far as its pid goes: a gateway that had it before.
	writeRecord(t, home, Published{PID: self, Start: "not " + start, Front: "stdio"})
	if err := os.WriteFile(consoleRecord(home, 1), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}

	got, err := Running(context.Background(), home)
	if err != nil || len(got) != 0 {
		t.Fatalf("Running: %+v, %v; want none", got, err)
	}
	if startErr == nil { // the system tells start times: the stale records are gone
		for _, pid := range []int{dead, self} {
			if exists(consoleRecord(home, pid)) || exists(ConsoleSocket(home, pid)) {
				t.Errorf("the stale record of pid %d is left", pid)
			}
		}
	}
	if !exists(consoleRecord(home, 1)) {
		t.Error("an unreadable record was removed")
	}

	// This process's own record, with no socket listening: not running, not
	// removed (its process is alive).
	if startErr == nil {
		writeRecord(t, home, Published{PID: self, Start: start, Front: "stdio"})
		if got, err := Running(context.Background(), home); err != nil || len(got) != 0 {
			t.Fatalf("Running with a socket that does not answer: %+v, %v", got, err)
		}
		if !exists(consoleRecord(home, self)) {
			t.Error("the record of a live process was removed")
		}
	}
}

// TestServePublishesConsole: a stdio gateway publishes its console while it
// serves; Running finds it, its socket and directory are the user's alone, and
// through ConsoleProxy the gateway's guards hold as on --metrics' address (a
// login for the page, the browser's Host and Origin for an action). Once the
// gateway stops, nothing is published.
func TestServePublishesConsole(t *testing.T) {
	home := t.TempDir()
	token := "nxs_console_socket_token"
	cfg, path := writeTestConfig(t, home, map[string]any{"servers": map[string]any{"fx": map[string]any{"url": child(t)}},
		"agents": map[string]any{"coder": map[string]any{"tokenSha256": aggregation.TokenHash(token)}}})
	inR, inW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ServeOptions{Env: testEnv(t, home, path), Config: cfg, Agent: "coder", Stdin: inR, Stdout: io.Discard})
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		inW.Close()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Serve did not return after its context ended")
		}
	}
	t.Cleanup(stop)

	var rec Published
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got, err := Running(context.Background(), home)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 1 {
			rec = got[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway is not published: %+v", got)
		}
	}
	if rec.PID != os.Getpid() || rec.Front != "stdio" || rec.Agent != "coder" || len(rec.Config) != 1 || rec.Config[0] != path || rec.Socket != ConsoleSocket(home, os.Getpid()) {
		t.Errorf("the record: %+v", rec)
	}
	if runtime.GOOS != "windows" {
		for p, want := range map[string]os.FileMode{filepath.Dir(rec.Socket): 0o700, rec.Socket: 0o600} {
			if st, err := os.Stat(p); err != nil || st.Mode().Perm() != want {
				t.Errorf("%s: %v, %v; want mode %#o", p, st.Mode(), err, want)
			}
		}
	}

	proxy := httptest.NewServer(ConsoleProxy(rec.Socket))
	defer proxy.Close()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path, host string, header map[string]string, body string) (int, string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(method, proxy.URL+path, strings.NewReader(body))
		if host != "" {
			req.Host = host
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		res, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b), res.Header
	}
	bearer := "Bearer " + token
	if code, _, h := do("GET", "/", "", map[string]string{"Accept": "text/html"}, ""); code != http.StatusSeeOther || h.Get("Location") != "/login" {
		t.Errorf("the page without a token: %d to %q, want 303 to /login", code, h.Get("Location"))
	}
	code, page, _ := do("GET", "/", "", map[string]string{"Authorization": bearer}, "")
	if code != http.StatusOK || !strings.Contains(page, "fx") {
		t.Fatalf("the page with the token: %d\n%s", code, page)
	}
	if code, _, _ := do("GET", "/", "rebound.example:80", map[string]string{"Authorization": bearer}, ""); code != http.StatusForbidden {
		t.Errorf("the page under a rebound host name: %d, want 403", code)
	}
	csrf := regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`).FindStringSubmatch(page)
	if csrf == nil {
		t.Fatalf("the page has no CSRF token:\n%s", page)
	}
	form := url.Values{"csrf": {csrf[1]}}.Encode()
	post := func(origin string) int {
		code, _, _ := do("POST", "/console/memory/clear", "", map[string]string{"Authorization": bearer, "Origin": origin,
			"Content-Type": "application/x-www-form-urlencoded"}, form)
		return code
	}
	if code := post("http://127.0.0.1:1"); code != http.StatusForbidden {
		t.Errorf("an action from another origin: %d, want 403", code)
	}
	if code := post(proxy.URL); code != http.StatusSeeOther {
		t.Errorf("an action from the proxy's own origin: %d, want 303", code)
	}

	// The user's own commands read the servers on the socket, without a login;
	// through the proxy, under any spelling, that path is not there.
	servers, err := rec.Servers(context.Background())
	if err != nil || len(servers) != 1 || servers[0].Name != "fx" {
		t.Errorf("the servers on the socket: %+v, %v", servers, err)
	}
	for _, p := range []string{"/local/servers", "//local/servers", "/./local/servers", "/x/../local/servers", "/local%2Fservers", "/local"} {
		if code, body, _ := do("GET", p, "", map[string]string{"Authorization": bearer}, ""); code != http.StatusNotFound || strings.Contains(body, `"name"`) {
			t.Errorf("GET %s through the proxy: %d %.80s, want 404", p, code, body)
		}
	}

	stop()
	if got, err := Running(context.Background(), home); err != nil || len(got) != 0 {
		t.Errorf("Running after the gateway stopped: %+v, %v", got, err)
	}
	if exists(rec.Socket) || exists(consoleRecord(home, rec.PID)) {
		t.Error("the stopped gateway left its record or its socket")
	}
	if code, body, _ := do("GET", "/", "", map[string]string{"Authorization": bearer}, ""); code != http.StatusBadGateway || !strings.Contains(body, "nexus console again") {
		t.Errorf("the proxy of a stopped gateway: %d %s", code, body)
	}
}
