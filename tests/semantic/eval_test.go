package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/memory/embedder"
)

// TestPairSets replays every pair set of the repository through Memory.Call
// with the built-in lexical embedder and no verifier: no near-miss may be
// served, and paraphrase recall must not fall below what was measured when
// hits became canonical forms (each floor is the measured figure less a
// margin of about 5%, so a rewrite lost shows and a rewrite gained does not
// break the test).
func TestPairSets(t *testing.T) {
	for _, tc := range []struct {
		file      string
		minRecall int // paraphrases served end to end
	}{
		{"pairs.json", minRecallPairs},
		{"heldout.json", minRecallHeldout},
		{"roles.json", minRecallRoles},
		{"roles-heldout.json", minRecallRolesHeldout},
		{"canon-heldout.json", minRecallCanonHeldout},
		{"relations-heldout.json", minRecallRelationsHeldout},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel() // each evaluation opens a memory of its own, in its own TempDir
			set, err := LoadSet(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			e := embedder.NewLexical()
			r, err := Evaluate(context.Background(), set, e, memory.DefaultThresholds(e.Identity()), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			r.Print(&b, testing.Verbose())
			t.Log("\n" + b.String())
			if r.FalseCanon != 0 || r.E2EFalse != 0 {
				t.Errorf("near-misses served: %d by canonical form, %d end to end", r.FalseCanon, r.E2EFalse)
			}
			if r.E2ERecall != r.RecallCanon {
				t.Errorf("end to end served %d paraphrases, canonical forms %d: memory does not serve what canon decides", r.E2ERecall, r.RecallCanon)
			}
			if r.E2ERecall < tc.minRecall {
				t.Errorf("paraphrase recall %d, want >= %d", r.E2ERecall, tc.minRecall)
			}
		})
	}
}

// Recall floors: the figures measured, less a margin. When hits became
// canonical forms: pairs.json 75/213 (74 since "what" is kept before a
// verb), heldout.json 11/40, roles.json 44/56, roles-heldout.json 21/25.
// With relations a compound leaves unsaid ("in" among them), agent nouns,
// explanations, reduced relatives of "be", routes, time possessives and
// number bounds: pairs.json 116/213, heldout.json 16/40, roles.json
// 45/56, roles-heldout.json 21/25, canon-heldout.json 60/64.
const (
	minRecallPairs        = 110
	minRecallHeldout      = 15
	minRecallRoles        = 43
	minRecallRolesHeldout = 20
	// canon-heldout.json was written after canonical forms were built
	// and measured once: 52/64 paraphrases, 0/64 near-misses (54/64 after
	// two later fixes of false equalities: inflection rather than Porter
	// stems, "what" kept before a verb; 60/64 with the rewrites above).
	minRecallCanonHeldout = 57
	// relations-heldout.json was written after the rewrites above, by
	// their author, and measured once: 58/64 paraphrases, 0/64
	// near-misses.
	minRecallRelationsHeldout = 55
)
