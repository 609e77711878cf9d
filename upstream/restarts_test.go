package upstream

import (
	"strings"
	"testing"
	"time"
)

// TestRestarts replays a server's life as the supervisor sees it and checks
// what the policy says after each event: the wait before the next attempt,
// "give-up", or "-" when it says nothing. Events: "fail" (a start that
// failed), "crash<up>" (a connection that ended after up), "lost<up>" (one
// that ended because the server forgot the session: the next attempt goes at
// once, its wait unspent), "connect", "fresh" (one attempt asked for after
// giving up), "idle" (a stop of the gateway's own). A wait said is spent
// before the next event, unless it was a "lost" one's.
func TestRestarts(t *testing.T) {
	fails := func(n int) string { return strings.TrimSpace(strings.Repeat("fail ", n)) }
	tests := []struct {
		name   string
		events string
		want   string
	}{
		{"backoff doubles, then gives up",
			fails(8),
			"250ms 500ms 1s 2s 4s 8s 16s give-up"},
		{"a fresh attempt that fails gives up again",
			fails(8) + " fresh fail",
			"250ms 500ms 1s 2s 4s 8s 16s give-up - give-up"},
		{"a fresh attempt that connects starts the count afresh",
			fails(8) + " fresh connect crash1s",
			"250ms 500ms 1s 2s 4s 8s 16s give-up - - 250ms"},
		{"a stable connection starts the count afresh",
			"fail fail fail connect crash2m",
			"250ms 500ms 1s - 250ms"},
		{"an unstable one does not",
			"fail fail fail connect crash59s",
			"250ms 500ms 1s - 2s"},
		{"crashes in a row give up",
			strings.Repeat("connect crash1s ", 8),
			"- 250ms - 500ms - 1s - 2s - 4s - 8s - 16s - give-up"},
		{"an attempt made at once spends no wait, but counts",
			"fail connect lost1s fail " + fails(5),
			"250ms - 500ms 500ms 1s 2s 4s 8s give-up"},
		{"an idle stop is not a failure",
			"fail fail fail connect idle fail",
			"250ms 500ms 1s - - 250ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r Restarts
			var got []string
			unspent := false // the last wait said was not spent
			say := func(again bool) {
				if again {
					got = append(got, r.Backoff().String())
				} else {
					got = append(got, "give-up")
				}
			}
			for _, ev := range strings.Fields(tc.events) {
				if len(got) > 0 && got[len(got)-1] != "-" && got[len(got)-1] != "give-up" && !unspent {
					r.Waited()
				}
				unspent = false
				switch {
				case ev == "fail":
					say(r.Failed(0))
				case strings.HasPrefix(ev, "crash"), strings.HasPrefix(ev, "lost"):
					up, err := time.ParseDuration(strings.TrimLeft(ev, "crashlot"))
					if err != nil {
						t.Fatal(err)
					}
					say(r.Failed(up))
					unspent = strings.HasPrefix(ev, "lost")
				case ev == "connect":
					r.Connected()
					got = append(got, "-")
				case ev == "fresh":
					r.Fresh()
					got = append(got, "-")
				case ev == "idle":
					r.Reset()
					got = append(got, "-")
				default:
					t.Fatalf("unknown event %q", ev)
				}
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("\n got %s\nwant %s", g, tc.want)
			}
		})
	}
}
