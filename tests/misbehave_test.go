package tests

import (
	"strings"
	"testing"
	"time"
)

// TestMisbehavingChildren runs one healthy child beside children that misbehave the
// way real servers do, and checks that none of them holds up the gateway or the
// others: a child that never answers initialize, one that closes its stderr, one that
// writes a 2 MiB stderr line, one whose tool names clients would reject.
func TestMisbehavingChildren(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	fx := func(env map[string]string, extra map[string]any) map[string]any {
		env["FIXTURE_CALL_LOG"] = h.log
		s := map[string]any{"command": built.fixture, "env": env}
		for k, v := range extra {
			s[k] = v
		}
		return s
	}
	h.writeConfig(map[string]any{
		"servers": map[string]any{
			"good":  fx(map[string]string{}, nil),
			"hang":  fx(map[string]string{"FIXTURE_MODE": "hang"}, map[string]any{"timeout": "1s"}),
			"quiet": fx(map[string]string{"FIXTURE_MODE": "close-stderr"}, nil),
			"loud":  fx(map[string]string{"FIXTURE_MODE": "huge-stderr"}, nil),
			"odd":   fx(map[string]string{"FIXTURE_EXTRA_TOOLS": "a/b,two words,c++,résumé,bad\x01name"}, nil),
		},
		"policy": map[string]any{"default": map[string]any{"allow": []string{"*"}}},
	})
	s := h.serveStdio("--no-memory")

	// The hung child holds up neither initialize (startSession got its answer) nor the
	// others' tools.
	tools := s.tools()
	for _, want := range []string{"good__echo", "quiet__echo", "loud__echo"} {
		if _, ok := tools[want]; !ok {
			t.Errorf("tools/list lacks %s while a child hangs: %v", want, mapKeys(tools))
		}
	}
	if r := s.call("good__echo", map[string]any{"message": "fine"}); r.text() != "fine" {
		t.Errorf("good__echo: %+v", r)
	}

	// The hung child is failed after its timeout, with its stderr tail.
	eventually(t, 10*time.Second, "the hung child is failed with its stderr tail", func() bool {
		out := s.stderr.String()
		return strings.Contains(out, "did not finish its handshake within 1s") && strings.Contains(out, "fixture: hanging")
	})
	r := s.call("hang__echo", map[string]any{"message": "x"})
	if !r.IsError || !strings.Contains(r.text(), "server hang is not running") {
		t.Errorf("a call to the hung server: %+v", r)
	}

	// Closing stderr is the end of a log, not of a process. The child's last line
	// logged means the gateway read its stderr up to the close before these calls.
	eventually(t, 10*time.Second, "the quiet child's last stderr line logged", func() bool {
		return strings.Contains(s.stderr.String(), "[quiet] fixture: started")
	})
	for i := range 3 {
		if r := s.call("quiet__echo", map[string]any{"message": "still"}); r.text() != "still" {
			t.Fatalf("call %d to the child without stderr: %+v\n%s", i, r, s.stderr)
		}
	}
	if strings.Contains(s.stderr.String(), `server=quiet`) && strings.Contains(s.stderr.String(), "child exited") {
		t.Errorf("the child that closed its stderr was taken for dead:\n%s", s.stderr)
	}

	// A 2 MiB stderr line, at start or during a call, is logged cut and kills nothing.
	if r := s.call("loud__shout", map[string]any{"bytes": 1536 << 10}); r.text() != "shouted" {
		t.Errorf("a call that writes a 1.5 MiB stderr line: %+v", r)
	}
	if r := s.call("loud__echo", map[string]any{"message": "alive"}); r.text() != "alive" {
		t.Errorf("after huge stderr lines: %+v", r)
	}
	eventually(t, 5*time.Second, "the huge stderr lines are logged with their size", func() bool {
		return strings.Contains(s.stderr.String(), "bytes, cut)")
	})
	if strings.Count(s.stderr.String(), "eeeeeeeeee") > 0 && len(s.stderr.String()) > 1<<20 {
		t.Errorf("a 2 MiB stderr line was logged whole (%d bytes of log)", len(s.stderr.String()))
	}

	// Tool names clients reject are served under hashed wire names and callable with
	// allow ["*"]; a name with a control character is refused with a warning.
	var odd []string
	for name, raw := range s.tools() {
		if strings.HasPrefix(name, "odd__") && name != "odd__echo" && strings.Contains(string(raw), "extra tool") {
			odd = append(odd, name)
		}
	}
	if len(odd) != 4 {
		t.Errorf("odd names served: %v, want 4 (a/b, two words, c++, résumé)", odd)
	}
	for _, name := range odd {
		if r := s.call(name, map[string]any{}); r.IsError {
			t.Errorf("calling %s: %+v", name, r)
		}
	}
	eventually(t, 5*time.Second, "the unsafe name is refused with a warning", func() bool {
		return strings.Contains(s.stderr.String(), `x01name`) && strings.Contains(s.stderr.String(), "is refused")
	})

	// Others kept serving all along; a normal exit logs no error.
	if r := s.call("good__echo", map[string]any{"message": "end"}); r.text() != "end" {
		t.Errorf("good__echo at the end: %+v", r)
	}
	s.close()
	for _, line := range strings.Split(s.stderr.String(), "\n") {
		if strings.Contains(line, "level=ERROR") && !strings.Contains(line, "server=hang") {
			t.Errorf("error logged by a normal run: %s", line)
		}
	}
}

