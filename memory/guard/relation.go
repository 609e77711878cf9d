package guard

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nexus-mcp/nexus/memory/words"
)

// The guard's second half: relations. Two texts with the same words can
// ask opposite things ("flights from paris to london" / "from london to
// paris", "commits by alice" / "commits for alice", "who calls X" / "what
// does X call"), so besides agreeing on polarity words, two texts must
// agree on which word each direction marker points at, on quantifiers,
// and on which side of a relational verb the shared words stand.

// markers maps direction words to the relation they mark.
var markers = map[string]string{
	"to": "to", "into": "to", "onto": "to", "towards": "to", "toward": "to",
	"from": "from", // "out of" arrives as "from" (see phrases)
	"by":   "by", "for": "for", "with": "with", "without": "without",
	"above": "above", "over": "above", "below": "below", "under": "below", "beneath": "below",
	"before": "before", "after": "after", "since": "since", "until": "until", "till": "until",
	"than": "than", "between": "between", "via": "via", "through": "via", "against": "against",
}

// strictMarkers must be present in both texts or in neither: "commits by
// alice" is not "alice's commits" for sure, so it is a miss. "to" and
// "from" on one side only are checked apart ("paris to london" = "from
// paris to london"; "guide to X" = "X guide", but "to X" is never "from X").
var strictMarkers = []string{"by", "above", "below", "before", "after", "since", "until"}

// notDirection are words after which "to" is not a direction: an
// infinitive ("how to", "want to") or a fixed phrase ("related to").
var notDirection = map[string]bool{
	"how": true, "want": true, "wants": true, "need": true, "needs": true, "way": true, "ways": true,
	"able": true, "trying": true, "try": true, "going": true, "have": true, "has": true, "where": true,
	"what": true, "who": true, "when": true, "whether": true, "used": true, "steps": true, "ought": true,
	"related": true, "relating": true, "according": true, "due": true, "similar": true, "compared": true,
	"close": true, "next": true, "prior": true, "equal": true, "belong": true, "belongs": true,
	"belonging": true, "applies": true, "apply": true, "specific": true, "unique": true, "relative": true,
	"access": true, "guide": true, "introduction": true, "intro": true, "answer": true, "answers": true,
}

// quantifiers must agree, except that "all" may be left out ("list all
// open bugs" = "list open bugs"): "all failing tests" is not "any failing
// tests".
var quantifiers = map[string]string{
	"all": "all", "every": "all", "each": "all", "entire": "all", "whole": "all",
	"any": "any", "either": "any", "some": "some", "several": "some", "few": "some",
	"both": "both", "only": "only", "sole": "only", "solely": "only", "exactly": "exact", "just": "only",
	"most": "most", "least": "least", "many": "many", "much": "many",
}

// relVerbs are verbs whose subject and object must stay on their sides
// (canonical forms): "who calls X" is not "what does X call". They count
// only in a verb form (see verbForm): "the implementation of X" is "X
// implementation".
var relVerbs = map[string]bool{
	"call": true, "import": true, "depend": true, "extend": true, "impl": true, "inherit": true,
	"own": true, "report": true, "contain": true, "referenc": true, "block": true,
	"follow": true, "manag": true, "replac": true, "overrid": true, "wrap": true, "trigger": true,
	"preced": true, "supersed": true, "pai": true, "pay": true, "send": true, "sent": true, "lead": true, "led": true,
	"mentor": true, "approv": true, "review": true, "assign": true, "beat": true, "love": true, "hate": true,
	"email": true, "use": true, "requir": true, "hire": true, "hir": true, "invit": true, "blame": true, "blam": true,
}

// auxiliaries are the words after which a bare verb is a verb ("does X
// call", "who to call").
var auxiliaries = map[string]bool{"do": true, "does": true, "did": true, "to": true, "will": true, "can": true,
	"could": true, "would": true, "should": true, "who": true, "which": true, "that": true, "i": true, "we": true, "they": true, "you": true}

