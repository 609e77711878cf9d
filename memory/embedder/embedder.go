// Package embedder turns the free text of tool calls into vectors for
// memory's similarity hits: the built-in Lexical embedder (offline,
// deterministic), OpenAI-compatible /v1/embeddings and Ollama's /api/embed,
// and, sharing their HTTP client, the chat model that verifies gray-zone
// matches (ChatVerifier). Memory records an embedder's Identity with every
// vector and compares only vectors of one identity and length.
package embedder

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// Embedder turns texts into vectors for similarity hits. Implementations
// must be safe for concurrent use. Memory records Identity with every
// stored vector and compares a new vector only with vectors of the same
// identity (and the same length), so changing embedder, model or
// dimensions never compares vectors of different origins.
type Embedder interface {
	// Embed returns one vector per text, in order. Vectors need not be
	// unit length: memory normalises them.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Identity names the embedder, its model and its dimensions (0 if
	// the embedder learns them from its first answer).
	Identity() Identity
}

// Identity is where vectors come from.
type Identity struct {
	Name  string // "lexical", "openai", "ollama"
	Model string // the model, or the algorithm version for built-ins
	Dims  int    // 0: not known in advance
}

// ID is the identity as stored with each vector: "name/model". The vector
// length is recorded next to it.
func (id Identity) ID() string { return id.Name + "/" + id.Model }

// normalize scales v to unit length in place; it fails for a zero, NaN or
// infinite vector, which cannot be compared by cosine.
func Normalize(v []float32) error {
	var s float64
	for _, f := range v {
		x := float64(f)
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return errors.New("vector has NaN or infinite components")
		}
		s += x * x
	}
	if s == 0 {
		return errors.New("vector is zero")
	}
	n := math.Sqrt(s)
	for i, f := range v {
		v[i] = float32(float64(f) / n)
	}
	return nil
}

// Cosine returns the cosine similarity of a and b (0 if their lengths
// differ or either is zero).
func Cosine(a, b []float32) float64 {
	if len(a) != len(b) {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

// ---- HTTP embedders ----

// CheckVectors verifies the count and lengths and normalises.
func CheckVectors(vs [][]float32, n, dims int) error {
	if len(vs) != n {
		return fmt.Errorf("got %d vectors for %d texts", len(vs), n)
	}
	for i, v := range vs {
		if len(v) == 0 {
			return fmt.Errorf("vector %d is empty", i)
		}
		if dims > 0 && len(v) != dims {
			return fmt.Errorf("vector %d has %d dimensions, want %d", i, len(v), dims)
		}
		if len(v) != len(vs[0]) {
			return fmt.Errorf("vectors have different lengths (%d and %d)", len(vs[0]), len(v))
		}
		if err := Normalize(v); err != nil {
			return fmt.Errorf("vector %d: %w", i, err)
		}
	}
	return nil
}
