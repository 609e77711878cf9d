package words

import "strings"

// Porter returns the Porter (1980) stem of a lower-case ASCII word:
// "connections", "connected" and "connecting" all become "connect". Words
// of one or two letters and words with other characters are returned as
// they are. The lexical embedder and the guard use it so that inflections
// of one word count as one word.
func Porter(w string) string {
	return stem(w, func(b []byte) []byte {
		return step5(step4(step3(step2(inflectional(b)))))
	})
}

// Inflection returns w without its inflection, by the steps of Porter's
// algorithm that undo inflection only (1a plurals, 1b -ed and -ing, 1c a
// final y, 5 a final e and a double l): "queries" and "query" are
// "queri", "parsing" and "parses" are "pars", but "generic" and "general"
// stay apart, as do "deployer" and "deployment", which Porter's other
// steps (derivational suffixes) make one word.
func Inflection(w string) string {
	return stem(w, func(b []byte) []byte { return step5(inflectional(b)) })
}

// inflectional is Porter's steps 1a, 1b and 1c.
func inflectional(b []byte) []byte { return step1c(step1b(step1a(b))) }

// stem applies steps to w, a lower-case ASCII word of three letters or more;
// any other word is returned as it is.
func stem(w string, steps func([]byte) []byte) string {
	if len(w) <= 2 {
		return w
	}
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return w
		}
	}
	return string(steps([]byte(w)))
}

// cons reports whether b[i] is a consonant in Porter's sense.
func cons(b []byte, i int) bool {
	switch b[i] {
	case 'a', 'e', 'i', 'o', 'u':
		return false
	case 'y':
		return i == 0 || !cons(b, i-1)
	}
	return true
}

// measure is m in [C](VC)^m[V] for b.
func measure(b []byte) int {
	n, i := 0, 0
	for i < len(b) && cons(b, i) {
		i++
	}
	for i < len(b) {
		for i < len(b) && !cons(b, i) {
			i++
		}
		if i >= len(b) {
			break
		}
		n++
		for i < len(b) && cons(b, i) {
			i++
		}
	}
	return n
}

func hasVowel(b []byte) bool {
	for i := range b {
		if !cons(b, i) {
			return true
		}
	}
	return false
}

func doubleCons(b []byte) bool {
	n := len(b)
	return n >= 2 && b[n-1] == b[n-2] && cons(b, n-1)
}

// cvc: consonant-vowel-consonant ending, the last not w, x or y.
func cvc(b []byte) bool {
	n := len(b)
	if n < 3 || !cons(b, n-1) || cons(b, n-2) || !cons(b, n-3) {
		return false
	}
	c := b[n-1]
	return c != 'w' && c != 'x' && c != 'y'
}

func hasSuffix(b []byte, s string) bool { return strings.HasSuffix(string(b), s) }

// replaceIf replaces suffix s by r when the stem before it has measure > m.
func replaceIf(b []byte, s, r string, m int) ([]byte, bool) {
	if !hasSuffix(b, s) {
		return b, false
	}
	stem := b[:len(b)-len(s)]
	if measure(stem) > m {
		return append(stem[:len(stem):len(stem)], r...), true
	}
	return b, true
}

func step1a(b []byte) []byte {
	switch {
	case hasSuffix(b, "sses"), hasSuffix(b, "ies"):
		return b[:len(b)-2]
	case hasSuffix(b, "ss"):
		return b
	case hasSuffix(b, "s"):
		return b[:len(b)-1]
	}
	return b
}

func step1b(b []byte) []byte {
	if hasSuffix(b, "eed") {
		if measure(b[:len(b)-3]) > 0 {
			return b[:len(b)-1]
		}
		return b
	}
	var stem []byte
	switch {
	case hasSuffix(b, "ed") && hasVowel(b[:len(b)-2]):
		stem = b[:len(b)-2]
	case hasSuffix(b, "ing") && hasVowel(b[:len(b)-3]):
		stem = b[:len(b)-3]
	default:
		return b
	}
	switch {
	case hasSuffix(stem, "at"), hasSuffix(stem, "bl"), hasSuffix(stem, "iz"):
		return append(stem[:len(stem):len(stem)], 'e')
	case doubleCons(stem):
		if c := stem[len(stem)-1]; c != 'l' && c != 's' && c != 'z' {
			return stem[:len(stem)-1]
		}
		return stem
	case measure(stem) == 1 && cvc(stem):
		return append(stem[:len(stem):len(stem)], 'e')
	}
	return stem
}

func step1c(b []byte) []byte {
	if hasSuffix(b, "y") && hasVowel(b[:len(b)-1]) {
		c := append([]byte(nil), b...)
		c[len(c)-1] = 'i'
		return c
	}
	return b
}

var step2Rules = [][2]string{
	{"ational", "ate"}, {"tional", "tion"}, {"enci", "ence"}, {"anci", "ance"}, {"izer", "ize"},
	{"bli", "ble"}, {"alli", "al"}, {"entli", "ent"}, {"eli", "e"}, {"ousli", "ous"},
	{"ization", "ize"}, {"ation", "ate"}, {"ator", "ate"}, {"alism", "al"}, {"iveness", "ive"},
	{"fulness", "ful"}, {"ousness", "ous"}, {"aliti", "al"}, {"iviti", "ive"}, {"biliti", "ble"}, {"logi", "log"},
}

var step3Rules = [][2]string{
	{"icate", "ic"}, {"ative", ""}, {"alize", "al"}, {"iciti", "ic"}, {"ical", "ic"}, {"ful", ""}, {"ness", ""},
}

func applyRules(b []byte, rules [][2]string, m int) []byte {
	for _, r := range rules {
		if out, matched := replaceIf(b, r[0], r[1], m); matched {
			return out
		}
	}
	return b
}

func step2(b []byte) []byte { return applyRules(b, step2Rules, 0) }
func step3(b []byte) []byte { return applyRules(b, step3Rules, 0) }

var step4Suffixes = []string{
	"al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent",
	"ion", "ou", "ism", "ate", "iti", "ous", "ive", "ize",
}

func step4(b []byte) []byte {
	// Longest match first among suffixes sharing an ending.
	best := ""
	for _, s := range step4Suffixes {
		if hasSuffix(b, s) && len(s) > len(best) {
			best = s
		}
	}
	if best == "" {
		return b
	}
	stem := b[:len(b)-len(best)]
	if measure(stem) <= 1 {
		return b
	}
	if best == "ion" {
		if n := len(stem); n == 0 || (stem[n-1] != 's' && stem[n-1] != 't') {
			return b
		}
	}
	return stem
}

func step5(b []byte) []byte {
	if hasSuffix(b, "e") {
		stem := b[:len(b)-1]
		if m := measure(stem); m > 1 || (m == 1 && !cvc(stem)) {
			b = stem
		}
	}
	if measure(b) > 1 && doubleCons(b) && b[len(b)-1] == 'l' {
		b = b[:len(b)-1]
	}
	return b
}
