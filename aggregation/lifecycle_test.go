package aggregation

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/config"
)

// recordStart appends the child's process id to file: a test counts its starts.
func recordStart(file string) {
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	fmt.Fprintln(f, os.Getpid())
	f.Close()
}

// startsOf are the process ids recordStart wrote, in order.
func startsOf(t *testing.T, file string) []int {
	t.Helper()
	b, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// lifecycleGateway starts a gateway of one stdio test child, good, with the
// server settings given, keeping lazy servers' lists in dir/lists; the child
// records its starts in dir/starts.
func lifecycleGateway(t *testing.T, dir, settings string) *Gateway {
	t.Helper()
	cfg, err := config.Parse("test.json", []byte(fmt.Sprintf(`{
		"servers": {"good": {"command": %q, "args": ["-test.run=^$"], "env": {"NEXUS_TEST_CHILD": "good", "NEXUS_TEST_CHILD_STARTS": %q, "NEXUS_TEST_CHILD_LEVELED": "1"}%s}},
		"policy": {"default": {"allow": ["*"]}}
	}`, os.Args[0], filepath.Join(dir, "starts"), settings)))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{ListsDir: filepath.Join(dir, "lists"),
		Redact: func(b []byte) []byte { return bytes.ReplaceAll(b, []byte(canary), []byte("[redacted]")) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); g.Close() })
	return g
}

// TestLazyStartAndIdleStop: a server seen before is not started with the
// gateway: its tools are listed from what it listed last time, and the first call
// starts it. Unused for its idle timeout, it is stopped (its process exits) and
// stays listed; the next call starts it again.
func TestLazyStartAndIdleStop(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	starts := filepath.Join(dir, "starts")

	// First run: the server was never seen, so it starts at once; its lists are kept.
	g := lifecycleGateway(t, dir, `, "idleTimeout": "1s"`)
	if st := statusOf(t, g, "good"); st.State != StateReady || len(startsOf(t, starts)) != 1 {
		t.Fatalf("a server never seen: %s, %d starts; want ready, started once", st.Describe(), len(startsOf(t, starts)))
	}
	kept, err := os.ReadFile(filepath.Join(dir, "lists", "good.json"))
	if err != nil || !strings.Contains(string(kept), "good echo") && !strings.Contains(string(kept), "Echoes text") || strings.Contains(string(kept), canary) {
		t.Errorf("the kept lists (%v) hold no echo tool, or the secret in its description:\n%s", err, kept)
	}
	c := stdioClient(t, g, "tester")
	c.initialize("lazy-test")
	if got, isErr := call(t, c, "good__echo", "one"); isErr || got != "good:one" {
		t.Fatalf("echo: %q %v", got, isErr)
	}
	first := startsOf(t, starts)[0]
	waitFor(t, "the idle server stops", func() bool { return statusOf(t, g, "good").State == StateIdle && exited(first) })
	if st := statusOf(t, g, "good"); st.Tools == 0 || !strings.Contains(st.Describe(), "stopped") {
		t.Errorf("an idle server: %d tools, %q; want its tools and when it stopped", st.Tools, st.Describe())
	}
	if tools := names(t, c.request("tools/list", nil), "tools", "name"); !slices.Contains(tools, "good__echo") {
		t.Errorf("an idle server's tools are not listed: %v", tools)
	}
	if got, isErr := call(t, c, "good__echo", "two"); isErr || got != "good:two" {
		t.Fatalf("a call to the idle server: %q %v", got, isErr)
	}
	if n := len(startsOf(t, starts)); n != 2 {
		t.Errorf("the call started the server %d times in all, want 2", n)
	}
	c.end()
	g.Close()

	// Second run: the lists are known, so the server waits for a request.
	g = lifecycleGateway(t, dir, "")
	if st := statusOf(t, g, "good"); st.State != StateIdle || !strings.Contains(st.Describe(), "not started yet") || st.Tools == 0 {
		t.Errorf("a lazy server seen before: %q with %d tools; want idle, not started, its tools known", st.Describe(), st.Tools)
	}
	if n := len(startsOf(t, starts)); n != 2 {
		t.Fatalf("the gateway started the lazy server: %d starts, want still 2", n)
	}
	c = stdioClient(t, g, "tester")
	c.initialize("lazy-test")
	if tools := names(t, c.request("tools/list", nil), "tools", "name"); !slices.Contains(tools, "good__echo") {
		t.Errorf("a lazy server's kept tools are not listed: %v", tools)
	}
	if got, isErr := call(t, c, "good__echo", "three"); isErr || got != "good:three" {
		t.Fatalf("the first call of a lazy server: %q %v", got, isErr)
	}
	if n := len(startsOf(t, starts)); n != 3 {
		t.Errorf("the first call started the lazy server: %d starts in all, want 3", n)
	}

	// Launched otherwise, it is another server: started at once.
	g.Close()
	g = lifecycleGateway(t, dir, `, "cwd": "/"`)
	if st := statusOf(t, g, "good"); st.State != StateReady || len(startsOf(t, starts)) != 4 {
		t.Errorf("a server launched otherwise: %s after %d starts; want ready, started at once", st.Describe(), len(startsOf(t, starts)))
	}
}

