package memory

import (
	"os"
	"testing"

	"github.com/nexus-mcp/nexus/internal/skips"
)

// TestMain prints, at the end, the tests skipped for a missing prerequisite.
func TestMain(m *testing.M) { os.Exit(skips.Main(m)) }