// verbForm reports whether toks[i] is used as a verb: inflected ("calls",
// "called") and not followed by "of" ("uses of X" is a noun), or bare
// anywhere after an auxiliary ("what does the X package call").
func verbForm(toks []words.Token, i int) bool {
	raw := toks[i].Raw
	if i+1 < len(toks) && toks[i+1].Raw == "of" {
		return false
	}
	if strings.HasSuffix(raw, "ing") || strings.HasSuffix(raw, "er") || strings.HasSuffix(raw, "ers") ||
		strings.HasSuffix(raw, "ion") || strings.HasSuffix(raw, "ions") || strings.HasSuffix(raw, "ment") ||
		strings.HasSuffix(raw, "ments") {
		return false // "blocking issues", "reviewer", "implementation", "requirements"
	}
	if strings.HasSuffix(raw, "s") || strings.HasSuffix(raw, "ed") || raw == "paid" || raw == "sent" || raw == "led" {
		return true
	}
	for _, t := range toks[:i] {
		if auxiliaries[t.Raw] {
			return true
		}
	}
	return false
}

// overTime reports whether "over" at toks[i] starts a time span.
func overTime(toks []words.Token, i int) bool {
	for _, t := range toks[i+1 : min(i+3, len(toks))] {
		switch t.Raw {
		case "last", "past", "next", "previous", "coming", "course", "recent":
			return true
		}
	}
	return false
}

// pronouns count as content words after a marker: "shared with me" is not
// "shared by me".
var pronouns = map[string]string{"me": "me", "my": "me", "mine": "me", "us": "us", "our": "us", "you": "you", "your": "you", "them": "them", "their": "them"}

// relations are what relationGuard compares.
type relations struct {
	objects map[string][]string // marker -> content words it points at
	present map[string]bool     // markers present
	before  []string            // content words before the first "to"
	quant   []string            // quantifier values
	verbs   map[string][]string // relational verb -> content words before it
	content []string            // every content word, in order
}

func readRelations(text string) relations {
	r := relations{objects: map[string][]string{}, present: map[string]bool{}, verbs: map[string][]string{}}
	toks := words.Tokens(text)
	sawTo := false
	for i, t := range toks {
		if q, ok := quantifiers[t.Raw]; ok {
			r.quant = append(r.quant, q)
			continue
		}
		if m, ok := markers[t.Raw]; ok || t.Canon == "from" {
			if t.Canon == "from" {
				m = "from"
			}
			if m == "to" && i > 0 && notDirection[toks[i-1].Raw] {
				continue
			}
			if m == "with" && i+1 < len(toks) && (toks[i+1].Raw == "no" || toks[i+1].Raw == "zero") {
				m = "without" // "with no assignee"
			}
			if m == "above" && t.Raw == "over" && overTime(toks, i) {
				continue // "over the last 24 hours" is "in the last 24 hours"
			}
			r.present[m] = true
			if m == "to" {
				sawTo = true
			}
			if obj, ok := objectAfter(toks, i); ok {
				r.objects[m] = append(r.objects[m], obj)
			}
			continue
		}
		if w, ok := content(t); ok {
			if relVerbs[w] && verbForm(toks, i) {
				r.verbs[w] = append([]string(nil), r.content...)
			}
			r.content = append(r.content, w)
			if !sawTo {
				r.before = append(r.before, w)
			}
		}
	}
	for k, v := range r.objects {
		r.objects[k] = uniqueSorted(v)
	}
	r.quant = uniqueSorted(r.quant)
	return r
}

// content returns the canonical form of a content word, or false for
// filler and markers.
func content(t words.Token) (string, bool) {
	if p, ok := pronouns[t.Raw]; ok {
		return p, true
	}
	if words.IsFiller(t.Raw) || words.IsFiller(t.Canon) || markers[t.Raw] != "" || quantifiers[t.Raw] != "" {
		return "", false
	}
	return t.Canon, true
}

