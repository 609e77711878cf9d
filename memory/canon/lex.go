package canon

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nexus-mcp/nexus/memory/words"
)

// kind is what a token is, for the rules that read it.
type kind uint8

const (
	word  kind = iota // a plain word: stemmed and mapped through the word table
	name              // an identifier, number, version, path or quoted string: compared as written (case aside)
	comma             // a clause boundary; dropped from the form
	mark              // a marker a rule put there (relative clause, passive)
)

// tok is one token of a text.
type tok struct {
	raw   string // lower-cased as written; a phrase's words joined by spaces
	canon string // what it is compared as
	kind  kind
	cap   bool // written with a capital inside the sentence: a name
}

// numberWords are the number words compared as their digits ("ten" = "10").
var numberWords = map[string]string{
	"zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
	"seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
	"thirteen": "13", "fourteen": "14", "fifteen": "15", "sixteen": "16", "seventeen": "17",
	"eighteen": "18", "nineteen": "19", "twenty": "20", "thirty": "30", "fifty": "50", "hundred": "100",
}

// contractions split into the words they stand for; "n't" is "not".
var contractions = map[string][]string{
	"don't": {"do", "not"}, "doesn't": {"does", "not"}, "didn't": {"did", "not"},
	"isn't": {"is", "not"}, "aren't": {"are", "not"}, "wasn't": {"was", "not"}, "weren't": {"were", "not"},
	"can't": {"can", "not"}, "cannot": {"can", "not"}, "won't": {"will", "not"}, "wouldn't": {"would", "not"},
	"shouldn't": {"should", "not"}, "couldn't": {"could", "not"}, "haven't": {"have", "not"},
	"hasn't": {"has", "not"}, "hadn't": {"had", "not"}, "i'm": {"i", "am"}, "it's": {"it", "is"},
	"what's": {"what", "is"}, "where's": {"where", "is"}, "who's": {"who", "is"}, "how's": {"how", "is"},
	"there's": {"there", "is"}, "i'd": {"i", "would"}, "we'd": {"we", "would"},
}

// lex splits text into tokens. Identifiers, numbers, versions, paths and
// quoted strings stay whole and unstemmed (a name is compared as written);
// words are lower-cased, phrases of the word table joined, and each word
// given its canonical form (words.Lemma: the word table's word, else the
// word without its inflection). It records
// the rewrites that changed a word.
func lex(text string, rec *record) []tok {
	var out []tok
	var run []string // plain words waiting for phrase joining
	var caps []bool
	flush := func() {
		if len(run) == 0 {
			return
		}
		toks := words.Tokens(strings.Join(run, " "))
		i := 0 // index into run
		for _, t := range toks {
			n := strings.Count(t.Raw, " ") + 1
			c := false
			if i < len(caps) {
				c = caps[i]
			}
			canon := t.Canon // a phrase's word
			if n == 1 {
				canon = words.Lemma(t.Raw)
			}
			out = append(out, wordTok(t.Raw, canon, n > 1, c, rec))
			i += n
		}
		run, caps = run[:0], caps[:0]
	}
	first := true
	for _, field := range splitFields(text) {
		if field == "," || field == ";" {
			flush()
			out = append(out, tok{raw: ",", canon: ",", kind: comma})
			continue
		}
		if q, ok := quoted(field); ok {
			flush()
			out = append(out, tok{raw: q, canon: `"` + q + `"`, kind: name})
			first = false
			continue
		}
		if isIdentifier(field) {
			flush()
			id := strings.ToLower(field)
			canon := id
			if len(id) > 1 && id[0] == 'v' && id[1] >= '0' && id[1] <= '9' && strings.Contains(id, ".") {
				// v1.2 = 1.2; not v2 = 2: "v2 tickets" are not "2 tickets"
				canon = id[1:]
				rec.add("version-prefix", field)
			}
			out = append(out, tok{raw: id, canon: canon, kind: name})
			first = false
			continue
		}
		low := strings.ToLower(strings.ReplaceAll(field, "’", "'"))
		if parts, ok := contractions[low]; ok {
			rec.add("contraction", low)
			for _, p := range parts {
				run, caps = append(run, p), append(caps, false)
			}
			first = false
			continue
		}
		possessive := false
		if strings.HasSuffix(low, "'s") || strings.HasSuffix(low, "s'") {
			possessive = true
			low = strings.TrimSuffix(strings.TrimSuffix(low, "'s"), "'")
		}
		for _, w := range words.Split(low) {
			r, _ := utf8.DecodeRuneInString(field)
			run = append(run, w)
			caps = append(caps, !first && unicode.IsUpper(r))
		}
		if possessive {
			flush()
			out = append(out, tok{raw: "'s", canon: "'s", kind: mark})
		}
		first = false
	}
	flush()
	return out
}

