package canon

import (
	"slices"
	"strings"

	"github.com/nexus-mcp/nexus/memory/words"
)

// relMark stands for a relative pronoun that introduces a clause whose
// subject is the noun before it ("services that call X").
const relMark = "@rel"

// passMark ends a participle read as a passive with no agent: "files that
// are imported" is not "files that import".
const passMark = "~pass"

func isWord(t tok, ws map[string]bool) bool { return t.kind == word && ws[t.raw] }

// content reports a token that names something: not a function word,
// marker or comma.
func content(t tok) bool {
	return t.kind == name || t.kind == word && !function(t.raw)
}

func at(ts []tok, i int) tok {
	if i < 0 || i >= len(ts) {
		return tok{kind: comma}
	}
	return ts[i]
}

// numbers reads what only spells a number or bound: "version 2.3" is
// "2.3" and "version 2" is "v2" (version-prefix: "version 2 tickets" are
// not "2 tickets"), and before a number "more than" is "over", "less
// than" and "fewer than" are "under" (synonym).
func numbers(ts []tok, rec *record) []tok {
	num := func(i int) bool { t := at(ts, i); return t.kind == name && number(t) && t.canon[0] != '"' }
	out := ts[:0:0]
	for i := 0; i < len(ts); i++ {
		t := ts[i]
		switch {
		case isWord(t, set("version")) && num(i+1):
			rec.add("version-prefix", "version")
			if n := ts[i+1]; !strings.Contains(n.canon, ".") {
				out = append(out, tok{raw: "v" + n.raw, canon: "v" + n.canon, kind: name})
				i++
			}
			continue
		case isWord(t, set("more", "less", "fewer")) && isWord(at(ts, i+1), set("than")) && num(i+2):
			w := "over"
			if t.raw != "more" {
				w = "under"
			}
			rec.add("synonym", t.raw+" than")
			out = append(out, tok{raw: w, canon: w, kind: word})
			i++
			continue
		}
		out = append(out, t)
	}
	return out
}

// letters reads an "a" that is no article as the letter it names: one
// written "A" inside the sentence ("option A"), or one no word follows
// ("vitamin a", "plan a or b", "section a of the spec"). The letter is a
// name, so it always counts.
func letters(ts []tok) []tok {
	for i, t := range ts {
		if t.kind != word || t.raw != "a" {
			continue
		}
		next := at(ts, i+1)
		if t.cap || next.kind == comma || next.kind == mark ||
			next.kind == word && (prepositions[next.raw] || conjunctions[next.raw] || beForms[next.raw] || doForms[next.raw]) {
			ts[i] = tok{raw: "a", canon: "a", kind: name}
		}
	}
	return ts
}

// joinPhrases reads the phrases of the canon table ("other than",
// "lacking", "close to") as the word they stand for.
func joinPhrases(ts []tok, rec *record) []tok {
	out := ts[:0:0]
	for i := 0; i < len(ts); i++ {
		t := ts[i]
		if t.kind == word && i+2 < len(ts) {
			if w, ok := phrases[t.raw+" "+ts[i+1].raw+" "+ts[i+2].raw]; ok {
				rec.add("synonym", t.raw+" "+ts[i+1].raw+" "+ts[i+2].raw)
				out = append(out, tok{raw: w, canon: w, kind: word})
				i += 2
				continue
			}
		}
		if t.kind == word && i+1 < len(ts) {
			if w, ok := phrases[t.raw+" "+ts[i+1].raw]; ok {
				rec.add("synonym", t.raw+" "+ts[i+1].raw)
				out = append(out, tok{raw: w, canon: w, kind: word})
				i++
				continue
			}
		}
		if t.kind == word {
			if w, ok := phrases[t.raw]; ok {
				rec.add("synonym", t.raw)
				t = tok{raw: w, canon: w, kind: word}
			}
		}
		out = append(out, t)
	}
	return out
}

