package aggregation

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/nexus-mcp/nexus/config"
)

// TestStartFailureSaysHowItExited: a server that exits as it starts is
// reported with its exit status and the error line of its stderr, where a
// person reads why it is down (its status, a call's "not running", doctor).
func TestStartFailureSaysHowItExited(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse("test.json", []byte(fmt.Sprintf(`{"servers": {"bad": {"command": %q, "args": ["-test.run=^$"], "env": {"NEXUS_TEST_CHILD": "exits"}}}}`, os.Args[0])))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{OneAttempt: true})
	if err != nil {
		t.Fatal(err)
	}
	startGateway(t, g)
	<-g.Settled()
	st := g.Servers()[0]
	for _, want := range []string{"the server exited: exit status 3", "its stderr says: Error: FOO_TOKEN is not set"} {
		if !strings.Contains(st.Error, want) {
			t.Errorf("status error %q lacks %q", st.Error, want)
		}
	}
}

// TestRemoteStartFailureSaysWhy: a remote server where nothing listens is
// reported as such, with what to check.
func TestRemoteStartFailureSaysWhy(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	ln.Close() // nothing listens there now
	cfg, err := config.Parse("test.json", []byte(fmt.Sprintf(`{"servers": {"web": {"url": %q}}}`, url)))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{OneAttempt: true})
	if err != nil {
		t.Fatal(err)
	}
	startGateway(t, g)
	<-g.Settled()
	st := g.Servers()[0]
	want := "nothing answers at " + url + ": start the server, or fix servers.web.url"
	if !strings.Contains(st.Error, want) || !strings.Contains(st.Error, "connection refused") {
		t.Errorf("status error %q, want %q and the refusal in it", st.Error, want)
	}
}
