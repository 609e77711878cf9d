package embedder

import (
	"context"
	"hash/fnv"

	"github.com/nexus-mcp/nexus/memory/words"
)

const (
	LexicalName = "lexical"
	// LexicalDims is the lexical embedder's vector length.
	LexicalDims = 512
)

// Lexical is the built-in, offline and deterministic embedder:
// feature hashing (FNV-1a, signed) of word unigrams, word bigrams and
// character trigrams of each word, weighted by term frequency, L2
// normalised, LexicalDims dimensions. Words are lower-cased runs of
// unicode letters and digits, Porter-stemmed ("connecting" = "connected"),
// mapped through a table of abbreviations and synonyms common in code and
// documentation queries (auth = authentication, repo = repository,
// config = configuration, db = database, k8s = kubernetes, PR = pull
// request, docs = documentation, env = environment ...), and stripped of
// query verbs and function words ("show", "find", "the", "in"). Beyond that
// table it knows nothing of meaning: "car" and "automobile" are unrelated.
type Lexical struct{}

// NewLexical returns the built-in embedder.
func NewLexical() Lexical { return Lexical{} }

// Identity implements Embedder. The model names the algorithm version:
// change it whenever the features change.
func (Lexical) Identity() Identity {
	return Identity{Name: LexicalName, Model: "v2", Dims: LexicalDims}
}

// Embed implements Embedder; it never fails.
func (e Lexical) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = e.Vector(t)
	}
	return out, nil
}

// Vector returns the unit-length embedding of text.
func (Lexical) Vector(text string) []float32 {
	v := make([]float32, LexicalDims)
	words := lexicalWords(text)
	add := func(feature string, w float32) {
		h := fnv.New64a()
		h.Write([]byte(feature))
		x := h.Sum64()
		sign := float32(1)
		if x>>63 == 1 {
			sign = -1
		}
		v[x%LexicalDims] += sign * w
	}
	for i, w := range words {
		add("u:"+w, 1)
		if i > 0 {
			add("b:"+words[i-1]+" "+w, 0.5)
		}
		r := []rune("#" + w + "#")
		for j := 0; j+3 <= len(r); j++ {
			add("t:"+string(r[j:j+3]), 0.25)
		}
	}
	if Normalize(v) != nil {
		v[0] = 1 // empty text: any fixed unit vector
	}
	return v
}

// lexicalWords returns the canonical words of text that are not filler.
func lexicalWords(text string) []string {
	var out []string
	for _, t := range words.Tokens(text) {
		if !words.IsFiller(t.Raw) && !words.IsFiller(t.Canon) {
			out = append(out, t.Canon)
		}
	}
	return out
}