// dropFraming removes what only frames a request: "please" anywhere; at
// the start "can you", "I want to", and an imperative with its "me", "for"
// and "all" ("show me all", "search for", "look up").
func dropFraming(ts []tok, rec *record) []tok {
	ts = slices.DeleteFunc(ts, func(t tok) bool {
		if isWord(t, set("please")) {
			rec.add("imperative", "please")
			return true
		}
		return false
	})
	for {
		switch {
		case len(ts) >= 2 && isWord(ts[0], set("can", "could", "would", "will")) && isWord(ts[1], set("you")):
			rec.add("imperative", ts[0].raw+" you")
			ts = ts[2:]
			continue
		case len(ts) >= 3 && isWord(ts[0], set("i", "we")) && isWord(ts[1], set("want", "need", "would")) &&
			isWord(ts[2], set("to", "like")):
			n := 3
			if ts[1].raw == "would" && isWord(at(ts, 3), set("to")) {
				n = 4
			}
			rec.add("imperative", "i want to")
			ts = ts[n:]
			continue
		case len(ts) >= 2 && isWord(ts[0], imperatives) &&
			(verbsOnly[ts[0].raw] && !isWord(ts[1], set("of")) ||
				isWord(ts[1], set("me", "us", "for", "up", "all")) || isWord(ts[1], articles) || isWord(ts[1], possessive)):
			n := 1
			if isWord(at(ts, n), set("me", "us")) {
				n++
			}
			if isWord(at(ts, n), set("for", "up")) && (ts[0].raw == "search" || ts[0].raw == "look" || ts[0].raw == "pull" || ts[0].raw == "bring") {
				n++
			}
			if isWord(at(ts, n), set("all")) {
				n++
			}
			if n >= len(ts) {
				return ts
			}
			rec.add("imperative", ts[0].raw)
			ts = ts[n:]
			continue
		}
		return ts
	}
}

// clauseOrder puts a leading subordinate clause after the main one:
// "when the build breaks, notify slack" = "notify slack when the build
// breaks". Each clause keeps its words and their order.
func clauseOrder(ts []tok, rec *record) []tok {
	if len(ts) < 3 || !isWord(ts[0], set("when", "if", "while", "once", "after", "before", "until", "unless")) {
		return ts
	}
	k := slices.IndexFunc(ts, func(t tok) bool { return t.kind == comma })
	if k < 2 || k == len(ts)-1 {
		return ts
	}
	rec.add("clause-order", ts[0].raw)
	return slices.Concat(ts[k+1:], ts[:k])
}

// howTo makes "how do I X", "how can we X" and "how to X" one: "how X".
func howTo(ts []tok, rec *record) []tok {
	for i := 0; i+1 < len(ts); i++ {
		if !isWord(ts[i], set("how")) {
			continue
		}
		switch {
		case isWord(ts[i+1], set("to")):
			rec.add("how-to", "how to")
			ts = slices.Delete(ts, i+1, i+2)
		case (isWord(ts[i+1], doForms) || isWord(ts[i+1], modals)) && isWord(at(ts, i+2), set("i", "we", "you", "one")):
			rec.add("how-to", "how "+ts[i+1].raw+" "+ts[i+2].raw)
			ts = slices.Delete(ts, i+1, i+3)
		}
	}
	return ts
}

// agentNouns reads a leading "who" and a verb in the third person ("who
// owns", "who is coaching") as the verb's agent noun and "of": "who owns
// the billing service" asks for the owner of the billing service, "who
// calls validateToken" for its callers. Only a subject question with an
// object: "who does X call" asks for the object, and "who wrote X" has no
// regular agent noun.
func agentNouns(ts []tok, rec *record) []tok {
	if len(ts) < 3 || !isWord(ts[0], set("who")) {
		return ts
	}
	v, base := ts[1], ""
	switch {
	case v.kind == word && !function(v.raw) && plural(v.raw):
		base = words.Singular(v.raw) // "owns", "manages"
	case v.kind == word && !function(v.raw) && len(v.raw) > 4 && strings.HasSuffix(v.raw, "ed"):
		base = words.Inflection(v.raw) // "approved" (approv+er), "reviewed"
	case isWord(v, set("is", "are")) && len(ts) > 3 && ts[2].kind == word && !function(ts[2].raw) &&
		len(ts[2].raw) > 5 && ts[2].raw[len(ts[2].raw)-3:] == "ing":
		v = ts[2]
		base = words.Inflection(v.raw) // "coaching", "managing" (manag+er)
		ts = ts[1:]
	default:
		return ts
	}
	if obj := ts[2]; !content(obj) && !isWord(obj, articles) && !isWord(obj, possessive) {
		return ts
	}
	agent := base + "er"
	if base[len(base)-1] == 'e' {
		agent = base + "r"
	}
	rec.add("agent-noun", "who "+v.raw)
	return slices.Concat([]tok{{raw: agent, canon: words.Lemma(agent), kind: word}, {raw: "of", canon: "of", kind: word}}, ts[2:])
}

