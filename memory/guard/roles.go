package guard

import (
	"fmt"
	"strings"

	"github.com/nexus-mcp/nexus/memory/words"
)

// The guard's third half: roles. Two texts can share every word and still
// ask opposite things because the words stand in different roles: "services
// that call the gateway" / "services the gateway calls" (subject and object
// swapped by a relative clause), "people interviewed by alice" / "people who
// interviewed alice" (a passive), "memory leaks when scaling" / "scaling
// when memory leaks" (main clause and condition), "users of the group" /
// "groups of the user" (head and modifier), "files in the drive" / "files
// outside the drive" (scope). A word list cannot cover the verbs, so the
// guard reads the structure: a shallow parse of each text into verbs with
// the words on their subject and object sides, clauses, noun heads and
// scopes, and it refuses when a word the two texts share moves.
//
// The parse is deliberately shallow and errs towards comparing less: a
// verb is compared only when both texts have it, a scope or a head only
// when both texts give the word one. A voice change that keeps the roles
// ("queues the notifier consumes" / "which queues does the notifier
// consume", "services called by the gateway" / "services the gateway
// calls") reads the same.

// determiners start a noun phrase.
var determiners = map[string]bool{"the": true, "a": true, "an": true, "this": true, "these": true, "those": true,
	"my": true, "our": true, "your": true, "their": true, "his": true, "her": true, "its": true}

// relPronouns open a relative clause or a question.
var relPronouns = map[string]bool{"that": true, "which": true, "who": true, "whom": true, "what": true}

// doAux are auxiliaries that move the subject after them in a question
// ("what does X call").
var doAux = map[string]bool{"do": true, "does": true, "did": true, "will": true, "can": true, "could": true,
	"would": true, "should": true, "may": true, "might": true, "must": true}

// beAux are auxiliaries of the passive and the progressive.
var beAux = map[string]bool{"is": true, "are": true, "was": true, "were": true, "be": true, "been": true,
	"being": true, "am": true, "get": true, "gets": true, "got": true}

// condMarkers open a condition or a time clause: "X when Y" is not "Y when X".
var condMarkers = map[string]bool{"when": true, "whenever": true, "if": true, "while": true, "during": true, "once": true}

// scopes maps spatial and scope prepositions to the scope they give their
// object: "in", "inside" and "within" agree; "outside" does not.
var scopes = map[string]string{
	"in": "in", "inside": "in", "within": "in",
	"outside": "out",
	"across":  "across", "between": "across", "among": "across", "amongst": "across", "throughout": "across",
	"near": "near", "nearby": "near", "around": "near", "beside": "near",
	"off": "off", "beyond": "beyond",
}

// participles are irregular past participles ("read by", "written by").
var participles = map[string]bool{"read": true, "built": true, "written": true, "sent": true, "led": true,
	"paid": true, "run": true, "done": true, "made": true, "held": true, "taken": true, "shown": true,
	"seen": true, "known": true, "given": true, "found": true, "kept": true, "bought": true, "sold": true,
	"caught": true, "thrown": true, "drawn": true, "hidden": true, "chosen": true, "broken": true,
	"stolen": true, "driven": true, "grown": true, "owned": true, "taught": true, "brought": true,
	"thought": true, "won": true, "beaten": true, "hit": true, "spun": true, "split": true}

// roleVerb is a verb with the words on its subject (agent) and object
// (patient) sides; byAgent says the agent came from a passive "by"; weak
// says only the word list of relVerbs made it a verb ("design reviews" may
// be a noun), so only its subject side is compared.
type roleVerb struct {
	agent, patient []string
	byAgent, weak  bool
}

// textRoles is what roleGuard compares.
type textRoles struct {
	verbs  map[string]roleVerb        // verb (canonical) -> its first use
	cond   map[string]map[string]bool // content word -> "main" / "cond"
	scope  map[string]map[string]bool // content word -> scopes it stands in
	heads  map[[2]string]bool         // modifier -> head, from "of", "'s" and compounds
	ofs    map[[2]string]bool         // the subset of heads from "of"
	poss   map[[2]string]bool         // the subset of heads from "'s"
	hasOut bool                       // an "outside" scope
	byN    int                        // how many "by"
	words  map[string]bool            // every content word
}

