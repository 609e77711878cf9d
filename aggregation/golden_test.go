package aggregation

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// update rewrites the golden transcripts from what the gateway answers now:
// go test ./aggregation -run Golden -update
var update = flag.Bool("update", false, "rewrite testdata/golden from the gateway's answers")

// goldenSteps are the transcripts of testdata/golden: what a stdio client sends,
// a line at a time. The gateway's answers are the file's to pin.
var goldenSteps = []struct {
	name  string
	about string // the file's first line
	send  []string
}{
	{
		name:  "initialize",
		about: "the handshake, then the one child's tools as the gateway lists them",
		send: []string{
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"golden","version":"1"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		},
	},
	{
		name:  "call",
		about: "tools/call: a result, an error result (the client declared no sampling), arguments that are not an object",
		send: []string{
			`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"good__echo","arguments":{"text":"hello"}}}`,
			`{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"good__sample","arguments":{}}}`,
			`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"good__echo","arguments":"hello"}}`,
		},
	},
	{
		name:  "unknown",
		about: "a tool, a method and a prompt nobody has",
		send: []string{
			`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"good__nothing","arguments":{}}}`,
			`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"nobody__echo","arguments":{}}}`,
			`{"jsonrpc":"2.0","id":5,"method":"no/such/method"}`,
			`{"jsonrpc":"2.0","id":6,"method":"prompts/get","params":{"name":"good__nothing"}}`,
		},
	},
	{
		name:  "malformed",
		about: "lines that are not JSON, not JSON-RPC 2.0 or not a valid request; a stray response, which gets no answer",
		send: []string{
			`{"jsonrpc":"2.0","id":7,"method":"tools/list"`,
			`not json at all`,
			`{"jsonrpc":"1.0","id":8,"method":"ping"}`,
			`{"jsonrpc":"2.0","id":9}`,
			`{"jsonrpc":"2.0","id":{"an":"object"},"method":"ping"}`,
			`{"jsonrpc":"2.0","id":10,"method":42}`,
			`[]`,
		},
	},
	{
		name:  "batch",
		about: "a batch of requests and a notification, and one with a bad member",
		send: []string{
			`[{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"good__echo","arguments":{"text":"one"}}},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":12,"method":"ping"}]`,
			`[{"jsonrpc":"2.0","id":13,"method":"ping"},1,{"jsonrpc":"2.0","id":14,"method":"no/such/method"}]`,
		},
	},
}

// TestGoldenTranscripts replays each transcript over an in-process stdio session
// of a gateway with one child (the test child "good") and compares, byte for
// byte after normalizeGolden, every line the gateway answers with the file.
// A file (testdata/golden/NAME.golden) is the transcript: a "# " line saying what
// it covers, then each line the client sent after "-> " and each line the
// gateway wrote after "<- ", in the order they crossed the wire.
//
// After each line it sends (and the answers it expects: one for anything but a
// notification), the test pings the gateway and requires the ping's answer to be
// the next line: anything the gateway sent unasked in between, a stray
// notification or a second answer, lands in the transcript and fails it.
func TestGoldenTranscripts(t *testing.T) {
	t.Parallel()
	g := comebackGateway(t, fmt.Sprintf(`{"good": {"command": %q, "args": ["-test.run=^$"], "env": {"NEXUS_TEST_CHILD": "good"}}}`, os.Args[0]), nil)
	if err := g.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, tt := range goldenSteps {
		t.Run(tt.name, func(t *testing.T) {
			s := newGoldenSession(t, g)
			if tt.name != "initialize" {
				s.handshake()
			}
			var got bytes.Buffer
			fmt.Fprintf(&got, "# %s\n", tt.about)
			for i, line := range tt.send {
				fmt.Fprintf(&got, "-> %s\n", line)
				for _, answer := range s.exchange(line, fmt.Sprintf("golden-%d", i)) {
					fmt.Fprintf(&got, "<- %s\n", normalizeGolden(answer))
				}
			}
			path := filepath.Join("testdata", "golden", tt.name+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./aggregation -run Golden -update writes it)", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("%s differs from what the gateway answers (go test ./aggregation -run Golden -update rewrites it):\n%s",
					path, lineDiff(string(want), got.String()))
			}
		})
	}
}

// goldenVersion matches the gateway's version in serverInfo.
var goldenVersion = regexp.MustCompile(`("serverInfo":\{"name":"nexus","version":)"[^"]*"`)

// normalizeGolden is the one place a transcript is made independent of what
// varies between runs and releases; everything else must match byte for byte.
// Today that is only the gateway's version in serverInfo (a release changes it):
// a stdio session has no session id, the test child answers the same at every
// run, and the answers carry no times. Anything added here hides a difference
// from every transcript, so keep it to what cannot be pinned.
func normalizeGolden(line []byte) []byte {
	return goldenVersion.ReplaceAll(line, []byte(`$1"VERSION"`))
}

// goldenSession is a stdio session of a gateway, read a line at a time.
type goldenSession struct {
	t     *testing.T
	send  io.Writer
	lines chan []byte
}

func newGoldenSession(t *testing.T, g *Gateway) *goldenSession {
	toGW, fromClient := io.Pipe()
	fromGW, toClient := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.ServeStdio(ctx, toGW, toClient, "anonymous")
		toClient.Close()
	}()
	s := &goldenSession{t: t, send: fromClient, lines: make(chan []byte, 64)}
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(fromGW)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			s.lines <- bytes.Clone(sc.Bytes())
		}
	}()
	t.Cleanup(func() { cancel(); fromClient.Close(); <-done })
	return s
}

// handshake opens the session, for transcripts that are not about it.
func (s *goldenSession) handshake() {
	s.t.Helper()
	s.exchange(goldenSteps[0].send[0], "golden-initialize")
	s.exchange(goldenSteps[0].send[1], "golden-initialized")
}

// exchange sends line, reads the answers it expects, then pings with the id
// sentinel and returns every line before the ping's answer.
func (s *goldenSession) exchange(line, sentinel string) [][]byte {
	s.t.Helper()
	s.write(line)
	var out [][]byte
	for range expectedAnswers(line) {
		out = append(out, s.next())
	}
	want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"result":{}}`, sentinel)
	s.write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"ping"}`, sentinel))
	for {
		got := s.next()
		if string(got) == want {
			return out
		}
		out = append(out, got) // unasked: the transcript shows it, and fails
	}
}

func (s *goldenSession) write(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.send, line+"\n"); err != nil {
		s.t.Fatal(err)
	}
}

func (s *goldenSession) next() []byte {
	s.t.Helper()
	select {
	case b, ok := <-s.lines:
		if !ok {
			s.t.Fatal("the gateway ended the session")
		}
		return b
	case <-time.After(10 * time.Second):
		s.t.Fatal("no answer within 10s")
		return nil
	}
}

// expectedAnswers is how many lines the gateway owes a client line: none for a
// JSON-RPC 2.0 notification (a method and no id) or response (an id and no
// method: to a request the gateway never sent, it is dropped), one for anything
// else.
func expectedAnswers(line string) int {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(line), &m) == nil && string(m["jsonrpc"]) == `"2.0"` {
		_, hasID := m["id"]
		_, hasMethod := m["method"]
		if hasID != hasMethod {
			return 0
		}
	}
	return 1
}

// lineDiff shows the lines of want and got that differ, by position.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want %s\n  got  %s\n", i+1, wl, gl)
		}
	}
	return b.String()
}