// explanations drops what asks for an explanation around a topic, as the
// imperative "explain" is dropped: "rust borrow checker explained" and
// "explanation of the rust borrow checker" ask what "explain the rust
// borrow checker" does; a trailing "explanation" after a noun too.
func explanations(ts []tok, rec *record) []tok {
	if len(ts) >= 3 && isWord(ts[0], set("explanation")) && isWord(ts[1], set("of")) {
		rec.add("imperative", "explanation of")
		ts = ts[2:]
	}
	if n := len(ts); n >= 2 && isWord(ts[n-1], set("explained", "explanation")) && content(ts[n-2]) {
		rec.add("imperative", ts[n-1].raw)
		ts = ts[:n-1]
	}
	return ts
}

// questionForm drops a leading "which" or "what" before a noun ("which
// queues does the notifier consume" asks for the queues the notifier
// consumes) and a leading "what is" or "what are" ("what are the rate
// limits"). When the noun is plural and a verb follows ("which jobs launch
// the daemon"), the noun is the subject of a clause: a relative marker
// goes between, as in "jobs that launch the daemon". npQuestion reports a
// dropped "which"/"what" before a noun: a passive that follows reads as a
// relative clause of that noun.
func questionForm(ts []tok, rec *record) ([]tok, bool) {
	if len(ts) < 2 || !isWord(ts[0], set("which", "what", "who")) {
		return ts, false
	}
	if isWord(ts[0], set("what", "who")) && isWord(ts[1], set("is", "are")) && len(ts) > 2 &&
		(content(ts[2]) || isWord(ts[2], articles)) {
		rec.add("question-form", "what "+ts[1].raw)
		return ts[2:], false
	}
	if ts[0].raw == "who" {
		return ts, false
	}
	// "which queues does ...", "which tests failed": a noun follows, then
	// an auxiliary or a verb. Before an article or a preposition the word
	// after "what" is the verb and "what" its subject ("what reads the
	// config" is not "read the config"), kept.
	if !content(ts[1]) || len(ts) < 3 {
		return ts, false
	}
	if next := ts[2]; !content(next) && !isWord(next, doForms) && !isWord(next, beForms) &&
		!isWord(next, haveForms) && !isWord(next, modals) {
		return ts, false
	}
	rec.add("question-form", ts[0].raw)
	ts = ts[1:]
	if ts[0].kind == word && plural(ts[0].raw) && len(ts) > 1 && ts[1].kind == word && !function(ts[1].raw) && !plural(ts[1].raw) {
		ts = slices.Insert(ts, 1, tok{raw: relMark, canon: relMark, kind: mark})
	}
	return ts, true
}

// relativePronouns reads "that", "which", "who" after a noun as the start
// of a relative clause: a marker when the noun is the clause's subject
// ("services that call X"), nothing when the clause has a subject of its
// own ("queues that the notifier consumes" = "queues the notifier
// consumes").
func relativePronouns(ts []tok, rec *record) []tok {
	out := ts[:0:0]
	for i, t := range ts {
		if i == 0 || !isWord(t, relatives) || !content(ts[i-1]) {
			out = append(out, t)
			continue
		}
		next := at(ts, i+1)
		if isWord(next, articles) || isWord(next, possessive) || isWord(next, pronouns) || isWord(next, demonstr) {
			rec.add("relative-pronoun", t.raw)
			continue
		}
		rec.add("relative-pronoun", t.raw)
		out = append(out, tok{raw: relMark, canon: relMark, kind: mark})
	}
	return out
}

// invertedBe reports a participle at j of a question whose "be" comes
// before the subject: "when was the cache layer added", with no agent.
func invertedBe(ts []tok, j int) bool {
	if j < 3 || !isWord(ts[0], whWords) || !isWord(ts[1], beForms) || isWord(at(ts, j+1), set("by")) {
		return false
	}
	for _, t := range ts[2:j] {
		if !content(t) && !isWord(t, articles) {
			return false
		}
	}
	return true
}

// boundary reports a token that ends a noun phrase.
func boundary(t tok) bool {
	return !content(t) && !isWord(t, articles) && t.kind != mark || t.canon == relMark
}