// roleWord returns the canonical form of a content word that can take a
// role, or false.
func roleWord(t words.Token) (string, bool) {
	if scopes[t.Raw] != "" || condMarkers[t.Raw] || relPronouns[t.Raw] || beAux[t.Raw] || doAux[t.Raw] || determiners[t.Raw] {
		return "", false
	}
	return content(t)
}

// stopWord reports whether t can never be a verb.
func stopWord(t words.Token) bool {
	r := t.Raw
	return determiners[r] || relPronouns[r] || doAux[r] || beAux[r] || condMarkers[r] || scopes[r] != "" ||
		markers[r] != "" || t.Canon == "from" || quantifiers[r] != "" || pronouns[r] != "" ||
		r == "of" || r == "and" || r == "or" || r == "not" || r == "no" || r == "s" || r == "on" || r == "at" ||
		r == "i" || r == "we" || r == "they" || r == "it" || r == "he" || r == "she" || r == "how" ||
		r == "where" || r == "why" || r == "there" || r == "here" || r == "about" || r == "as"
}

// readRoles parses text. hint holds the verbs the other text has: a word
// read as a verb there is a verb here too when it stands in a verb form
// between content words ("the gateway monitors prometheus" against
// "prometheus monitors the gateway").
func readRoles(text string, hint map[string]roleVerb) textRoles {
	r := textRoles{
		verbs: map[string]roleVerb{}, cond: map[string]map[string]bool{}, scope: map[string]map[string]bool{},
		heads: map[[2]string]bool{}, ofs: map[[2]string]bool{}, poss: map[[2]string]bool{}, words: map[string]bool{},
	}
	toks := words.Tokens(text)
	for _, t := range toks {
		if w, ok := roleWord(t); ok {
			r.words[w] = true
		}
		if t.Raw == "by" {
			r.byN++
		}
	}
	for _, seg := range strings.Split(text, ",") {
		for _, c := range clauses(words.Tokens(seg)) {
			readVerbs(c, hint, r.verbs)
		}
	}
	readConditions(text, r.cond)
	r.hasOut = readScopes(toks, r.scope)
	readHeads(toks, r.verbs, r.heads, r.ofs, r.poss)
	return r
}

// clauses splits toks at condition markers: each clause has its own verbs.
func clauses(toks []words.Token) [][]words.Token {
	var out [][]words.Token
	start := 0
	for i, t := range toks {
		if condMarkers[t.Raw] {
			out = append(out, toks[start:i])
			start = i + 1
		}
	}
	return append(out, toks[start:])
}

// words of toks that can take a role.
func roleWords(toks []words.Token) []string {
	var out []string
	for _, t := range toks {
		if w, ok := roleWord(t); ok {
			out = append(out, w)
		}
	}
	return out
}

// inflected reports whether a word looks like a verb form: "calls",
// "called", "calling", "written".
func inflected(raw string) bool {
	return participle(raw) || strings.HasSuffix(raw, "ing") || thirdPerson(raw)
}

func participle(raw string) bool {
	return (strings.HasSuffix(raw, "ed") && len(raw) > 3) || participles[raw]
}

func thirdPerson(raw string) bool {
	return len(raw) > 2 && strings.HasSuffix(raw, "s") && !strings.HasSuffix(raw, "ss") &&
		!strings.HasSuffix(raw, "us") && !strings.HasSuffix(raw, "is")
}