// TestNotRunningIsNotUnknown: a tool of a configured server that cannot start says
// so, with the reason; a name no server could own is an unknown tool.
func TestNotRunningIsNotUnknown(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	h.writeConfig(map[string]any{"servers": map[string]any{
		"ghost": map[string]any{"command": "/nonexistent/ghost-server"},
	}})
	stdout, stderr, code := h.nexus("call", "ghost.anything")
	if out := stdout + stderr; code == 0 || !strings.Contains(out, "server ghost is not running") || !strings.Contains(out, "ghost-server") {
		t.Errorf("nexus call ghost.anything: exit %d\n%s", code, out)
	}
	stdout, _, _ = h.nexus("list-servers", "--live")
	// A one-shot command makes one attempt: it says why, and that it gave up.
	if !strings.Contains(stdout, "ghost: starting ghost") || !strings.Contains(stdout, "failed") {
		t.Errorf("list-servers --live does not say why ghost is down:\n%s", stdout)
	}
	stdout, stderr, code = h.nexus("call", "nobody.anything")
	if out := stdout + stderr; code == 0 || !strings.Contains(out, "unknown tool") {
		t.Errorf("nexus call nobody.anything: exit %d\n%s", code, out)
	}
}

// TestOverSizeChildMessage: a child's answer over maxChildMessageBytes fails its call
// with a clear error, is never held (the gateway's peak memory does not grow with
// it), and the child keeps serving.
func TestOverSizeChildMessage(t *testing.T) {
	// Not parallel: a 48 MiB answer keeps the CPU busy: beside other tests it can take over the 30 s a call may.
	h := newHome(t, nil)
	h.writeConfig(map[string]any{
		"servers":              map[string]any{"fx": h.fixtureServer(nil)},
		"maxChildMessageBytes": 1 << 20,
	})
	s := h.serveStdio("--no-memory")
	if r := s.call("fx__big", map[string]any{"bytes": 512 << 10}); r.IsError || len(r.text()) != 512<<10 {
		t.Fatalf("an answer under the bound: error %v, %d bytes", r.IsError, len(r.text()))
	}
	peak := func() int64 { return peakRSS(s.cmd.Process.Pid) }
	before := peak()
	r := s.call("fx__big", map[string]any{"bytes": 48 << 20})
	if !r.IsError || !strings.Contains(r.text(), "larger than 1048576 bytes") || !strings.Contains(r.text(), "maxChildMessageBytes") {
		t.Errorf("an answer over the bound: %+v", r)
	}
	if after := peak(); before > 0 && after-before > 16<<20 {
		t.Errorf("the gateway's peak memory grew by %d MiB for a refused 48 MiB answer", (after-before)>>20)
	}
	if r := s.call("fx__echo", map[string]any{"message": "next"}); r.text() != "next" {
		t.Errorf("the child after an over-size answer: %+v", r)
	}
}

// TestAddWarnsOfAMissingCommand: add saves a server whose command is not installed
// yet, and says so.
func TestAddWarnsOfAMissingCommand(t *testing.T) {
	t.Parallel()
	h := newHome(t, map[string]any{})
	_, stderr, code := h.nexus("add", "ghost", "--command", "does-not-exist-anywhere")
	if code != 0 || !strings.Contains(stderr, "does-not-exist-anywhere is not on PATH") {
		t.Errorf("add with a missing command: exit %d\n%s", code, stderr)
	}
	if cfg, _ := readFile(h.dir + "/config.json"); !strings.Contains(cfg, "does-not-exist-anywhere") {
		t.Errorf("the server was not saved:\n%s", cfg)
	}
}
