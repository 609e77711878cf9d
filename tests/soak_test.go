//go:build linux

package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestSoakClientSessions connects and disconnects clients of a `"sessions":
// "client"` server, launched through a wrapper that forks a grandchild (a
// sleep, as npx starts node) and then runs the sample server in its own place:
// every client session that calls it costs two processes. Of every four
// clients three speak HTTP to one `nexus serve --http` (half end with DELETE,
// half just vanish and are ended by the gateway's idle sweep, after 1s), and
// one is a `nexus serve` of its own over stdio (half close its stdin, half are
// killed with SIGKILL, leaving their grandchildren to the next gateway). At
// the end, once one more gateway has started, the server's processes (found by
// a variable only their environment holds) are back to what the HTTP gateway
// had before the clients came, and none once it stops; its RSS is reported.
//
// It runs 24 clients (about 20 s, mostly waiting out gateways' 2 s stop grace);
// NEXUS_SOAK=1000 runs 1,000 (figures in docs/development.md):
//
//	NEXUS_SOAK=1000 go test ./tests -run TestSoakClientSessions -v -timeout 30m
func TestSoakClientSessions(t *testing.T) {
	t.Parallel()
	clients := 24
	if v := os.Getenv("NEXUS_SOAK"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 4 {
			t.Fatalf("NEXUS_SOAK=%q: want a number of clients, at least 4", v)
		}
		clients = n
	}
	mark := fmt.Sprintf("soak-%d-%d", os.Getpid(), time.Now().UnixNano())
	h := newHome(t, map[string]any{
		"servers": map[string]any{"wrapped": map[string]any{
			"command":     "sh",
			"args":        []string{"-c", `sleep 987654 & exec "$0" "$@"`, built.sample, "code-kg"},
			"env":         map[string]string{"NEXUS_SOAK_MARK": mark},
			"sessions":    "client",
			"maxSessions": 64,
		}},
		"limits": map[string]any{"sessionIdleTimeout": "1s"},
		"policy": map[string]any{"default": map[string]any{"allow": []string{"*"}}},
	})
	marked := func() int { return len(markedProcesses("NEXUS_SOAK_MARK=" + mark)) }

	gateway, url, stderr := startHTTPProcess(t, h.env(), "--no-memory")
	waitChildren(t, stderr, "wrapped")
	rssStart := rssNow(gateway.Process.Pid)
	// A few clients first, so that the baseline is a gateway that has served.
	for i := range 3 {
		if err := soakHTTPClient(url, i%2 == 0); err != nil {
			t.Fatalf("warm-up client: %v\n%s", err, stderr)
		}
	}
	settle := func(what string, want func(n int) bool) int {
		t.Helper()
		n := marked()
		eventually(t, 30*time.Second, what, func() bool { n = marked(); return want(n) })
		return n
	}
	baseline := settle("the warm-up clients' processes end", func(n int) bool {
		time.Sleep(1500 * time.Millisecond) // the vanished client's session expires
		return n == marked()
	})
	rssBaseline := rssNow(gateway.Process.Pid)
	t.Logf("baseline: %d processes of the server, gateway RSS %.1f MiB (%.1f MiB before any client)",
		baseline, mib(rssBaseline), mib(rssStart))

	start := time.Now()
	var next, peak atomic.Int64
	var rssPeak atomic.Int64
	var kinds [4]atomic.Int64 // HTTP with DELETE, HTTP vanished, stdio closed, stdio killed
	var failures atomic.Int64
	var tookMu sync.Mutex
	var took [4][]time.Duration // by kind
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= clients || failures.Load() > 0 {
					return
				}
				var err error
				var k int
				began := time.Now()
				switch kind := i % 8; kind {
				case 3, 7: // 2 of 8: a gateway of its own over stdio
					killed := kind == 7
					err = soakStdioClient(h, killed)
					k = 2 + boolInt(killed)
				default: // 6 of 8: HTTP, half ending with DELETE
					vanish := kind == 1 || kind == 4 || kind == 6
					err = soakHTTPClient(url, !vanish)
					k = boolInt(vanish)
				}
				kinds[k].Add(1)
				tookMu.Lock()
				took[k] = append(took[k], time.Since(began))
				tookMu.Unlock()
				if err != nil {
					failures.Add(1)
					t.Errorf("client %d: %v", i, err)
					return
				}
				if i%16 == 0 {
					peak.Store(max(peak.Load(), int64(marked())))
					rssPeak.Store(max(rssPeak.Load(), rssNow(gateway.Process.Pid)))
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.Fatalf("gateway log:\n%s", tail(stderr.String(), 40))
	}
	elapsed := time.Since(start)

	// One more gateway ends what the killed ones left (the stdio clients after
	// a killed one already did, as they started).
	if _, errOut, code := h.nexus("list-tools"); code != 0 {
		t.Fatalf("list-tools: %d\n%s", code, errOut)
	}
	end := settle("the server's processes back to the baseline", func(n int) bool { return n <= baseline })
	time.Sleep(time.Second) // what the gateway freed, given back
	rssEnd := rssNow(gateway.Process.Pid)
	t.Logf("%d clients in %s (%.0f ms each, 4 at a time): %d HTTP ended with DELETE, %d HTTP vanished, %d stdio closed, %d stdio killed with SIGKILL",
		clients, elapsed.Round(time.Millisecond), float64(elapsed.Milliseconds())/float64(clients)*4,
		kinds[0].Load(), kinds[1].Load(), kinds[2].Load(), kinds[3].Load())
	for k, what := range []string{"HTTP ended with DELETE", "HTTP vanished", "stdio closed", "stdio killed"} {
		if d := took[k]; len(d) > 0 {
			slices.Sort(d)
			t.Logf("a client %s took %s at the median, %s at the most", what, d[len(d)/2].Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond))
		}
	}
	t.Logf("processes of the server: %d at the baseline, %d at the most seen, %d at the end", baseline, peak.Load(), end)
	t.Logf("HTTP gateway RSS: %.1f MiB at the baseline, %.1f MiB at the most seen, %.1f MiB at the end (%+.1f MiB)",
		mib(rssBaseline), mib(rssPeak.Load()), mib(rssEnd), mib(rssEnd-rssBaseline))
	if rssEnd > rssBaseline*3/2+8<<20 {
		t.Errorf("the HTTP gateway's RSS grew from %.1f to %.1f MiB", mib(rssBaseline), mib(rssEnd))
	}

	// The HTTP gateway stopped, nothing of the server is left.
	gateway.Process.Signal(interrupt)
	gateway.Wait()
	settle("no process of the server once every gateway is gone", func(n int) bool { return n == 0 })
	// A gateway that exits leaves its children's entries in the ledger (their
	// groups are over); the next gateway forgets them.
	left, _ := os.ReadDir(filepath.Join(h.dir, "children"))
	t.Logf("%d entries left in the ledger by gateways that exited, their groups over", len(left))
}

