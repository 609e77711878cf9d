// Command semantic evaluates memory's similarity hits on pairs.json:
// paraphrase recall and near-miss false hits, with and without the guard,
// for each embedder available (the offline lexical one always; the HTTP
// ones when a base URL is given).
//
//	go run ./tests/semantic [-v] [-pairs FILE] [-openai-url URL -openai-model M] [-ollama-url URL -ollama-model M]
//
// pairs.json is the evaluation set the guard and the lexical embedder
// were developed against; heldout.json (-pairs tests/semantic/heldout.json)
// was written afterwards and is only measured. roles.json (relative
// clauses, passives, "X when Y", "X of Y", scope prepositions) was written
// before the guard read roles and then developed against; roles-heldout.json
// was written after that and is only measured. canon-heldout.json (roles
// with and without relative pronouns, negation, quantity and rank, time and
// version, another entity, scope, comparatives and antonyms, question
// words; 64 + 64) was written after similarity hits became canonical forms
// (memory/canon) and measured once; relations-heldout.json (the same 8
// kinds, 64 + 64) after the compounds' relations, agent nouns, reduced
// relatives, routes and time possessives, measured once.
//
// The key for -openai-url comes from $OPENAI_API_KEY (or -openai-key).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/memory/embedder"
)

func main() {
	_, here, _, _ := runtime.Caller(0)
	var (
		pairs       = flag.String("pairs", filepath.Join(filepath.Dir(here), "pairs.json"), "evaluation set")
		verbose     = flag.Bool("v", false, "list every pair with its similarity and guard verdict")
		serve       = flag.Float64("serve", 0, "serve threshold (0: the embedder's default)")
		verify      = flag.Float64("verify", 0, "verify threshold (0: the embedder's default)")
		openaiURL   = flag.String("openai-url", os.Getenv("NEXUS_EVAL_OPENAI_URL"), "OpenAI-compatible base URL")
		openaiModel = flag.String("openai-model", envOr("NEXUS_EVAL_OPENAI_MODEL", "text-embedding-3-small"), "embedding model")
		openaiKey   = flag.String("openai-key", os.Getenv("OPENAI_API_KEY"), "API key")
		ollamaURL   = flag.String("ollama-url", os.Getenv("NEXUS_EVAL_OLLAMA_URL"), "Ollama base URL")
		ollamaModel = flag.String("ollama-model", envOr("NEXUS_EVAL_OLLAMA_MODEL", "nomic-embed-text"), "Ollama embedding model")
	)
	flag.Parse()
	set, err := LoadSet(*pairs)
	if err != nil {
		fail(err)
	}
	embedders := []embedder.Embedder{embedder.NewLexical()}
	if *openaiURL != "" {
		e, err := embedder.NewOpenAIEmbedder(embedder.HTTPConfig{BaseURL: *openaiURL, Model: *openaiModel, APIKey: *openaiKey, Timeout: 30e9})
		if err != nil {
			fail(err)
		}
		embedders = append(embedders, e)
	}
	if *ollamaURL != "" {
		e, err := embedder.NewOllamaEmbedder(embedder.HTTPConfig{BaseURL: *ollamaURL, Model: *ollamaModel, Timeout: 60e9})
		if err != nil {
			fail(err)
		}
		embedders = append(embedders, e)
	}
	dir, err := os.MkdirTemp("", "nexus-semantic-eval")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	fmt.Printf("evaluation set %s: %d paraphrase pairs, %d near-miss pairs\n\n", *pairs, len(set.Paraphrases), len(set.NearMisses))
	for i, e := range embedders {
		th := memory.DefaultThresholds(e.Identity())
		if *serve > 0 {
			th.Serve = *serve
		}
		if *verify > 0 {
			th.Verify = *verify
		}
		th.Verify = min(th.Verify, th.Serve)
		r, err := Evaluate(context.Background(), set, e, th, filepath.Join(dir, fmt.Sprint(i)))
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", e.Identity().ID(), err)
			continue
		}
		var b bytes.Buffer
		r.Print(&b, *verbose)
		fmt.Println(b.String())
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
