package memory

import (
	"context"
	"fmt"

	"github.com/nexus-mcp/nexus/memory/embedder"
)

// Validate reports thresholds out of range: 0 <= Verify <= Serve <= 1, with
// Serve above 0. Config calls it at load and Open again, so a value that loads
// is one memory accepts.
func (t Thresholds) Validate() error {
	if t.Serve <= 0 || t.Serve > 1 || t.Verify < 0 || t.Verify > t.Serve {
		return fmt.Errorf("memory: thresholds serve %v verify %v: want 0 <= verify <= serve <= 1", t.Serve, t.Verify)
	}
	return nil
}

// Thresholds are the similarity (cosine, 1 = same direction) cut-offs of
// one embedder: at or above Serve a neighbour is served; from Verify up to
// Serve it is a gray zone that a Verifier decides (a miss without one).
type Thresholds struct {
	Serve  float64
	Verify float64
}

// Calibrated defaults, see doc.go ("Thresholds") and tests/semantic.
var (
	// LexicalThresholds were calibrated on tests/semantic/pairs.json
	// (lexical v2): with the guard, 0.85 serves 80% of paraphrases and no
	// near-miss; near-misses the guard cannot catch (entity swaps: "auth
	// module" / "billing module") score up to 0.82, so 0.70 to 0.85 is
	// left to a verifier.
	LexicalThresholds = Thresholds{Serve: 0.85, Verify: 0.70}
	// NeuralThresholds are the defaults for HTTP embedders (sentence
	// models), as the earlier product used them; calibrate per model
	// with `go run ./tests/semantic -openai-url ...`.
	NeuralThresholds = Thresholds{Serve: 0.92, Verify: 0.85}
)

// DefaultThresholds returns the calibrated thresholds for an embedder.
func DefaultThresholds(id embedder.Identity) Thresholds {
	if id.Name == embedder.LexicalName {
		return LexicalThresholds
	}
	return NeuralThresholds
}

// Verifier decides gray-zone matches: are two requests to tool the same
// request? An error means no verdict (a miss).
type Verifier interface {
	Same(ctx context.Context, tool, a, b string) (bool, error)
}
