// Package canon decides when two free-text queries ask the same thing, in a
// way that can be explained: each text is rewritten to a canonical form by
// a fixed set of meaning-preserving rewrites, and two texts are the same
// question only when their canonical forms match (Match: equal, but for a
// relation one states and the other's bare compound leaves unsaid). What
// was rewritten is recorded, so a similarity hit can say which rewrites
// made it one.
//
// The rewrites (Rule names):
//   - article: "a", "an", "the" are dropped; not the letter "a" ("vitamin
//     a", "plan a or b", "option A");
//   - auxiliary: "do", "does", "did", a form of "be" that is not a passive's,
//     a form of "have" before a participle;
//   - inflection: plural, -ed, -ing and third-person endings are undone
//     ("services" = "service", "works" = "work"; not derivations:
//     "generic" is not "general", "deployer" not "deployment");
//   - synonym: the word table of memory/words (abbreviations and synonyms:
//     "repo" = "repository", "pull request" = "pr"), and spellings of one
//     preposition, quantifier, negation or verb ("within" = "in", "related
//     to" = "about", "every" = "all", "lacking" = "without", "having" =
//     "with"; before a number "more than" = "over", "less than" = "under");
//   - question-form: a leading "which" or "what" before a noun ("which
//     queues does the notifier consume" = "queues the notifier consumes"),
//     "what is/are", "who is/are" before a noun;
//   - imperative: a leading "show me", "list all", "find", "can you",
//     "please" ("get" only before "me", "all" or an article: "get requests"
//     may be HTTP's); an explanation asked for as "X explained",
//     "explanation of X" or "X explanation" is "explain X";
//   - how-to: "how do I X", "how can we X" and "how to X" are "how X";
//   - agent-noun: "who owns X" = "who is owning X" = "owner of X", "who
//     approved X" = "approver of X" (a subject question with an object:
//     "who does X call" asks for the object);
//   - relative-pronoun: "that", "which" and "who" introducing a clause are
//     one marker, dropped before the subject of an object clause ("queues
//     that the notifier consumes" = "queues the notifier consumes");
//   - relative-clause: "services calling X" = "services that call X";
//     "engineers who are not in the office" = "engineers not in the
//     office", "endpoints that are slower than 200ms" = "endpoints slower
//     than 200ms" (a be-clause whose predicate is a preposition, a
//     comparative with "than" or a negated participle);
//   - passive: "X called by Y" = "X Y calls", "X is monitored by Y" = "Y
//     monitors X", the roles kept; "get" and a question's inverted "be"
//     make passives too ("when did X get added" = "when was X added");
//   - possessive and of-form: "the plugin's dependencies" = "dependencies of
//     the plugin"; a time's possessive goes after its noun ("tomorrow's
//     meetings" = "meetings tomorrow");
//   - compound: "for", "about", "on" and "in" between two noun phrases
//     say a relation a compound leaves unsaid: "tests for the tokenizer"
//     and "tokenizer tests" match, "flaky tests in CI" and "CI flaky tests"
//     too, but "X for Y" is not "Y's X" nor "X in Y" (stated relations
//     must agree). A route after its noun is the compound before it
//     ("flights from paris to london" = "paris to london flights"); "to",
//     "from" alone, "with" and other prepositions of scope or direction
//     stay where they are;
//   - clause-order: "when the build breaks, notify slack" = "notify slack
//     when the build breaks";
//   - number-word, contraction, version-prefix: "ten" = "10", "doesn't" =
//     "does not", "v1.2" = "version 1.2" = "1.2".
//
// Everything else counts, by construction rather than by a list of
// vetoes: a word no rewrite removes stays in the form, in its order. So
// question words, negations in all their forms, quantities, ranks,
// numbers, versions, dates, prepositions, comparatives and names always
// count, and so does the order of the roles: "packages the logger depends
// on" is [pkg logger depend on], "packages that depend on the logger" is
// [pkg @rel depend on logger]. The only reorderings are the passive's, the
// of-form's and the compound's, the route's and the time possessive's,
// each tied to the words that mark it ("by", "of", "'s", "for", "from ...
// to").
//
// Canon errs towards misses: a paraphrase no rewrite covers (a synonym
// outside the table, a reordered clause, a derivation: "configuring SSO"
// / "SSO configuration") is a miss, never a hit.
package canon

import (
	"slices"
	"strings"
)

// Form is a text's canonical form and the rewrites that produced it.
type Form struct {
	Words   []string // canonical words in order
	text    string
	applied []applied
}

// applied is one rewrite applied to a text: its rule and what it changed.
type applied struct{ rule, detail string }

// record collects the rewrites applied to one text.
type record struct{ list []applied }

func (r *record) add(rule, detail string) { r.list = append(r.list, applied{rule, detail}) }

