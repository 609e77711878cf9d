// Package words is what memory's similarity means by "the same word": text
// split into lower-cased runs of letters and digits, multi-word phrases
// joined, Porter-stemmed and mapped through a table of the abbreviations and
// synonyms of code and documentation queries. The lexical embedder, the
// similarity guard and tool search all read words through it, so that they
// agree on what a spelling of a word is.
package words

import (
	"strings"
	"unicode"
)

// Canonical returns the canonical words of text, in order: lower-cased runs
// of letters and digits, multi-word phrases joined ("pull request" -> "pr"),
// Porter-stemmed and mapped through the synonym table ("repositories" ->
// "repo", "folder" -> "dir"). Filler is kept: what frames a cache query ("list",
// "get") may be what tells two tools apart.
//
// Tool search uses it, which ranks tools by the words a task shares
// with them and must treat spellings of one word as one, exactly as the
// similarity guard does.
func Canonical(text string) []string {
	toks := Tokens(text)
	out := make([]string, len(toks))
	for i, t := range toks {
		out[i] = t.Canon
	}
	return out
}

// Split splits text into lower-cased runs of letters and digits.
func Split(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// Singular trims a plural ending: "bugs" -> "bug", "queries" -> "query";
// "status", "class" and "this" are kept.
func Singular(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") &&
		!strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:len(w)-1]
	}
	return w
}

// Synonym returns the canonical word a table entry maps w to, if any.
func Synonym(w string) (string, bool) {
	s, ok := synonyms()[w]
	return s, ok
}

// IsFiller reports whether w only frames a query (query verbs and function
// words: "show", "find", "the", "in").
func IsFiller(w string) bool { return filler[w] }
