package tests

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRevocationIsFinal: while a client calls a tool in a loop, `nexus policy revoke`
// returns only once every running gateway applies it: no call sent after the command
// returned reaches the child, over stdio and HTTP.
func TestRevocationIsFinal(t *testing.T) {
	for _, front := range []string{"stdio", "http"} {
		t.Run(front, func(t *testing.T) {
			h := newHome(t, nil)
			agent := "bot"
			if front == "http" {
				agent = "anonymous" // loopback without tokens
			}
			h.writeConfig(map[string]any{
				"servers": map[string]any{"fx": map[string]any{"command": built.fixture,
					"env": map[string]string{"FIXTURE_CALL_LOG": h.log, "FIXTURE_LOG_ARGS": "1"}}},
				"policy": map[string]any{"agents": map[string]any{agent: map[string]any{"allow": []string{"fx.*"}}}},
			})
			var call func(msg string) (refused bool)
			if front == "stdio" {
				s := h.serveStdio("--no-memory", "--agent", agent)
				call = func(msg string) bool {
					r := s.call("fx__echo", map[string]any{"message": msg})
					return r.IsError && strings.Contains(r.text(), "may not call")
				}
			} else {
				url, stderr := h.serveHTTP("--no-memory")
				c, err := httpClient(t, url, "")
				if err != nil {
					t.Fatalf("%v\n%s", err, stderr)
				}
				call = func(msg string) bool {
					isErr, text := polHTTPCall(t, c, "fx__echo", map[string]any{"message": msg})
					return isErr && strings.Contains(text, "may not call")
				}
			}
			if call("warm-up") {
				t.Fatal("refused before the revocation")
			}

			type sent struct {
				msg     string
				at      time.Time
				refused bool
			}
			var mu sync.Mutex
			var calls []sent
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					msg := fmt.Sprintf("m%d", i)
					at := time.Now()
					refused := call(msg)
					mu.Lock()
					calls = append(calls, sent{msg, at, refused})
					mu.Unlock()
				}
			}()
			// made counts the loop's calls sent at or after since.
			made := func(since time.Time) int {
				mu.Lock()
				defer mu.Unlock()
				n := 0
				for _, c := range calls {
					if !c.at.Before(since) {
						n++
					}
				}
				return n
			}
			eventually(t, 30*time.Second, "calls flowing", func() bool { return made(time.Time{}) >= 3 })
			_, stderr, code := h.nexus("policy", "revoke", "--agent", agent, "fx.*")
			returned := time.Now()
			if code != 0 {
				t.Fatalf("policy revoke: exit %d\n%s", code, stderr)
			}
			if !strings.Contains(stderr, "in force in 1 running gateway") {
				t.Errorf("the command did not confirm the running gateway:\n%s", stderr)
			}
			eventually(t, 30*time.Second, "calls after the command returned", func() bool { return made(returned) >= 3 })
			close(stop)
			<-done

			logged, _ := os.ReadFile(h.log)
			reached := map[string]bool{}
			for _, line := range strings.Fields(string(logged)) {
				reached[strings.TrimPrefix(line, "echo:")] = true
			}
			before, after := 0, 0
			for _, c := range calls {
				if c.at.Before(returned) {
					before++
					continue
				}
				after++
				if !c.refused || reached[c.msg] {
					t.Errorf("call %s, sent %s after the command returned, reached the child (refused: %v)", c.msg, c.at.Sub(returned), c.refused)
				}
			}
			if before == 0 || after == 0 {
				t.Fatalf("the loop made %d calls before and %d after the command returned; the test proves nothing", before, after)
			}
			t.Logf("%d calls before the command returned, %d after, all of them refused", before, after)
		})
	}
}