// readVerbs finds the verbs of one clause and their sides:
//   - a question with a moved subject, "which queues does the notifier
//     consume": subject between the auxiliary and the verb, object before;
//   - a passive, "services called by the gateway": object before, subject
//     after "by";
//   - a subject relative clause, "services that call X", "who calls X":
//     subject before, object after;
//   - an object relative clause, "services the gateway calls", "people
//     alice interviewed": a noun phrase before a final verb is its subject,
//     the head before that its object;
//   - a verb followed by a noun phrase, "prometheus monitors the gateway",
//     and the relational verbs of relVerbs in any verb form.
func readVerbs(c []words.Token, hint, into map[string]roleVerb) {
	add := func(i int, v roleVerb) {
		if _, ok := into[c[i].Canon]; !ok {
			into[c[i].Canon] = v
		}
	}
	if i, aux, ok := movedSubject(c); ok {
		add(i, roleVerb{agent: roleWords(c[aux+1 : i]), patient: append(roleWords(c[:aux]), roleWords(c[i+1:])...)})
		return
	}
	for i, t := range c {
		if stopWord(t) {
			continue
		}
		before, after := roleWords(c[:i]), roleWords(c[i+1:])
		next := ""
		if i+1 < len(c) {
			next = c[i+1].Raw
		}
		prev := previousWord(c, i)
		switch {
		case participle(t.Raw) && next == "by":
			end := i + 2
			for end < len(c) && !stopWord(c[end]) || end < len(c) && determiners[c[end].Raw] {
				end++
			}
			add(i, roleVerb{agent: roleWords(c[i+2 : end]), patient: append(before, roleWords(c[end:])...), byAgent: true})
		case prev >= 0 && beAux[c[prev].Raw] && participle(t.Raw):
			add(i, roleVerb{patient: before}) // "tickets that are assigned to alice"
		case participle(t.Raw) && prev >= 0 && contentOrWh(c[prev]) && !relPronouns[c[prev].Raw] && next != "" && directionAt(c, i+1):
			add(i, roleVerb{patient: before}) // "tickets assigned to alice"
		case prev >= 0 && (relPronouns[c[prev].Raw] || beAux[c[prev].Raw] || doAux[c[prev].Raw]):
			add(i, roleVerb{agent: before, patient: after})
		case objectRelative(c, i) >= 0:
			k := objectRelative(c, i)
			add(i, roleVerb{agent: roleWords(c[k:i]), patient: append(roleWords(c[:k]), after...)})
		case i > 0 && next != "" && determiners[next] && (inflected(t.Raw) || !stopWord(c[i-1])) && contentOrWh(c[i-1]):
			add(i, roleVerb{agent: before, patient: after})
		case relVerbs[t.Canon] && verbForm(c, i) && !(participle(t.Raw) && (prev < 0 || !contentOrWh(c[prev]))):
			add(i, roleVerb{agent: before, patient: after, weak: true}) // not "my assigned tickets"
		case hinted(hint, t) && i > 0 && contentOrWh(c[i-1]) && i+1 < len(c) && contentOrWh(c[i+1]):
			add(i, roleVerb{agent: before, patient: after})
		}
	}
}

// hinted reports whether the other text reads t, in a verb form here, as a
// verb on structure alone.
func hinted(hint map[string]roleVerb, t words.Token) bool {
	v, ok := hint[t.Canon]
	return ok && !v.weak && (thirdPerson(t.Raw) || participle(t.Raw))
}

// previousWord returns the index of the word before c[i], skipping "not"
// and "no", or -1.
func previousWord(c []words.Token, i int) int {
	for j := i - 1; j >= 0; j-- {
		if c[j].Raw != "not" && c[j].Raw != "no" && c[j].Raw != "never" {
			return j
		}
	}
	return -1
}

func contentOrWh(t words.Token) bool {
	if relPronouns[t.Raw] {
		return true
	}
	_, ok := roleWord(t)
	return ok
}

// movedSubject recognises a question that opens with a wh-word and moves
// its subject after "do" ("what does the metrics package import", "who did
// alice mentor"). It returns the verb (the last word before a direction
// marker or the end) and the auxiliary.
func movedSubject(c []words.Token) (verb, aux int, ok bool) {
	if len(c) == 0 || !relPronouns[c[0].Raw] || c[0].Raw == "that" {
		return 0, 0, false
	}
	aux = -1
	for i, t := range c {
		if doAux[t.Raw] {
			aux = i
			break
		}
	}
	if aux < 0 || aux+2 >= len(c) || c[aux+1].Raw == "not" || c[aux+1].Raw == "n" {
		return 0, 0, false
	}
	verb = -1
	for i := aux + 1; i < len(c); i++ {
		if markers[c[i].Raw] != "" || scopes[c[i].Raw] != "" || c[i].Canon == "from" {
			break
		}
		if !stopWord(c[i]) {
			verb = i
		}
	}
	if verb <= aux+1 {
		return 0, 0, false
	}
	return verb, aux, true
}

