package tests

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
)

// peakRSS is a process's peak resident set size (VmHWM), or -1 where /proc has none.
func peakRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb << 10
		}
	}
	return -1
}

// floodBatch is one JSON-RPC batch of n tools/list requests.
func floodBatch(n int) []byte {
	var b bytes.Buffer
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, i)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// TestBatchFloodBounded: a running gateway sent one 4 MB batch of 80,000 tools/list,
// over stdio and over HTTP, refuses it with one small -32600 error naming the bound,
// and its peak RSS barely moves. (Each item used to get a goroutine and an answer:
// 800 MB out and 2.96 GB of RSS.)
func TestBatchFloodBounded(t *testing.T) {
	// Not parallel: an 80000-request batch keeps the CPU busy.
	const n = 80000
	batch := floodBatch(n)
	for _, front := range []string{"stdio", "http"} {
		t.Run(front, func(t *testing.T) {
			h := newHome(t, nil)
			h.writeConfig(map[string]any{"servers": map[string]any{"fx": h.fixtureServer(nil)}})
			var pid int
			var answer []byte
			var before int64
			switch front {
			case "stdio":
				s := h.serveStdio("--no-memory")
				pid = s.cmd.Process.Pid
				before = peakRSS(pid)
				ch := s.expect("null")
				s.sendRaw(batch)
				answer = s.wait(ch, "the batch").raw
			case "http":
				cmd, url, _ := startHTTPProcess(t, h.env(), "--no-memory")
				pid = cmd.Process.Pid
				post := func(sid string, body []byte) (*http.Response, []byte) {
					req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Accept", "application/json, text/event-stream")
					if sid != "" {
						req.Header.Set("Mcp-Session-Id", sid)
					}
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					b, _ := io.ReadAll(resp.Body)
					return resp, b
				}
				resp, _ := post("", []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`))
				sid := resp.Header.Get("Mcp-Session-Id")
				if sid == "" {
					t.Fatalf("initialize: status %d", resp.StatusCode)
				}
				before = peakRSS(pid)
				_, answer = post(sid, batch)
			}
			after := peakRSS(pid)
			t.Logf("%s: a %d-byte batch of %d messages: a %d-byte answer; peak RSS %d -> %d MiB", front, len(batch), n, len(answer), before>>20, after>>20)
			if !bytes.Contains(answer, []byte(`-32600`)) || !bytes.Contains(answer, []byte("batch of 80000 messages: at most 256")) {
				t.Errorf("answer: %.300s", answer)
			}
			if len(answer) > 1024 {
				t.Errorf("a %d-byte answer to a refused batch", len(answer))
			}
			if before > 0 && after-before > 64<<20 {
				t.Errorf("peak RSS grew by %d MiB for one refused batch", (after-before)>>20)
			}
		})
	}
}
