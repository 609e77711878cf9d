package tests

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// exposureScripts are children that put their key where people look: one answers
// its first request (the probe for its era, or initialize) with an error quoting
// its key (the status page's "last error"), one
// writes it on stdout and stderr right where the gateway cuts those lines (80 bytes
// of a stray stdout line, 16 KiB of a stderr line), and a key holding a quote and a
// backslash on a stray stdout line, which the log quotes twice.
var exposureScripts = map[string]string{
	"broken": `read -r line
id=$(printf '%s' "$line" | sed -n 's/.*"id":\("[^"]*"\|[0-9][0-9]*\).*/\1/p')
printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"bad API key %s"}}\n' "$id" "$API_KEY"
cat >/dev/null`,
	"noisy": `pad() { head -c "$1" /dev/zero | tr '\0' "$2"; }
printf '%s%s\n' "$(pad $((80 - ${#API_KEY} + 1)) x)" "$API_KEY"
printf '%s%s\n' "$(pad $((16384 - ${#API_KEY} + 1)) y)" "$API_KEY" >&2
printf 'stray %s\n' "$QUOTED_KEY"
cat >/dev/null`,
}

// TestStatusAndMetricsRedacted: with a canary key in a child's handshake error, in
// a tool's name and on its stdout and stderr right at the cuts, the status page,
// /metrics, the gateway's log and list-servers show it nowhere; the page and the
// metrics need a token.
func TestStatusAndMetricsRedacted(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("the children are shell scripts")
	}
	b := make([]byte, 12)
	rand.Read(b)
	canary := "canary-" + hex.EncodeToString(b[:6])
	quotedHex := hex.EncodeToString(b[6:])
	quoted := `q"uo\te-` + quotedHex // reaches the log quoted, then quoted again
	h := newHome(t, nil)
	token := "nxs_exposure_test_token"
	servers := map[string]any{
		"fx": h.fixtureServer(map[string]any{"env": map[string]string{
			"FIXTURE_CALL_LOG": h.log, "FX_API_KEY": canary, "FIXTURE_EXTRA_TOOLS": canary}}),
	}
	for name, script := range exposureScripts {
		servers[name] = map[string]any{"command": "sh", "args": []string{"-c", script}, "timeout": "1s",
			"env": map[string]string{"API_KEY": canary, "QUOTED_KEY": quoted}}
	}
	h.writeConfig(map[string]any{
		"servers": servers,
		"agents":  map[string]any{"coder": map[string]any{"tokenSha256": polTokenHash(token)}},
		"policy":  map[string]any{"agents": map[string]any{"coder": map[string]any{"allow": []string{"*"}}}},
	})
	s := h.startServe("listening on", "--http", "127.0.0.1:0")
	c, err := httpClient(t, s.base+"/mcp", token)
	if err != nil {
		t.Fatalf("initialize: %v\n%s", err, s.stderr)
	}
	if _, err := c.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fx__" + canary}}); err != nil {
		t.Fatalf("calling the tool named after the key: %v", err)
	}

	var page string
	eventually(t, 15*time.Second, "the status page shows the broken child's handshake error", func() bool {
		_, page = get(t, s.base+"/", token)
		return strings.Contains(page, "bad API key [redacted:")
	})
	_, metrics := get(t, s.base+"/metrics", token)
	counted := regexp.MustCompile(`(?m)^nexus_calls_total\{agent="coder",outcome="ok",server="fx",tool="fx\.\[redacted:[^"]+\]"\} 1$`)
	if !counted.MatchString(metrics) {
		t.Errorf("the call of the tool named after the key is not counted under its redacted name:\n%s", metrics)
	}
	for _, p := range []string{"/", "/metrics"} {
		if code, body := get(t, s.base+p, ""); code != http.StatusUnauthorized || strings.Contains(body, "fx.") {
			t.Errorf("GET %s without a token from this machine: %d, want 401\n%s", p, code, body)
		}
	}
	eventually(t, 15*time.Second, "the noisy child's lines reach the log", func() bool {
		log := s.stderr.String()
		return strings.Contains(log, "x[redacted:") && strings.Contains(log, "y[redacted:") && strings.Contains(log, "stray [redacted:")
	})
	list, listErr, _ := h.nexus("list-servers", "--live")
	s.stop(t)

	for what, text := range map[string]string{"the status page": page, "/metrics": metrics, "the log": s.stderr.String(), "list-servers --live": list + listErr} {
		// The whole key but its last byte: what a cut before redaction leaves.
		for _, leak := range []string{canary[:len(canary)-1], quotedHex} {
			if strings.Contains(text, leak) {
				t.Errorf("%s holds %q:\n%s", what, leak, text)
			}
		}
	}
}

