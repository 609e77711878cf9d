package aggregation

import (
	"fmt"
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