// objectRelative returns where the subject of an object relative clause
// begins when c[i] is its verb ("services [the gateway] calls", "people
// [alice] interviewed"), or -1. The verb ends its clause and is inflected;
// the subject is a noun phrase opened by a determiner after a content word
// or wh-word, or, before a past form, the one word before it.
func objectRelative(c []words.Token, i int) int {
	if i+1 < len(c) && !directionAt(c, i+1) {
		return -1
	}
	if strings.HasSuffix(c[i].Raw, "ing") {
		return -1
	}
	for k := i - 1; k >= 1; k-- {
		if determiners[c[k].Raw] && k < i-1 {
			// A bare verb needs a plural subject: "the polyfills bundle".
			if contentOrWh(c[k-1]) && (inflected(c[i].Raw) || thirdPerson(c[i-1].Raw)) {
				return k
			}
			return -1
		}
		if stopWord(c[k]) && !determiners[c[k].Raw] {
			return -1
		}
	}
	if !inflected(c[i].Raw) {
		return -1
	}
	if participle(c[i].Raw) && i >= 2 && contentOrWh(c[i-2]) && !relPronouns[c[i-2].Raw] {
		if _, ok := roleWord(c[i-1]); ok {
			return i - 1
		}
	}
	return -1
}

// directionAt reports whether c[i] is a direction or scope marker.
func directionAt(c []words.Token, i int) bool {
	return markers[c[i].Raw] != "" || scopes[c[i].Raw] != "" || c[i].Canon == "from"
}

// readConditions labels each content word "main" or "cond": the words of
// the clause a condition marker opens (to the next comma, or the end) are
// "cond", the others "main". A marker that opens the text or follows a
// comma puts its clause first ("when the build breaks, notify slack").
func readConditions(text string, into map[string]map[string]bool) {
	segs := strings.Split(text, ",")
	found := false
	for _, s := range segs {
		for _, t := range words.Tokens(s) {
			found = found || condMarkers[t.Raw]
		}
	}
	if !found {
		return
	}
	label := func(w, l string) {
		if into[w] == nil {
			into[w] = map[string]bool{}
		}
		into[w][l] = true
	}
	for _, s := range segs {
		l := "main"
		for _, t := range words.Tokens(s) {
			if condMarkers[t.Raw] {
				l = "cond"
				continue
			}
			if w, ok := roleWord(t); ok {
				label(w, l)
			}
		}
	}
}

// readScopes records the scope each content word stands in ("files in the
// drive": drive in "in") and reports whether any is "out".
func readScopes(toks []words.Token, into map[string]map[string]bool) (out bool) {
	for i := 0; i < len(toks); i++ {
		s := scopes[toks[i].Raw]
		if toks[i].Raw == "close" && i+1 < len(toks) && toks[i+1].Raw == "to" {
			s, i = "near", i+1
		}
		if s == "" {
			continue
		}
		out = out || s == "out"
		j := i + 1
		if j < len(toks) && toks[j].Raw == "of" {
			j++ // "outside of"
		}
		for ; j < len(toks); j++ {
			if determiners[toks[j].Raw] || quantifiers[toks[j].Raw] != "" {
				continue
			}
			w, ok := roleWord(toks[j])
			if !ok {
				break
			}
			if into[w] == nil {
				into[w] = map[string]bool{}
			}
			into[w][s] = true
		}
	}
	return out
}

// readHeads records which word modifies which: "users of the group",
// "the group's users" and "users in the group" make group modify users,
// as the compound "group users" does.
//
// A compound is a weak reading ("what is on my calendar today", "incident
// postmortem payment outage" are no compounds), so it counts only against
// an "of" or "in", only in a run of two or three words (each modifying the
// last) and never across a verb.
func readHeads(toks []words.Token, verbs map[string]roleVerb, heads, ofs, poss map[[2]string]bool) {
	var run []string // the content words just before, with nothing between
	flush := func() {
		if len(run) == 2 || len(run) == 3 {
			last := run[len(run)-1]
			for _, w := range run[:len(run)-1] {
				if w != last {
					heads[[2]string{w, last}] = true
				}
			}
		}
		run = run[:0]
	}
	for i, t := range toks {
		switch {
		case (t.Raw == "of" || scopes[t.Raw] == "in") && len(run) > 0:
			head := run[len(run)-1]
			for j := i + 1; j < len(toks); j++ {
				if determiners[toks[j].Raw] {
					continue
				}
				w, ok := roleWord(toks[j])
				if !ok {
					break
				}
				heads[[2]string{w, head}] = true
				ofs[[2]string{w, head}] = true
			}
			flush()
		case t.Raw == "s" && len(run) > 0 && i+1 < len(toks):
			if w, ok := roleWord(toks[i+1]); ok {
				heads[[2]string{run[len(run)-1], w}] = true
				poss[[2]string{run[len(run)-1], w}] = true
			}
			flush()
		default:
			w, ok := roleWord(t)
			if _, verb := verbs[t.Canon]; !ok || verb {
				flush()
				continue
			}
			run = append(run, w)
		}
	}
	flush()
}

