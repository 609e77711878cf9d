// Package tests drives the nexus binary end to end, as a client would: real child
// processes, real stdio and HTTP sessions, real SQLite files.
package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/internal/skips"
)

// bins holds the binaries built once for the whole run.
type bins struct {
	nexus, fixture, relay, sample string
}

var built bins // set once by TestMain, read-only afterwards

// A new test here calls t.Parallel() first, unless it uses the OS keychain or
// stores or reads secrets (keychain items are global to the machine), drives a
// terminal or Chromium, or asserts timing that a loaded machine could break;
// serial tests all run before the parallel ones. A test of what a child's own
// initialize answer brings through starts the gateway with serveStdioReady (or
// waitChildren over HTTP).
//
// e2eParallel is how many tests marked t.Parallel run at once when -parallel is
// not given. The default, GOMAXPROCS, suits tests that keep the CPU busy; these
// mostly wait on child processes, sessions and the network (the package used
// 2 minutes of CPU in 5 of wall on 2 cores with 4 at once, its children no longer
// race-built), so on 2 cores four times as many run at once: the parallel part
// took 111s rather than 139s with 4 (the package 13 to 15 minutes with 2).
const e2eParallel = 8

func TestMain(m *testing.M) {
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet && runtime.GOMAXPROCS(0) < e2eParallel {
		flag.Set("test.parallel", strconv.Itoa(e2eParallel))
	}
	dir, err := os.MkdirTemp("", "nexus-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if raceEnabled {
		gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
		raceEnv = []string{"GORACE=" + gorace}
		os.Setenv("GORACE", gorace) // for the processes started with this one's environment
	}
	built = bins{nexus: filepath.Join(dir, "nexus"), fixture: filepath.Join(dir, "fixture"),
		relay: filepath.Join(dir, "relay"), sample: filepath.Join(dir, "samplechild")}
	if err := buildAll(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := skips.Main(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// raceEnv is in the environment of every process the tests start (withRace): a
// race-built process sleeps a second before it exits (the race runtime's
// atexit_sleep_ms, for other threads to report), and every CLI run and every
// gateway a test stops waited for it. Its race reports are written when found.
var raceEnv []string

// withRace is env with raceEnv.
func withRace(env []string) []string {
	return append(slices.Clip(env), raceEnv...)
}

// buildAll builds the binaries at once. Only nexus, the code under test, is built
// with -race (when the tests are): the fixture, the relay and the sample child are
// helpers, and a race-built child costs a gateway test twice its CPU and start-up.
func buildAll() error {
	race := []string(nil)
	if raceEnabled {
		// As the README's test command builds the tests: SQLite itself, C
		// translated to Go, without the race detector, which slows it tenfold
		// and watches none of Nexus's code there.
		race = []string{"-race", "-gcflags=modernc.org/sqlite/lib=-race=false"}
	}
	builds := []struct {
		path, pkg string
		flags     []string
	}{
		{built.nexus, "../cmd/nexus", append(race, coverBuildFlags()...)},
		{built.fixture, "./fixture", append(helperFlags(), coverBuildFlags()...)},
		{built.relay, "./relay", append(helperFlags(), coverBuildFlags()...)},
		{built.sample, "./samplechild", append(helperFlags(), coverBuildFlags()...)},
	}
	errs := make([]error, len(builds))
	var wg sync.WaitGroup
	for i, b := range builds {
		wg.Go(func() {
			var out bytes.Buffer
			cmd := exec.Command("go", append(append([]string{"build", "-o", b.path, noDWARF}, b.flags...), b.pkg)...)
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				errs[i] = fmt.Errorf("building %s: %v\n%s", b.pkg, err, out.String())
			}
		})
	}
	// The helpers one test needs start building now too, when the run may
	// include that test, but nothing waits for them here: the tests that do not
	// need them (every serial one) start once the four are built, and the one
	// that does waits in build. A failed build is that test's failure.
	for _, b := range helperBins {
		if mayRun(b.test) {
			go b.build()
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// helperBin is a binary one test needs (and any other may ask for), built once
// per run into the run's directory: by TestMain when the run may include that
// test (mayRun), else when first asked for.
type helperBin struct {
	test string // the test that needs it
	name string // its file name in the run's directory
	pkg  string
	race bool // built with -race when the tests are: it is code under test

	once sync.Once
	path string
	err  error
}

var (
	// tests/sdkpeer, the Go SDKs' servers of the SDK matrix: peers, not the
	// code under test.
	sdkPeerBin = &helperBin{test: "TestSDKMatrix", name: "sdkpeer", pkg: "./sdkpeer"}
	// mcp-go's example server for the conformance suite: the reference.
	conformanceServerBin = &helperBin{test: "TestConformance", name: "conformance-server", pkg: "github.com/mark3labs/mcp-go/examples/conformance"}
	// the OAuth client the auth scenarios drive: Nexus's oauth package.
	authClientBin = &helperBin{test: "TestConformanceAuth", name: "authclient", pkg: "./authclient", race: true}
	helperBins    = []*helperBin{sdkPeerBin, conformanceServerBin, authClientBin}
	// the process that answers at once, the floor of BenchmarkMemoryHit: built
	// when the benchmark asks for it, never for the tests.
	cannedBin = &helperBin{name: "canned", pkg: "./canned"}
)

// noDWARF leaves debug information out of the binaries the tests build: no test
// reads it (stack traces and profiles use the symbol table, which stays), and
// writing it is much of a link.
const noDWARF = "-ldflags=-w"

// helperFlags are the flags of the helpers built without -race. Under -race
// (the suite) they are compiled without inlining: nothing else in the run
// compiles their dependencies (net/http, mcp-go...) without -race, and that
// compile is a third shorter so, on the way to the first test; their own speed
// matters little there. The benchmarks, which run without -race and measure
// the fixture and the relay, get them fully optimised.
func helperFlags() []string {
	if raceEnabled {
		return []string{"-gcflags=all=-l"}
	}
	return nil
}

// build builds b once and returns its path.
func (b *helperBin) build() (string, error) {
	b.once.Do(func() {
		b.path = filepath.Join(filepath.Dir(built.nexus), b.name)
		args := []string{"build", "-o", b.path, noDWARF}
		if b.race && raceEnabled {
			args = append(args, "-race")
		} else {
			args = append(args, helperFlags()...)
		}
		if out, err := exec.Command("go", append(args, b.pkg)...).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("building %s: %v\n%s", b.pkg, err, out)
		}
	})
	return b.path, b.err
}

// mayRun reports whether -test.run may select the top-level test name (its
// pattern's part before any "/"; an empty pattern selects every test).
func mayRun(name string) bool {
	pat := flag.Lookup("test.run").Value.String()
	if pat == "" {
		return true
	}
	top, _, _ := strings.Cut(pat, "/")
	re, err := regexp.Compile(top)
	return err == nil && re.MatchString(name)
}

// home is a throw-away NEXUS_HOME with a config.json.
type home struct {
	t   *testing.T
	dir string
	log string // the fixture's call log
}

func newHome(t *testing.T, cfg map[string]any) *home {
	t.Helper()
	h := &home{t: t, dir: t.TempDir()}
	h.log = filepath.Join(h.dir, "calls.log")
	if cfg != nil {
		h.writeConfig(cfg)
	}
	return h
}

func (h *home) writeConfig(cfg map[string]any) {
	h.t.Helper()
	if _, ok := cfg["ttl"]; !ok {
		// Memory keeps nothing for a tool nobody gave a ttl; the tests' homes
		// keep answers 5 minutes unless they say otherwise ("ttl": {} for none).
		cfg = maps.Clone(cfg)
		cfg["ttl"] = map[string]any{"*": "5m"}
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		h.t.Fatal(err)
	}
	// Write through a rename so a watching gateway never reads half a file.
	tmp := filepath.Join(h.dir, ".config.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(h.dir, "config.json")); err != nil {
		h.t.Fatal(err)
	}
}

// fixtureServer is a config entry running the fixture child.
func (h *home) fixtureServer(extra map[string]any) map[string]any {
	s := map[string]any{"command": built.fixture, "env": map[string]string{"FIXTURE_CALL_LOG": h.log}}
	for k, v := range extra {
		s[k] = v
	}
	return s
}

// calls returns how many times the child received each tool.
func (h *home) calls() map[string]int {
	data, _ := os.ReadFile(h.log)
	out := map[string]int{}
	for _, line := range strings.Fields(string(data)) {
		out[line]++
	}
	return out
}

func (h *home) env(extra ...string) []string {
	env := []string{"NEXUS_HOME=" + h.dir, "PATH=" + os.Getenv("PATH"), "HOME=" + h.dir}
	env = append(env, coverEnv()...)
	env = append(env, raceEnv...)
	// The keychain (CI runs the tests inside a private Secret Service session).
	for _, k := range []string{"DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, extra...)
}

// nexus runs one CLI command and returns its stdout, stderr and exit code.
func (h *home) nexus(args ...string) (stdout, stderr string, code int) {
	h.t.Helper()
	cmd := exec.Command(built.nexus, args...)
	cmd.Env = h.env()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		h.t.Fatalf("running nexus %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// rpcError is a JSON-RPC error as the client sees it.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// message is any JSON-RPC message read from the gateway.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
	raw    []byte
}

// session is a raw MCP client over a process's stdio: the test sees every byte.
type session struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	stderr *lockedBuffer
	ids    atomic.Int64

	mu      sync.Mutex
	pending map[string]chan message
	notes   []message
	noteC   chan struct{}
	stdout  []byte // everything read, to check nothing but JSON-RPC was written
	done    chan struct{}
	// answer replies to requests the gateway sends the client (sampling, roots...);
	// set it before the call that triggers them.
	answer func(m message) (result any, err *rpcError)
	// initialized is the gateway's initialize result.
	initialized json.RawMessage
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serveStdio starts `nexus serve` with args and initializes a session.
func (h *home) serveStdio(args ...string) *session {
	h.t.Helper()
	return startSession(h.t, h.env(), built.nexus, append([]string{"serve"}, args...)...)
}

// serveStdioReady is serveStdio that initializes only once the gateway logged
// each of children connected. Initialize waits at most a second for a child
// still starting (aggregation's initializeWait), so a test of what a child's
// own initialize answer brings through (instructions, capabilities) would
// otherwise pass or fail with the machine's load.
func (h *home) serveStdioReady(children []string, args ...string) *session {
	h.t.Helper()
	return startSessionWhen(h.t, h.env(), func(stderr string) bool { return childrenConnected(stderr, children...) },
		built.nexus, append([]string{"serve"}, args...)...)
}

// childrenConnected reports whether a gateway's log holds "child connected" for
// each of names, or "child idle" (a lazy server listed as it listed last run,
// which starts on the first request that needs it).
func childrenConnected(stderr string, names ...string) bool {
	for _, n := range names {
		if !strings.Contains(stderr, `msg="child connected" server=`+n+" ") && !strings.Contains(stderr, `msg="child idle" server=`+n+" ") {
			return false
		}
	}
	return true
}

// waitChildren waits until the gateway whose log is stderr connected each of
// names (see serveStdioReady).
func waitChildren(t *testing.T, stderr interface{ String() string }, names ...string) {
	t.Helper()
	eventually(t, 60*time.Second, fmt.Sprintf("the gateway connecting %v", names), func() bool {
		return childrenConnected(stderr.String(), names...)
	})
}

func startSession(t *testing.T, env []string, command string, args ...string) *session {
	t.Helper()
	return startSessionWhen(t, env, nil, command, args...)
}

// startSessionWhen is startSession that, when ready is not nil, sends initialize
// only once ready holds for the process's stderr so far.
func startSessionWhen(t *testing.T, env []string, ready func(stderr string) bool, command string, args ...string) *session {
	t.Helper()
	cmd := exec.Command(command, args...)
	cmd.Env = withRace(env)
	s := &session{t: t, cmd: cmd, stderr: &lockedBuffer{}, pending: map[string]chan message{},
		noteC: make(chan struct{}, 1), done: make(chan struct{})}
	cmd.Stderr = s.stderr
	var err error
	if s.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go s.read(out)
	t.Cleanup(s.close)
	if ready != nil {
		eventually(t, 60*time.Second, "the process ready to initialize", func() bool {
			select {
			case <-s.done:
				t.Fatalf("%s exited before it was ready\nstderr:\n%s", command, s.stderr)
			default:
			}
			return ready(s.stderr.String())
		})
	}
	res, rpcErr := s.request("initialize", map[string]any{
		"protocolVersion": "2025-11-25",
		"capabilities":    map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{}, "roots": map[string]any{"listChanged": true}},
		"clientInfo":      map[string]any{"name": "e2e-test", "version": "1"},
	})
	if rpcErr != nil {
		t.Fatalf("initialize: %+v\nstderr:\n%s", rpcErr, s.stderr)
	}
	s.initialized = res
	s.notify("notifications/initialized", nil)
	return s
}

func (s *session) read(out io.Reader) {
	defer close(s.done)
	r := bufio.NewReaderSize(out, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			s.mu.Lock()
			s.stdout = append(s.stdout, line...)
			s.mu.Unlock()
			var m message
			if json.Unmarshal(line, &m) == nil {
				m.raw = bytes.TrimSpace(line)
				s.mu.Lock()
				if m.Method != "" && len(m.ID) > 0 {
					answer := s.answer
					s.mu.Unlock()
					go s.reply(m, answer)
					continue
				}
				if m.Method != "" && len(m.ID) == 0 {
					s.notes = append(s.notes, m)
					select {
					case s.noteC <- struct{}{}:
					default:
					}
				} else if ch, ok := s.pending[string(m.ID)]; ok {
					delete(s.pending, string(m.ID))
					ch <- m
				}
				s.mu.Unlock()
			}
		}
		if err != nil {
			return
		}
	}
}

// reply answers a request the gateway sent the client.
func (s *session) reply(m message, answer func(message) (any, *rpcError)) {
	resp := map[string]any{"jsonrpc": "2.0", "id": m.ID}
	if answer == nil {
		resp["error"] = rpcError{Code: -32601, Message: "the test client does not answer " + m.Method}
	} else if res, err := answer(m); err != nil {
		resp["error"] = err
	} else {
		resp["result"] = res
	}
	b, _ := json.Marshal(resp)
	s.in.Write(append(b, '\n'))
}

func (s *session) close() {
	s.in.Close()
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
	}
	_ = s.cmd.Wait()
}

func (s *session) send(v any) {
	s.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		s.t.Fatal(err)
	}
	s.sendRaw(b)
}

func (s *session) sendRaw(b []byte) {
	s.t.Helper()
	if _, err := s.in.Write(append(b, '\n')); err != nil {
		s.t.Fatalf("writing to the gateway: %v\nstderr:\n%s", err, s.stderr)
	}
}

func (s *session) notify(method string, params any) {
	m := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		m["params"] = params
	}
	s.send(m)
}

// expect registers interest in the response to id.
func (s *session) expect(id string) chan message {
	ch := make(chan message, 1)
	s.mu.Lock()
	s.pending[id] = ch
	s.mu.Unlock()
	return ch
}

func (s *session) wait(ch chan message, what string) message {
	s.t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(30 * time.Second):
		s.t.Fatalf("no response to %s after 30s\nstderr:\n%s", what, s.stderr)
	case <-s.done:
		s.t.Fatalf("the gateway exited while waiting for %s\nstderr:\n%s", what, s.stderr)
	}
	return message{}
}

