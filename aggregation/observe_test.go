package aggregation

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestGuard: the read-only pages go to agents with a token, and without one only
// when the config says status.public (a local process that holds no token must not
// read the servers' errors and the agents' rights); the Host/Origin guard applies
// to everyone.
func TestGuard(t *testing.T) {
	t.Parallel()
	f := newFixture(t) // tokens are configured
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("the page")) })
	h := f.g.Guard(page)
	remote := &net.TCPAddr{IP: net.ParseIP("192.0.2.10"), Port: 8765}
	loopback := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 8765}
	unix := &net.UnixAddr{Name: "/home/u/.nexus/run/123.sock", Net: "unix"} // the console nexus console proxies
	bearer := map[string]string{"Authorization": "Bearer " + tokens["tester"]}
	tests := []struct {
		name       string
		public     bool
		local      net.Addr
		remoteAddr string
		host       string
		header     map[string]string
		method     string
		want       int
	}{
		{"remote without token", false, remote, "198.51.100.7:5555", "192.0.2.10:8765", nil, "GET", http.StatusUnauthorized},
		{"remote with a wrong token", false, remote, "198.51.100.7:5555", "192.0.2.10:8765", map[string]string{"Authorization": "Bearer nope"}, "GET", http.StatusUnauthorized},
		{"remote with a token", false, remote, "198.51.100.7:5555", "192.0.2.10:8765", bearer, "GET", http.StatusOK},
		{"remote with a token, foreign origin", false, remote, "198.51.100.7:5555", "192.0.2.10:8765", map[string]string{"Authorization": "Bearer " + tokens["tester"], "Origin": "http://evil.example"}, "GET", http.StatusForbidden},
		{"loopback without token", false, loopback, "127.0.0.1:5555", "127.0.0.1:8765", nil, "GET", http.StatusUnauthorized},
		{"loopback with a token", false, loopback, "127.0.0.1:5555", "127.0.0.1:8765", bearer, "GET", http.StatusOK},
		{"loopback without token, public", true, loopback, "127.0.0.1:5555", "127.0.0.1:8765", nil, "GET", http.StatusOK},
		{"remote without token, public", true, remote, "198.51.100.7:5555", "192.0.2.10:8765", nil, "GET", http.StatusOK},
		{"loopback, rebound host name, public", true, loopback, "127.0.0.1:5555", "evil.example:8765", nil, "GET", http.StatusForbidden},
		{"loopback, another port's page, public", true, loopback, "127.0.0.1:5555", "127.0.0.1:8765", map[string]string{"Origin": "http://127.0.0.1:3000"}, "GET", http.StatusForbidden},
		{"loopback, POST", false, loopback, "127.0.0.1:5555", "127.0.0.1:8765", bearer, "POST", http.StatusMethodNotAllowed},
		{"remote peer on a loopback listener", false, loopback, "198.51.100.7:5555", "127.0.0.1:8765", nil, "GET", http.StatusUnauthorized},
		{"unix socket with a token", false, unix, "@", "127.0.0.1:40123", bearer, "GET", http.StatusOK},
		{"unix socket, rebound host name", false, unix, "@", "evil.example:40123", bearer, "GET", http.StatusForbidden},
		{"unix socket, another port's page", false, unix, "@", "127.0.0.1:40123", map[string]string{"Authorization": "Bearer " + tokens["tester"], "Origin": "http://127.0.0.1:3000"}, "GET", http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := *f.g.Config()
			cfg.Status.Public = tt.public
			if err := f.g.Reload(&cfg); err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest(tt.method, "http://"+tt.host+"/", nil)
			r.RemoteAddr = tt.remoteAddr
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, tt.local))
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.want, w.Body)
			}
			if tt.want != http.StatusOK && w.Body.String() == "the page" {
				t.Fatal("the page was served to a refused client")
			}
		})
	}
}

// recorder keeps the calls an Observer sees.
type recorder struct{ calls chan Call }

func (r *recorder) Observe(c *Call) { r.calls <- *c }

// TestObserverSeesEveryCall: each call reaches the observer once, with the
// decision, the outcome and the names a metric may use.
func TestObserverSeesEveryCall(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rec := &recorder{calls: make(chan Call, 16)}
	f.g.observer = rec
	tests := []struct {
		agent, tool string
		want        Outcome
		known       bool
		decided     bool
	}{
		{"other", "good__echo", OutcomeOK, true, true},
		{"tester", "evil__echo", OutcomeRefused, true, true},
		{"tester", "nope__nothing", OutcomeRPCError, true, false},
		{"stranger", "good__echo", OutcomeOK, false, true}, // the built-in default: @readonly
	}
	for _, tt := range tests {
		_, _ = f.g.Call(context.Background(), tt.agent, tt.tool, json.RawMessage(`{"message":"hi"}`))
		c := <-rec.calls
		if c.Outcome != tt.want || c.KnownAgent != tt.known || c.Decided != tt.decided || c.Agent != tt.agent || c.Requested != tt.tool {
			t.Errorf("%s calls %s: observed %+v", tt.agent, tt.tool, c)
		}
		if tt.decided && (c.Tool == "" || c.Server == "" || c.Rule == "" || c.Origin == "") {
			t.Errorf("%s calls %s: the decision is not recorded: %+v", tt.agent, tt.tool, c)
		}
		if c.Duration <= 0 {
			t.Errorf("%s calls %s: no duration", tt.agent, tt.tool)
		}
	}
	select {
	case c := <-rec.calls:
		t.Errorf("an extra observation: %+v", c)
	default:
	}
}

func TestCacheStatus(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		`{"content":[],"_meta":{"nexus/cache":{"status":"hit","age_ms":3}}}`:                 "hit",
		`{"content":[{"type":"text","text":"\"nexus/cache\":{\"status\":\"hit\""}]}`:         "",
		`{"content":[],"_meta":{"nexus/cache":{"status":"semantic_hit","similarity":0.93}}}`: "semantic_hit",
		`{"content":[]}`: "",
	}
	for raw, want := range tests {
		if got := cacheStatus(json.RawMessage(raw)); got != want {
			t.Errorf("cacheStatus(%s) = %q, want %q", raw, got, want)
		}
	}
}