// passives rewrites passives to the active order, the roles kept: "X
// (that is) V-ed by A" after a noun is the relative clause "X A V"; a
// clause "X is V-ed by A" is "A V X" ("who was V-ed by A" is "who A V",
// as "who did A V"). A passive without "by" marks its participle, so
// "files that are imported" stays apart from "files that import".
func passives(ts []tok, npQuestion bool, rec *record) []tok {
	for j := 1; j < len(ts); j++ {
		p := ts[j]
		if p.kind != word || !participle(p.raw) {
			continue
		}
		be := j - 1
		for be >= 0 && isWord(ts[be], set("been", "being")) {
			be--
		}
		// "get" makes a passive as "be" does: "when did the layer get
		// added" = "when was the layer added"; not first ("get added
		// files" is an imperative).
		hasBe := be >= 0 && (isWord(ts[be], beForms) || be > 0 && isWord(ts[be], set("get", "gets", "got")))
		if !hasBe {
			be = j
		}
		if !hasBe && invertedBe(ts, j) {
			// when was the layer added: the question's "be" is the
			// passive's, before its subject.
			ts[j].canon += passMark
			rec.add("passive", ts[1].raw+" "+p.raw)
			ts = slices.Delete(ts, 1, 2)
			j--
			continue
		}
		if !isWord(at(ts, j+1), set("by")) {
			if hasBe && (be > 0 && ts[be-1].canon == relMark || npQuestion && be == 1) {
				// N that are V-ed; which N are V-ed: N V-ed
				from := be
				if ts[be-1].canon == relMark {
					from = be - 1
				}
				rec.add("relative-clause", "that be "+p.raw)
				ts = slices.Delete(ts, from, j)
				j = from
				continue
			}
			if hasBe {
				rec.add("passive", "be "+p.raw)
				ts[j].canon += passMark
				ts = slices.Delete(ts, be, j)
				j = be
			}
			continue
		}
		// The agent runs from after "by" to the next boundary.
		a0 := j + 2
		a1 := a0
		for a1 < len(ts) && !boundary(ts[a1]) {
			a1++
		}
		if a1 == a0 {
			continue
		}
		agent := slices.Clone(ts[a0:a1])
		verb := ts[j]
		before := be - 1 // the token before the passive
		switch {
		case hasBe && before >= 0 && ts[before].canon == relMark:
			// N that are V-ed by A: N A V
			rec.add("passive", p.raw+" by")
			ts = slices.Concat(ts[:before], agent, []tok{verb}, ts[a1:])
		case hasBe && !npQuestion:
			// A clause from the start (or the last boundary) to be.
			s := be
			for s > 0 && ts[s-1].kind != comma && !isWord(ts[s-1], conjunctions) {
				s--
			}
			subj := slices.Clone(ts[s:be])
			if len(subj) == 0 {
				continue
			}
			rec.add("passive", p.raw+" by")
			if len(subj) == 1 && isWord(subj[0], whWords) {
				ts = slices.Concat(ts[:s], subj, agent, []tok{verb}, ts[a1:])
			} else {
				ts = slices.Concat(ts[:s], agent, []tok{verb}, subj, ts[a1:])
			}
		case hasBe && npQuestion, !hasBe && before >= 0 && content(ts[before]):
			// which N are V-ed by A; N V-ed by A: N A V
			rec.add("passive", p.raw+" by")
			ts = slices.Concat(ts[:be], agent, []tok{verb}, ts[a1:])
		}
	}
	return ts
}

// gerund reports a word in -ing that is a verb's: "using", "calling";
// not "thing" or "string".
func gerund(raw string) bool {
	return len(raw) >= 5 && raw[len(raw)-3:] == "ing" && words.Inflection(raw) != raw
}

// reducedBe drops the relative pronoun and "be" of a clause whose
// predicate says where, how much or with what negation: "engineers who
// are not on call" = "engineers not on call", "endpoints that are slower
// than 200ms" = "endpoints slower than 200ms", "documents that are not
// shared" = "documents not shared". (A participle without "not" is the
// passives' relative clause.) An adjective is left: it may not follow its
// noun.
func reducedBe(ts []tok, rec *record) []tok {
	for i := 0; i+2 < len(ts); i++ {
		if ts[i].canon != relMark || !isWord(ts[i+1], beForms) {
			continue
		}
		x := i + 2
		neg := isWord(ts[x], set("not"))
		if neg {
			x++
		}
		p := at(ts, x)
		if p.kind != word {
			continue
		}
		switch {
		case prepositions[p.raw] && p.raw != "by",
			neg && participle(p.raw),
			len(p.raw) > 3 && p.raw[len(p.raw)-2:] == "er" && isWord(at(ts, x+1), set("than")):
			rec.add("relative-clause", "that be "+p.raw)
			ts = slices.Delete(ts, i, i+2)
		}
	}
	return ts
}