// request sends a request and waits for its response.
func (s *session) request(method string, params any) (json.RawMessage, *rpcError) {
	s.t.Helper()
	m := s.requestMsg(method, params)
	return m.Result, m.Error
}

func (s *session) requestMsg(method string, params any) message {
	s.t.Helper()
	id := s.ids.Add(1)
	ch := s.expect(fmt.Sprint(id))
	req := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		req["params"] = params
	}
	s.send(req)
	return s.wait(ch, method)
}

// callResult is a tools/call result as a test reads it.
type callResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
	Meta              map[string]any  `json:"_meta"`
}

func (r callResult) text() string {
	var parts []string
	for _, c := range r.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

func (r callResult) cacheStatus() string {
	c, _ := r.Meta["nexus/cache"].(map[string]any)
	s, _ := c["status"].(string)
	return s
}

// call calls a tool and fails the test on a JSON-RPC error.
func (s *session) call(name string, args any) callResult {
	s.t.Helper()
	res, rpcErr := s.request("tools/call", map[string]any{"name": name, "arguments": args})
	if rpcErr != nil {
		s.t.Fatalf("calling %s: JSON-RPC error %d: %s\nstderr:\n%s", name, rpcErr.Code, rpcErr.Message, s.stderr)
	}
	var r callResult
	if err := json.Unmarshal(res, &r); err != nil {
		s.t.Fatalf("decoding the result of %s: %v: %s", name, err, res)
	}
	return r
}

// toolNames lists the session's tools/list names.
func (s *session) tools() map[string]json.RawMessage {
	s.t.Helper()
	res, rpcErr := s.request("tools/list", map[string]any{})
	if rpcErr != nil {
		s.t.Fatalf("tools/list: %+v", rpcErr)
	}
	var list struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(res, &list); err != nil {
		s.t.Fatal(err)
	}
	out := map[string]json.RawMessage{}
	for _, raw := range list.Tools {
		var t struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(raw, &t)
		out[t.Name] = raw
	}
	return out
}

// waitNote waits for a notification with method that satisfies ok, consuming the
// notifications before it.
func (s *session) waitNote(method string, timeout time.Duration, ok func(message) bool) message {
	s.t.Helper()
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		for i, n := range s.notes {
			if n.Method == method && (ok == nil || ok(n)) {
				s.notes = s.notes[i+1:]
				s.mu.Unlock()
				return n
			}
		}
		s.mu.Unlock()
		select {
		case <-s.noteC:
		case <-deadline:
			s.t.Fatalf("no %s notification within %s\nstderr:\n%s", method, timeout, s.stderr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// eventually retries check until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func compactJSON(t *testing.T, raw []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("compacting %s: %v", raw, err)
	}
	return b.String()
}

var interrupt = os.Interrupt

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

// with is a copy of base with the key/value pairs kv set.
func with(base map[string]any, kv ...any) map[string]any {
	out := make(map[string]any, len(base)+len(kv)/2)
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}