// TestHomeFileModes: in a NEXUS_HOME made by hand (0755), a serving gateway makes
// the home private, says so in its log, and creates its databases (memory and the
// audit trail, with their -wal and -shm files) readable by the user only.
func TestHomeFileModes(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("permission bits do not say who may read a file on Windows")
	}
	h := newHome(t, nil)
	h.writeConfig(map[string]any{
		"servers": map[string]any{"fx": h.fixtureServer(nil)},
		"policy":  map[string]any{"default": map[string]any{"allow": []string{"*"}, "deny": []string{"fx.lookup"}}},
	})
	if err := os.Chmod(h.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// HOME elsewhere: a NEXUS_HOME that is the user's own home keeps its mode.
	s := startSession(t, h.env("HOME="+t.TempDir()), built.nexus, "serve")
	if r := s.call("fx__echo", map[string]any{"message": "m"}); r.text() != "m" {
		t.Fatalf("echo: %+v", r)
	}
	s.call("fx__lookup", map[string]any{"q": "x"}) // a refusal, for the trail
	files := []string{"memory.db", "memory.db-wal", "memory.db-shm", "audit.db", "audit.db-wal", "audit.db-shm"}
	eventually(t, 10*time.Second, "the databases and their WAL files exist", func() bool {
		for _, f := range files {
			if _, err := os.Stat(filepath.Join(h.dir, f)); err != nil {
				return false
			}
		}
		return true
	})
	for _, f := range files {
		if info, err := os.Stat(filepath.Join(h.dir, f)); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, want mode 0600 (%v)", f, info.Mode().Perm(), err)
		}
	}
	if info, err := os.Stat(h.dir); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("NEXUS_HOME: %v, want 0700 (%v)", info.Mode().Perm(), err)
	}
	if !strings.Contains(s.stderr.String(), "NEXUS_HOME: made private") {
		t.Errorf("the log does not say NEXUS_HOME was made private:\n%s", s.stderr)
	}
}

// TestStaleRunFileNotSignalled: a gateway killed with SIGKILL leaves run/<pid>
// behind, and the pid may go to an unrelated process. `nexus policy allow` must
// not send that process SIGHUP (which kills it); it removes the stale file. A
// live gateway of the same home is still signalled and confirms.
func TestStaleRunFileNotSignalled(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("start times are read from /proc; elsewhere nothing is signalled at all")
	}
	tests := []struct{ name, content string }{
		{"another process's start time", "3\nstart 1\n"},
		{"an older gateway's file, no start time", "3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHome(t, nil)
			h.writeConfig(map[string]any{"servers": map[string]any{"fx": h.fixtureServer(nil)}})
			gw := h.serveStdio()
			if r := gw.call("fx__echo", map[string]any{"message": "m"}); r.text() != "m" {
				t.Fatalf("echo: %+v", r)
			}
			stranger := exec.Command("sleep", "60")
			if err := stranger.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { stranger.Process.Kill(); stranger.Wait() })
			stale := filepath.Join(h.dir, "run", strconv.Itoa(stranger.Process.Pid))
			if err := os.WriteFile(stale, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}

			_, stderr, code := h.nexus("policy", "allow", "--agent", "coder", "fx.*")
			if code != 0 || !strings.Contains(stderr, "in force in 1 running gateway") {
				t.Errorf("policy allow: exit %d, want the live gateway confirmed:\n%s", code, stderr)
			}
			if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the stale run/ file is still there: %v", err)
			}
			// Signals are delivered lowest number first: had the command sent SIGHUP,
			// the process would die of it, not of this SIGTERM.
			stranger.Process.Signal(syscall.SIGTERM)
			err := stranger.Wait()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
				t.Errorf("the unrelated process was signalled by the CLI: %v", err)
			}
		})
	}
}