// fromTo makes a route after its noun the compound that says it before:
// "flights from paris to london" = "paris to london flights". The
// endpoints keep their order and "to", so the direction still counts.
func fromTo(ts []tok, rec *record) []tok {
	for i := 1; i < len(ts); i++ {
		if !isWord(ts[i], set("from")) || !content(ts[i-1]) {
			continue
		}
		a1 := i + 1
		for a1 < len(ts) && content(ts[a1]) {
			a1++
		}
		if a1 == i+1 || !isWord(at(ts, a1), set("to")) {
			continue
		}
		b1 := a1 + 1
		for b1 < len(ts) && content(ts[b1]) {
			b1++
		}
		if b1 == a1+1 || b1 < len(ts) && ts[b1].kind != comma {
			continue // only a route that ends the text: "X from A to B in C" is left
		}
		n0 := i - 1
		for n0 > 0 && content(ts[n0-1]) {
			n0--
		}
		rec.add("compound", "from to")
		ts = slices.Concat(ts[:n0], slices.Clone(ts[i+1:b1]), slices.Clone(ts[n0:i]), ts[b1:])
		break
	}
	return ts
}

// timePossessives puts a time's possessive after its noun, where a time
// adverbial goes: "tomorrow's meetings" = "meetings tomorrow", "this
// week's standups" = "standups this week".
func timePossessives(ts []tok, rec *record) []tok {
	for i := 1; i < len(ts); i++ {
		if ts[i].kind != mark || ts[i].raw != "'s" {
			continue
		}
		k := i
		for k > 0 && ts[k-1].kind == word && (timeWords[ts[k-1].raw] || isWord(ts[k-1], set("this", "next", "last"))) {
			k--
		}
		if k == i || !timeWords[ts[i-1].raw] || k > 0 && content(ts[k-1]) {
			continue
		}
		h1 := i + 1
		for h1 < len(ts) && content(ts[h1]) {
			h1++
		}
		if h1 == i+1 {
			continue
		}
		rec.add("possessive", "time's")
		ts = slices.Concat(ts[:k], slices.Clone(ts[i+1:h1]), slices.Clone(ts[k:i]), ts[h1:])
		i = h1 - 1
	}
	return ts
}

// reducedRelatives reads a plural noun followed by a verb in -ing as a
// relative clause: "services calling X" = "services that call X".
func reducedRelatives(ts []tok, rec *record) []tok {
	for i := 1; i < len(ts); i++ {
		t, prev := ts[i], ts[i-1]
		if t.kind != word || !gerund(t.raw) || function(t.raw) {
			continue
		}
		if prev.kind != word || function(prev.raw) || !plural(prev.raw) || words.Lemma(words.Singular(prev.raw)) != prev.canon {
			continue
		}
		if _, table := words.Synonym(prev.raw); table {
			if _, sing := words.Synonym(words.Singular(prev.raw)); !sing {
				continue // a word of the table as written: "kubernetes" is no plural
			}
		}
		rec.add("relative-clause", prev.raw+" "+t.raw)
		ts = slices.Insert(ts, i, tok{raw: relMark, canon: relMark, kind: mark})
		i++
	}
	// "handlers not logging errors" = "handlers that do not log errors"
	for i := 2; i < len(ts); i++ {
		t, neg, prev := ts[i], ts[i-1], ts[i-2]
		if t.kind == word && gerund(t.raw) && !function(t.raw) &&
			isWord(neg, set("not")) && prev.kind == word && !function(prev.raw) && plural(prev.raw) {
			rec.add("relative-clause", prev.raw+" not "+t.raw)
			ts = slices.Insert(ts, i-1, tok{raw: relMark, canon: relMark, kind: mark})
			i++
		}
	}
	return ts
}

