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
// one embedder for the hits it widens beyond canonical forms (memory/canon),
// and only when no word that always counts differs: with an HTTP embedder
// a neighbour at or above Serve is served; from Verify up (up to Serve for
// an HTTP embedder) a Verifier decides (a miss without one). The lexical
// embedder's score serves nothing by itself.
type Thresholds struct {
	Serve  float64
	Verify float64
}

// Calibrated defaults, see doc.go ("Thresholds") and tests/semantic.
var (
	// LexicalThresholds were calibrated on tests/semantic/pairs.json
	// (lexical v2) when the score decided: 0.85 with the guard served 80%
	// of paraphrases and no near-miss, but later sets found near-misses
	// above 1.0 ("why" / "when"). Serve is kept for compatibility; Verify
	// bounds what a verifier is asked.
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