// objectAfter returns the first content word after toks[i], skipping
// articles and other filler, up to the next marker.
func objectAfter(toks []words.Token, i int) (string, bool) {
	for _, t := range toks[i+1:] {
		if markers[t.Raw] != "" || t.Canon == "from" {
			return "", false
		}
		if w, ok := content(t); ok {
			return w, true
		}
	}
	return "", false
}

func uniqueSorted(v []string) []string {
	slices.Sort(v)
	return slices.Compact(v)
}

// relationGuard reports whether a and b agree on relations; reason says
// where they differ.
func relationGuard(a, b string) (bool, string) {
	ra, rb := readRelations(a), readRelations(b)
	oa, ob := readBothRoles(a, b)
	for _, m := range strictMarkers {
		if m == "by" && (ra.present[m] && passiveBy(oa, ob) || rb.present[m] && passiveBy(ob, oa)) {
			continue // a passive's agent: "services called by X" = "services X calls"
		}
		if ra.present[m] != rb.present[m] {
			return false, fmt.Sprintf("direction differs: %q in one text only", m)
		}
	}
	for m := range ra.objects {
		if _, ok := rb.objects[m]; ok && !slices.Equal(ra.objects[m], rb.objects[m]) {
			return false, fmt.Sprintf("direction differs: %q %v / %v", m, ra.objects[m], rb.objects[m])
		}
	}
	// A marker with an object on one side and without on the other
	// ("reports to maria" / "maria reports to").
	for _, m := range strictMarkers {
		if ra.present[m] && rb.present[m] && (len(ra.objects[m]) == 0) != (len(rb.objects[m]) == 0) {
			return false, fmt.Sprintf("direction differs: what %q points at", m)
		}
	}
	if ok, reason := oneSided(ra, rb); !ok {
		return false, reason
	}
	if ok, reason := oneSided(rb, ra); !ok {
		return false, reason
	}
	// "by" and "for" name opposite parties: "commits by alice" / "commits for alice".
	for _, w := range ra.objects["by"] {
		if slices.Contains(rb.objects["for"], w) || slices.Contains(rb.objects["to"], w) {
			return false, fmt.Sprintf("direction differs: by %s / for %s", w, w)
		}
	}
	for _, w := range rb.objects["by"] {
		if slices.Contains(ra.objects["for"], w) || slices.Contains(ra.objects["to"], w) {
			return false, fmt.Sprintf("direction differs: for %s / by %s", w, w)
		}
	}
	qa := slices.DeleteFunc(slices.Clone(ra.quant), func(q string) bool { return q == "all" })
	qb := slices.DeleteFunc(slices.Clone(rb.quant), func(q string) bool { return q == "all" })
	if !slices.Equal(qa, qb) || (len(ra.quant) > 0 && len(rb.quant) > 0 && !slices.Equal(ra.quant, rb.quant)) {
		return false, fmt.Sprintf("quantity differs: %v / %v", ra.quant, rb.quant)
	}
	return roleGuard(oa, ob)
}

// oneSided checks the "to" and "from" of x that y lacks. "to X" on one
// side only: y must not have a "from" (X could be its source) and must
// name X. "from X" on one side only: when y has a "to", X must stand
// before it ("from paris to london" = "paris to london"); otherwise y must
// not have a "to" pointing at X and must name X.
func oneSided(x, y relations) (bool, string) {
	if x.present["to"] && !y.present["to"] {
		if y.present["from"] {
			return false, "direction differs: to / from"
		}
		for _, w := range x.objects["to"] {
			if !slices.Contains(y.content, w) {
				return false, fmt.Sprintf("direction differs: to %s", w)
			}
		}
	}
	if x.present["from"] && !y.present["from"] {
		for _, w := range x.objects["from"] {
			switch {
			case y.present["to"] && !slices.Contains(y.before, w):
				return false, fmt.Sprintf("direction differs: from %s", w)
			case !slices.Contains(y.content, w):
				return false, fmt.Sprintf("direction differs: from %s", w)
			}
		}
	}
	return true, ""
}
