// Package skipper is a test package whose one test skips for a missing
// prerequisite: TestSummarySurvivesRedirection runs go test on it.
package skipper

import (
	"os"
	"testing"

	"github.com/nexus-mcp/nexus/internal/skips"
)

func TestMain(m *testing.M) { os.Exit(skips.Main(m)) }

func TestNeedsSomething(t *testing.T) {
	skips.Need(t, "something", "install it", "something is missing")
}
