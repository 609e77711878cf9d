package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/memory/embedder"
)

// Measured with the lexical embedder (v2) at its default thresholds
// (serve 0.85): 174/213 paraphrases served, 0/206 near-misses. The floor
// leaves a margin of five pairs.
const minLexicalRecall = 169

func TestLexicalEvaluation(t *testing.T) {
	t.Parallel() // each evaluation opens a memory of its own, in its own TempDir
	set, err := LoadSet("pairs.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Paraphrases) < 150 || len(set.NearMisses) < 150 {
		t.Fatalf("set too small: %d paraphrases, %d near-misses", len(set.Paraphrases), len(set.NearMisses))
	}
	e := embedder.NewLexical()
	r, err := Evaluate(context.Background(), set, e, memory.DefaultThresholds(e.Identity()), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	r.Print(&b, testing.Verbose())
	t.Log("\n" + b.String())
	if r.FalseGuard != 0 || r.E2EFalse != 0 {
		t.Errorf("near-misses served: %d by score+guard, %d end to end", r.FalseGuard, r.E2EFalse)
	}
	if r.RecallGuard < minLexicalRecall || r.E2ERecall < minLexicalRecall {
		t.Errorf("paraphrase recall %d (end to end %d), want >= %d", r.RecallGuard, r.E2ERecall, minLexicalRecall)
	}
}

// TestNoNearMissServed: no set serves a near-miss, held-out ones included.
func TestNoNearMissServed(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"heldout.json", "roles.json"} {
		set, err := LoadSet(name)
		if err != nil {
			t.Fatal(err)
		}
		// Only the near-misses are checked here: replaying the paraphrases too
		// (TestLexicalEvaluation does, on pairs.json) doubled the test's CPU.
		set.Paraphrases = nil
		e := embedder.NewLexical()
		r, err := Evaluate(context.Background(), set, e, memory.DefaultThresholds(e.Identity()), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if r.FalseGuard != 0 || r.E2EFalse != 0 {
			var b bytes.Buffer
			r.Print(&b, true)
			t.Errorf("%s: near-misses served: %d by score+guard, %d end to end\n%s", name, r.FalseGuard, r.E2EFalse, b.String())
		}
	}
}