// TestEagerAndRecycled: "start": "eager" starts a server seen before with the
// gateway; "maxLifetime" restarts it between calls, and calls keep working.
func TestEagerAndRecycled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	starts := filepath.Join(dir, "starts")
	lifecycleGateway(t, dir, "").Close()
	g := lifecycleGateway(t, dir, `, "start": "eager", "maxLifetime": "1s", "idleTimeout": "0"`)
	if st := statusOf(t, g, "good"); st.State != StateReady || len(startsOf(t, starts)) != 2 {
		t.Fatalf("an eager server: %s after %d starts, want ready and started", st.Describe(), len(startsOf(t, starts)))
	}
	c := stdioClient(t, g, "tester")
	c.initialize("eager-test")
	waitFor(t, "the server is recycled", func() bool { return len(startsOf(t, starts)) >= 3 && statusOf(t, g, "good").State == StateReady })
	if got, isErr := call(t, c, "good__echo", "after"); isErr || got != "good:after" {
		t.Errorf("a call after recycling: %q %v", got, isErr)
	}
	if pids := startsOf(t, starts); !exited(pids[1]) {
		t.Errorf("the recycled process %d still runs", pids[1])
	}
}

// TestLevelReachesALazyServer: a client set its logging level while the server
// was idle (no process to tell); its first call starts the server, which is told
// the level before the call, so the call's log message reaches the client.
func TestLevelReachesALazyServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lifecycleGateway(t, dir, "").Close() // the server's lists are kept
	g := lifecycleGateway(t, dir, "")
	if st := statusOf(t, g, "good"); st.State != StateIdle {
		t.Fatalf("the lazy server: %s, want idle", st.Describe())
	}
	c := stdioClient(t, g, "tester")
	c.initialize("level-test")
	if m := c.request("logging/setLevel", map[string]any{"level": "info"}); m.Error != nil {
		t.Fatalf("logging/setLevel: %v", m.Error)
	}
	if got, isErr := call(t, c, "good__log", "first"); isErr || got != "logged" {
		t.Fatalf("log: %q; want it logged", got)
	}
	if !c.waitNote("notifications/message", func(n wireMsg) bool { return strings.Contains(string(n.Params), "first") }) {
		t.Errorf("the first call's log message did not reach the client; got %s", c.received())
	}
}

// serveLateChange is a server whose tools change just after it first lists
// them: it says so at once, while the gateway still lists its prompts, which
// it answers late. Each request is answered on its own goroutine, so the
// gateway's second listing is answered before its prompts.
func serveLateChange(in io.Reader, out io.Writer) {
	var mu sync.Mutex
	write := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(out, line)
	}
	listed := 0
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || len(m.ID) == 0 {
			continue
		}
		reply := func(result string) { write(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + `}`) }
		switch m.Method {
		case "initialize":
			reply(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"prompts":{}},"serverInfo":{"name":"late","version":"1"}}`)
		case "tools/list":
			listed++
			if listed == 1 {
				reply(`{"tools":[{"name":"first","inputSchema":{"type":"object"}}]}`)
				write(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
				continue
			}
			reply(`{"tools":[{"name":"first","inputSchema":{"type":"object"}},{"name":"second","inputSchema":{"type":"object"}}]}`)
		case "prompts/list":
			go func() {
				time.Sleep(500 * time.Millisecond)
				reply(`{"prompts":[]}`)
			}()
		default:
			reply(`{}`)
		}
	}
}

// TestListChangedWhileConnecting: a child that says its tools changed while
// its first listing is not yet the child's (its prompts are still being
// listed) is listed again once it is: the change is not dropped as a replaced
// connection's would be.
func TestListChangedWhileConnecting(t *testing.T) {
	t.Parallel()
	g := comebackGateway(t, fmt.Sprintf(`{"late": {"command": %q, "args": ["-test.run=^$"], "env": {"NEXUS_TEST_CHILD": "late-change"}}}`, os.Args[0]), nil)
	waitFor(t, "the tool the child added as it started", func() bool {
		for _, tool := range g.Tools() {
			if tool.Name == "second" {
				return true
			}
		}
		return false
	})
}
