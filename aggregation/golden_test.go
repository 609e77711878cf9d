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

	"golang.org/x/tools/txtar"

	"github.com/nexus-mcp/nexus/config"
)

// update rewrites the golden transcripts from what the gateway answers now:
// go test ./aggregation -run Golden -update
var update = flag.Bool("update", false, "rewrite testdata/golden from the gateway's answers")

// The handshake a transcript that is not about it starts with, unrecorded.
const (
	goldenInitialize  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"golden","version":"1"}}}`
	goldenInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)

// TestGoldenTranscripts replays each transcript of testdata/golden over an
// in-process stdio session of a gateway and compares, byte for byte after
// normalizeGolden, every line the gateway answers with the file.
//
// A transcript is a txtar file (golang.org/x/tools/txtar): its comment says
// what it covers; config.json is the gateway's config, where "$CHILD" stands
// for the test binary (re-exec'd as the test children: NEXUS_TEST_CHILD);
// transcript holds each line the client sends after "-> " and each line the
// gateway wrote after "<- ", in the order they crossed the wire. The "-> "
// lines are the input; the session opens with the handshake first unless the
// first is an initialize. To add one, write its comment, config.json and
// "-> " lines, then let -update write the "<- " lines, and review them.
//
// After each line it sends (and the answers it expects: one for anything but a
// notification), the test pings the gateway and requires the ping's answer to be
// the next line: anything the gateway sent unasked in between, a stray
// notification or a second answer, lands in the transcript and fails it.
func TestGoldenTranscripts(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob(filepath.Join("testdata", "golden", "*.txtar"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no transcripts in testdata/golden: %v", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
			t.Parallel()
			ar, err := txtar.ParseFile(path)
			if err != nil {
				t.Fatal(err)
			}
			cfg, transcript := goldenFile(t, ar, "config.json"), goldenFile(t, ar, "transcript")
			var send []string
			for line := range strings.Lines(string(transcript.Data)) {
				if rest, ok := strings.CutPrefix(line, "-> "); ok {
					send = append(send, strings.TrimSuffix(rest, "\n"))
				}
			}
			if len(send) == 0 {
				t.Fatal("the transcript sends nothing (no \"-> \" line)")
			}
			g := goldenGateway(t, cfg.Data)
			s := newGoldenSession(t, g)
			if !strings.Contains(send[0], `"method":"initialize"`) {
				s.exchange(goldenInitialize, "golden-initialize")
				s.exchange(goldenInitialized, "golden-initialized")
			}
			var got bytes.Buffer
			for i, line := range send {
				fmt.Fprintf(&got, "-> %s\n", line)
				for _, answer := range s.exchange(line, fmt.Sprintf("golden-%d", i)) {
					fmt.Fprintf(&got, "<- %s\n", normalizeGolden(answer))
				}
			}
			if *update {
				transcript.Data = got.Bytes()
				if err := os.WriteFile(path, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !bytes.Equal(got.Bytes(), transcript.Data) {
				t.Errorf("%s differs from what the gateway answers (go test ./aggregation -run Golden -update rewrites it):\n%s",
					path, lineDiff(string(transcript.Data), got.String()))
			}
		})
	}
}

// goldenFile is the file name of a transcript's archive.
func goldenFile(t *testing.T, ar *txtar.Archive, name string) *txtar.File {
	t.Helper()
	for i := range ar.Files {
		if ar.Files[i].Name == name {
			return &ar.Files[i]
		}
	}
	t.Fatalf("the transcript has no %s", name)
	return nil
}

// goldenGateway starts a gateway on a transcript's config.json, "$CHILD" being
// the test binary, and waits for its children.
func goldenGateway(t *testing.T, data []byte) *Gateway {
	t.Helper()
	child, _ := json.Marshal(os.Args[0])
	cfg, err := config.Parse("config.json", bytes.ReplaceAll(data, []byte(`"$CHILD"`), child))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	startGateway(t, g)
	if err := g.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	return g
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