// soakArgs are the arguments of the call each client makes.
const soakArgs = `{"repository": "syl2042/Nexus-Pocket", "branch": "main"}`

// soakHTTPClient is one HTTP client: initialize, one call of the wrapped
// server (which starts its session's process), then DELETE or nothing.
func soakHTTPClient(url string, deleteAtEnd bool) error {
	id, err := soakPost(url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"soak","version":"1"}}}`)
	if err != nil {
		return fmt.Errorf("initialize: %v", err)
	}
	if _, err := soakPost(url, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		return fmt.Errorf("initialized: %v", err)
	}
	if _, err := soakPost(url, id, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"wrapped__kg_list_anomalies","arguments":`+soakArgs+`}}`); err != nil {
		return fmt.Errorf("tools/call: %v", err)
	}
	if !deleteAtEnd {
		return nil // the client vanishes; the gateway ends its session when idle
	}
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Mcp-Session-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("DELETE: %s", resp.Status)
	}
	return nil
}

// soakPost posts one JSON-RPC message in session id ("" before initialize)
// and returns the session id the answer names; a request's answer (JSON or
// one event) must not be an error.
func soakPost(url, id, body string) (string, error) {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if id != "" {
		req.Header.Set("Mcp-Session-Id", id)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("%s: %s", resp.Status, b)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for line := range strings.SplitSeq(string(b), "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				b = []byte(data)
			}
		}
	}
	if len(bytes.TrimSpace(b)) > 0 {
		var m struct {
			Error  *rpcError       `json:"error"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return "", fmt.Errorf("%v: %s", err, b)
		}
		if m.Error != nil {
			return "", fmt.Errorf("error %d: %s", m.Error.Code, m.Error.Message)
		}
		if bytes.Contains(m.Result, []byte(`"isError":true`)) {
			return "", fmt.Errorf("tool error: %s", m.Result)
		}
	}
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
		id = s
	}
	return id, nil
}

// soakStdioClient is one client that runs a `nexus serve` of its own: one call
// of the wrapped server, then its stdin closed or the gateway killed.
func soakStdioClient(h *home, kill bool) (err error) {
	t := &testing.T{} // startSession fails t: turned into an error
	done := make(chan struct{})
	var s *session
	go func() {
		defer close(done)
		s = startSession(t, h.env(), built.nexus, "serve", "--no-memory")
		res, rpcErr := s.request("tools/call", map[string]any{"name": "wrapped__kg_list_anomalies", "arguments": json.RawMessage(soakArgs)})
		if rpcErr != nil || bytes.Contains(res, []byte(`"isError":true`)) {
			err = fmt.Errorf("tools/call over stdio: %+v %s\n%s", rpcErr, res, s.stderr)
		}
	}()
	<-done
	if s == nil || t.Failed() {
		if s != nil {
			s.cmd.Process.Kill()
			s.cmd.Wait()
			return fmt.Errorf("stdio client failed:\n%s", s.stderr)
		}
		return fmt.Errorf("stdio client failed to start")
	}
	if kill {
		s.cmd.Process.Signal(syscall.SIGKILL)
	}
	s.close()
	return err
}

// markedProcesses lists the processes whose environment holds kv (a zombie's
// is empty).
func markedProcesses(kv string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for v := range bytes.SplitSeq(b, []byte{0}) {
			if string(v) == kv {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// tail is the last n lines of s.
func tail(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