// readBothRoles parses a and b, each with the other's verbs as hints.
func readBothRoles(a, b string) (textRoles, textRoles) {
	ha, hb := readRoles(a, nil), readRoles(b, nil)
	return readRoles(a, hb.verbs), readRoles(b, ha.verbs)
}

// roleGuard reports whether a and b give the words they share the same
// roles; reason says where they differ.
func roleGuard(ra, rb textRoles) (bool, string) {
	shared := map[string]bool{}
	for w := range ra.words {
		if rb.words[w] {
			shared[w] = true
		}
	}
	if ok, reason := compareVerbs(ra, rb, shared); !ok {
		return false, reason
	}
	for w := range shared {
		ca, cb := ra.cond[w], rb.cond[w]
		if len(ca) == 1 && len(cb) == 1 && !sameKeys(ca, cb) {
			return false, fmt.Sprintf("order differs: %q in the %s clause / the %s clause", w, firstKey(ca), firstKey(cb))
		}
		sa, sb := ra.scope[w], rb.scope[w]
		if len(sa) > 0 && len(sb) > 0 && !overlap(sa, sb) {
			return false, fmt.Sprintf("scope differs: %s %q / %s %q", firstKey(sa), w, firstKey(sb), w)
		}
	}
	if ra.hasOut != rb.hasOut {
		return false, `scope differs: "outside" in one text only`
	}
	for p := range ra.ofs {
		if rb.heads[[2]string{p[1], p[0]}] {
			return false, fmt.Sprintf("order differs: %s of %s / %s of %s", p[1], p[0], p[0], p[1])
		}
	}
	for p := range rb.ofs {
		if ra.heads[[2]string{p[1], p[0]}] {
			return false, fmt.Sprintf("order differs: %s of %s / %s of %s", p[0], p[1], p[1], p[0])
		}
	}
	for p := range ra.poss {
		if rb.poss[[2]string{p[1], p[0]}] {
			return false, fmt.Sprintf("order differs: %s's %s / %s's %s", p[0], p[1], p[1], p[0])
		}
	}
	return true, ""
}

// compareVerbs requires each verb of both texts to have the same shared
// words on its subject side and on its object side.
func compareVerbs(a, b textRoles, shared map[string]bool) (bool, string) {
	side := func(ws []string) string {
		var out []string
		for _, w := range ws {
			if shared[w] {
				out = append(out, w)
			}
		}
		return strings.Join(uniqueSorted(out), " ")
	}
	for v, va := range a.verbs {
		vb, ok := b.verbs[v]
		if !ok {
			continue
		}
		if side(va.agent) != side(vb.agent) || !va.weak && !vb.weak && side(va.patient) != side(vb.patient) {
			return false, fmt.Sprintf("roles differ around %q: %q does it to %q / %q to %q",
				v, side(va.agent), side(va.patient), side(vb.agent), side(vb.patient))
		}
	}
	return true, ""
}

// passiveBy reports whether every "by" of r introduces the agent of a verb
// that other also has: "services called by the gateway" may be "services
// the gateway calls".
func passiveBy(r, other textRoles) bool {
	n := 0
	for v, rv := range r.verbs {
		if rv.byAgent {
			if _, ok := other.verbs[v]; !ok {
				return false
			}
			n++
		}
	}
	return n > 0 && n == r.byN
}

func sameKeys(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func overlap(a, b map[string]bool) bool {
	for k := range a {
		if b[k] {
			return true
		}
	}
	return false
}

func firstKey(m map[string]bool) string {
	keys := sortedKeys(m)
	if len(keys) == 0 {
		return ""
	}
	return keys[0]
}
