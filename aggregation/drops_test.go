package aggregation

import (
	"bufio"
	"context"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNotificationDropsLogged: a child's flood of notifications that the gateway
// cannot keep up with is dropped with a log line a second that counts the drops,
// not a line per drop.
func TestNotificationDropsLogged(t *testing.T) {
	const flood = 100000
	f := newFixture(t)
	c := f.client(frontHTTP, "other")
	// A stdio client that stops reading holds up the routing of log messages, the
	// way a slow client would: the child's notifications queue, then drop.
	toGW, fromClient := io.Pipe()
	fromGW, toClient := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = f.g.ServeStdio(ctx, toGW, toClient, "other")
	}()
	t.Cleanup(func() { cancel(); fromClient.Close(); fromGW.Close(); <-served })
	go func() {
		_, _ = io.WriteString(fromClient, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"stuck","version":"1"}}}`+"\n")
	}()
	if _, err := bufio.NewReader(fromGW).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	// The stuck client reads nothing more.

	start := time.Now()
	m := c.requestWithin("tools/call", map[string]any{"name": "good__shout", "arguments": map[string]any{"n": flood}}, time.Minute)
	if m.Error != nil || !strings.Contains(string(m.Result), "sent=100000") {
		t.Fatalf("the flood: %s %v", m.Result, m.Error)
	}
	// Every drop is counted once the last second's line is out; the queue and the
	// message being routed hold at most a few hundred.
	count := regexp.MustCompile(`count=(\d+)`)
	var lines []string
	dropped := 0
	deadline := time.After(10 * time.Second)
	for dropped < flood-1000 {
		select {
		case <-f.logs.wrote:
		case <-deadline:
			t.Fatalf("%d notifications: %d drops counted in %d log lines within 10s", flood, dropped, len(lines))
		}
		lines = f.logs.lines("from the child: the gateway is not keeping up")
		dropped = 0
		for _, l := range lines {
			n := 1 // a line without a count is one drop
			if m := count.FindStringSubmatch(l); m != nil {
				n, _ = strconv.Atoi(m[1])
			}
			dropped += n
		}
	}
	took := time.Since(start)
	t.Logf("%d notifications: %d dropped, in %d log lines over %s", flood, dropped, len(lines), took.Round(time.Millisecond))
	if most := int(took/time.Second) + 2; len(lines) > most {
		t.Errorf("%d log lines for %d drops in %s, want at most %d", len(lines), dropped, took, most)
	}
}