// TestMissingConfigKeepsRunning: a config file that disappears (an editor saving
// by delete and rewrite) does not stop the children nor drop the tokens at once:
// the running config stays, with a warning, until reload.missingGrace passes;
// then an ERROR says so and the config without the file applies.
func TestMissingConfigKeepsRunning(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	token := "nxs_missing_config_token"
	h.writeConfig(map[string]any{
		"servers": map[string]any{"fx": h.fixtureServer(nil)},
		"agents":  map[string]any{"coder": map[string]any{"tokenSha256": polTokenHash(token)}},
		"policy":  map[string]any{"agents": map[string]any{"coder": map[string]any{"allow": []string{"*"}}}},
		"reload":  map[string]any{"missingGrace": "5s"},
	})
	s := h.startServe("listening on", "--http", "127.0.0.1:0")
	echo := func(c interface {
		CallTool(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error)
	}) string {
		res, err := c.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"message": "here"}}})
		if err != nil {
			return err.Error()
		}
		return mcp.GetTextFromContent(res.Content[0])
	}
	c, err := httpClient(t, s.base+"/mcp", token)
	if err != nil || echo(c) != "here" {
		t.Fatalf("before: %v\n%s", err, s.stderr)
	}

	if err := os.Remove(filepath.Join(h.dir, "config.json")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the gateway notices the missing file", func() bool {
		return strings.Contains(s.stderr.String(), "a config file is missing")
	})
	if got := echo(c); got != "here" {
		t.Errorf("within the grace, the child stopped: %s", got)
	}
	if _, err := httpClient(t, s.base+"/mcp", ""); err == nil {
		t.Error("within the grace, a client without a token was served (the tokens were dropped)")
	}

	eventually(t, 15*time.Second, "the grace ends with an ERROR", func() bool {
		return strings.Contains(s.stderr.String(), "level=ERROR msg=\"a config file has been missing")
	})
	eventually(t, 5*time.Second, "the config without the file applies", func() bool {
		_, err := httpClient(t, s.base+"/mcp", "") // no token configured any more
		return err == nil
	})
}

// TestInvalidUTF8Arguments: over a real stdio session, a call whose arguments hold
// bytes that are not UTF-8, or a lone surrogate escape, is refused with -32602
// naming the field, and never reaches the child, which keeps serving.
func TestInvalidUTF8Arguments(t *testing.T) {
	t.Parallel()
	h := newHome(t, nil)
	h.writeConfig(map[string]any{
		"servers": map[string]any{"fx": h.fixtureServer(nil)},
		"policy":  map[string]any{"default": map[string]any{"allow": []string{"*"}}},
	})
	s := h.serveStdio()
	tests := []struct{ name, args, field string }{
		{"a byte that is not UTF-8", "{\"message\":\"caf\xe9\"}", "arguments.message"},
		{"a truncated sequence, nested", "{\"message\":\"ok\",\"extra\":[{\"note\":\"\xe2\x82\"}]}", "arguments.extra[0].note"},
		{"a lone surrogate escape", `{"message":"\ud800"}`, "arguments.message"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprint("utf8-", i)
			ch := s.expect(`"` + id + `"`)
			s.sendRaw([]byte(`{"jsonrpc":"2.0","id":"` + id + `","method":"tools/call","params":{"name":"fx__echo","arguments":` + tt.args + `}}`))
			m := s.wait(ch, tt.name)
			if m.Error == nil || m.Error.Code != -32602 || !strings.Contains(m.Error.Message, tt.field) || !strings.Contains(m.Error.Message, "UTF-8") {
				t.Errorf("got %s %+v, want -32602 naming %s", m.Result, m.Error, tt.field)
			}
		})
	}
	if n := h.calls()["echo"]; n != 0 {
		t.Errorf("the child received %d of the refused calls", n)
	}
	if r := s.call("fx__echo", map[string]any{"message": "still here"}); r.text() != "still here" {
		t.Errorf("after the refusals: %+v", r)
	}
}