// auxiliaries drops "do", "does", "did" before another word, forms of
// "be" left after passives, and forms of "have" before a participle; other
// forms of "have" ("functions having doc comments") are "with".
func auxiliaries(ts []tok, rec *record) []tok {
	out := ts[:0:0]
	skip := false // the "no" of "have no"
	for i, t := range ts {
		switch {
		case isWord(t, doForms) && i+1 < len(ts):
			rec.add("auxiliary", t.raw)
			continue
		case isWord(t, beForms):
			rec.add("auxiliary", t.raw)
			continue
		case isWord(t, haveForms) && at(ts, i+1).kind == word && participle(at(ts, i+1).raw):
			rec.add("auxiliary", t.raw)
			continue
		case isWord(t, haveForms):
			// "services that have an owner" = "services with an owner";
			// "... that have no owner" = "... without an owner".
			if n := len(out); n > 0 && out[n-1].canon == relMark {
				out = out[:n-1]
			}
			rec.add("synonym", t.raw)
			t = tok{raw: "with", canon: "with", kind: word}
			if isWord(at(ts, i+1), set("no")) {
				t = tok{raw: "without", canon: "without", kind: word}
				skip = true
			}
		case skip:
			skip = false
			continue
		}
		out = append(out, t)
	}
	return out
}

// dropArticles drops "a", "an" and "the".
func dropArticles(ts []tok, rec *record) []tok {
	return slices.DeleteFunc(ts, func(t tok) bool {
		if isWord(t, articles) {
			rec.add("article", t.raw)
			return true
		}
		return false
	})
}

// relations are the prepositions a noun compound can leave unsaid, each
// with the marker it leaves in the form: "dependencies of the plugin" and
// "the plugin's dependencies" are [plugin ~of dependency], "tests for the
// tokenizer" [tokenizer ~for test], "flaky tests in the CI pipeline" [ci
// pipeline ~in flaky test]. A bare compound ("tokenizer tests") says none
// of them, so it matches each (Match); two stated relations must agree:
// "X for Y" is not "Y's X", nor "X in Y". Direction ("to", "from") and
// accompaniment ("with") are not among them: "tokyo flights" does not say
// which way they go.
var relations = map[string]string{
	"of": "~of", "'s": "~of", "for": "~for", "about": "~about", "regarding": "~about",
	"concerning": "~about", "on": "~on", "in": "~in",
}

// relation reports a marker ofForms left for a stated relation.
func relation(t tok) bool { return t.kind == mark && len(t.canon) > 1 && t.canon[0] == '~' }

// ofForms makes a possessive, its "of" form and the other relations a
// compound can say into the compound's order, with a marker for the
// relation stated: "the plugin's dependencies" = "dependencies of the
// plugin" = [plugin ~of dependency]. Only between two runs of content
// words (the first may hold a compound already made: "examples of list
// comprehensions in python" is [python ~in list comprehension ~of
// example]), and not after a quantity ("all of the tests"), a number or a
// quoted string.
func ofForms(ts []tok, rec *record) []tok {
	for i := 0; i < len(ts); i++ {
		t := ts[i]
		if t.kind == mark && t.raw == "'s" {
			rec.add("possessive", "'s")
			ts[i] = tok{raw: "'s", canon: relations["'s"], kind: mark}
			continue
		}
		m, ok := relations[t.raw]
		if t.kind != word || !ok {
			continue
		}
		a0 := i
		for a0 > 0 && (content(ts[a0-1]) || relation(ts[a0-1])) {
			a0--
		}
		b1 := i + 1
		for b1 < len(ts) && content(ts[b1]) {
			b1++
		}
		if a0 == i || b1 == i+1 || number(ts[a0]) {
			continue
		}
		if t.raw == "of" {
			rec.add("of-form", "of")
		} else {
			rec.add("compound", t.raw)
		}
		marker := tok{raw: t.raw, canon: m, kind: mark}
		ts = slices.Concat(ts[:a0], slices.Clone(ts[i+1:b1]), []tok{marker}, slices.Clone(ts[a0:i]), ts[b1:])
		i = b1 - 1
	}
	return ts
}

// number reports a name that is a number, version or quoted string: "2 of
// the tests" is not "the tests' 2".
func number(t tok) bool {
	return t.kind == name && t.canon != "" && (t.canon[0] >= '0' && t.canon[0] <= '9' || t.canon[0] == '"')
}