// String is the form's words joined by spaces.
func (f Form) String() string { return strings.Join(f.Words, " ") }

// Normalize returns the canonical form of text.
func Normalize(text string) Form {
	var rec record
	ts := lex(text, &rec)
	ts = letters(ts)
	ts = numbers(ts, &rec)
	ts = joinPhrases(ts, &rec)
	ts = dropFraming(ts, &rec)
	ts = clauseOrder(ts, &rec)
	ts = howTo(ts, &rec)
	ts = agentNouns(ts, &rec)
	ts = explanations(ts, &rec)
	ts, npQuestion := questionForm(ts, &rec)
	ts = relativePronouns(ts, &rec)
	ts = reducedBe(ts, &rec)
	ts = passives(ts, npQuestion, &rec)
	ts = reducedRelatives(ts, &rec)
	ts = auxiliaries(ts, &rec)
	ts = dropArticles(ts, &rec)
	ts = timePossessives(ts, &rec)
	ts = fromTo(ts, &rec)
	ts = ofForms(ts, &rec)
	f := Form{text: text, applied: rec.list}
	for _, t := range ts {
		if t.kind != comma {
			f.Words = append(f.Words, t.canon)
		}
	}
	return f
}

// Same reports whether texts a and b have one canonical form and, if so,
// the rules of the rewrites that tell them apart, sorted: those applied to
// one text and not the other ("spelling" when they differ only in case or
// punctuation; none when they are the same text).
func Same(a, b string) (rules []string, ok bool) {
	fa, fb := Normalize(a), Normalize(b)
	if !Match(fa, fb) {
		return nil, false
	}
	return Explain(fa, fb), true
}

// Match reports whether two forms ask the same thing: their words are
// equal, except that a relation one states and the other leaves unsaid
// in a bare compound ("tests for the tokenizer" [tokenizer ~for test],
// "tokenizer tests" [tokenizer test]) is no difference. Two relations
// stated must be the same one. Match is not transitive: "tokenizer tests"
// matches both "tests for the tokenizer" and "tests in the tokenizer",
// which do not match each other.
func Match(a, b Form) bool {
	i, j := 0, 0
	for i < len(a.Words) || j < len(b.Words) {
		var x, y string
		if i < len(a.Words) {
			x = a.Words[i]
		}
		if j < len(b.Words) {
			y = b.Words[j]
		}
		switch {
		case x == y:
			i++
			j++
		case relationWord(x) && !relationWord(y) && j > 0 && j < len(b.Words):
			i++
		case relationWord(y) && !relationWord(x) && i > 0 && i < len(a.Words):
			j++
		default:
			return false
		}
	}
	return true
}

// relationWord reports a word of a form that marks a stated relation.
func relationWord(w string) bool { return len(w) > 1 && w[0] == '~' }

// Explain returns, sorted, the rules of the rewrites applied to one form
// and not the other (counted with multiplicity); "spelling" when no rule
// tells two different texts apart (they differ in case, spacing or
// punctuation), nothing for the same text.
func Explain(a, b Form) []string {
	count := map[applied]int{}
	for _, x := range a.applied {
		count[x]++
	}
	for _, x := range b.applied {
		count[x]--
	}
	var rules []string
	for x, n := range count {
		if n != 0 && !slices.Contains(rules, x.rule) {
			rules = append(rules, x.rule)
		}
	}
	if len(rules) == 0 && a.text != b.text {
		return []string{"spelling"}
	}
	slices.Sort(rules)
	return rules
}

// Significant returns the first word of a class that always counts
// (question words, negations, quantities, prepositions, modals, numbers
// and names, comparatives) that one form has more often than the other, or
// "" when they agree on all of them. A verifier is only asked about texts
// that agree: it may widen what counts as a paraphrase, never what counts
// as a difference.
func Significant(a, b Form) string {
	count := map[string]int{}
	for _, w := range a.Words {
		if significant(w) {
			count[strings.TrimPrefix(w, "~")]++
		}
	}
	for _, w := range b.Words {
		if significant(w) {
			count[strings.TrimPrefix(w, "~")]--
		}
	}
	var diff []string
	for w, n := range count {
		if n != 0 {
			diff = append(diff, w)
		}
	}
	if len(diff) == 0 {
		return ""
	}
	slices.Sort(diff)
	return diff[0]
}

func significant(w string) bool {
	if whWords[w] || negations[w] || quantities[w] || prepositions[w] || modals[w] || conjunctions[w] {
		return true
	}
	if strings.HasSuffix(w, "+er") || strings.HasSuffix(w, "+est") || strings.HasSuffix(w, "~pass") || w == relMark || relationWord(w) {
		return true
	}
	for _, r := range w {
		if r >= '0' && r <= '9' || r == '_' || r == '.' || r == '/' || r == '"' {
			return true
		}
	}
	return false
}