// wordTok is the token of one plain word (or joined phrase).
func wordTok(raw, canon string, phrase, capital bool, rec *record) tok {
	t := tok{raw: raw, canon: canon, kind: word, cap: capital}
	if n, ok := numberWords[raw]; ok {
		rec.add("number-word", raw)
		return tok{raw: raw, canon: n, kind: name}
	}
	if function(raw) || phrases[raw] != "" {
		t.canon = raw
		return t
	}
	if d := degree(raw, canon); d != "" {
		t.canon += d
	}
	switch {
	case phrase:
		rec.add("synonym", raw)
	case canon == raw:
	case canon == words.Inflection(raw):
		rec.add("inflection", raw)
	default:
		rec.add("synonym", raw)
	}
	return t
}

// degree keeps a comparative or superlative that the word table maps to
// its plain word ("cheapest" -> "cheap", "larger" -> "big"): degree
// always counts.
func degree(raw, canon string) string {
	if canon == raw || words.Inflection(raw) == canon || strings.Contains(raw, " ") {
		return ""
	}
	for _, sfx := range []string{"est", "er"} {
		if !strings.HasSuffix(raw, sfx) || strings.HasSuffix(canon, sfx) {
			continue
		}
		stem := raw[:len(raw)-len(sfx)]
		for _, base := range []string{stem, stem + "e", strings.TrimSuffix(stem, "i") + "y", stem[:max(len(stem)-1, 0)]} {
			if base != "" && words.Lemma(base) == canon {
				return "+" + sfx
			}
		}
	}
	return ""
}

// splitFields splits text at white space, keeping commas and semicolons as
// fields of their own and quoted strings whole.
func splitFields(text string) []string {
	var out []string
	var b strings.Builder
	inQuote := rune(0)
	flush := func() {
		if b.Len() > 0 {
			out = append(out, b.String())
			b.Reset()
		}
	}
	for _, r := range text {
		switch {
		case inQuote != 0:
			b.WriteRune(r)
			if r == inQuote {
				inQuote = 0
				flush()
			}
		case (r == '"' || r == '`') && b.Len() == 0:
			inQuote = r
			b.WriteRune(r)
		case unicode.IsSpace(r):
			flush()
		case r == ',' || r == ';':
			flush()
			out = append(out, string(r))
		case r == '?' || r == '!' || r == '(' || r == ')' || r == ':' && b.Len() == 0:
			flush()
		default:
			b.WriteRune(r)
		}
	}
	flush()
	// Trailing sentence punctuation belongs to no word.
	for i, f := range out {
		if len(f) > 1 && (strings.HasSuffix(f, ".") || strings.HasSuffix(f, ":")) && !strings.ContainsAny(f[:len(f)-1], "./") {
			out[i] = f[:len(f)-1]
		}
	}
	return out
}

// quoted returns the inside of a quoted field.
func quoted(f string) (string, bool) {
	if len(f) >= 2 && (f[0] == '"' || f[0] == '`') && f[len(f)-1] == f[0] {
		return f[1 : len(f)-1], true
	}
	return "", false
}

// isIdentifier reports a field that is a name rather than a word: it has
// digits, an underscore, a dot, slash or colon inside, a capital after its
// first letter (camelCase, ALL-CAPS), or a hyphen between letters and
// digits.
func isIdentifier(f string) bool {
	f = strings.TrimRight(f, ".")
	if f == "" {
		return false
	}
	upper, letters := 0, 0
	for i, r := range f {
		switch {
		case unicode.IsDigit(r), r == '_', r == '/', r == '\\', r == '#', r == '@':
			return true
		case (r == '.' || r == ':') && i > 0:
			return true
		case unicode.IsUpper(r):
			upper++
			letters++
			if i > 0 {
				return true
			}
		case unicode.IsLetter(r):
			letters++
		}
	}
	return upper > 1 && upper == letters
}
