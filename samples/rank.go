package samples

import (
	"math"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Term scoring for doc-kg search: a small TF-IDF over title and body,
// enough for the obviously relevant sample document to come first and for
// paraphrases ("auth module bugs" / "bug in the auth module") to agree.

var stopwords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "by": true, "do": true,
	"does": true, "for": true, "from": true, "how": true, "in": true, "is": true, "it": true, "of": true, "on": true,
	"or": true, "the": true, "to": true, "vs": true, "what": true, "when": true, "which": true, "who": true, "with": true,
	"about": true, "we": true, "our": true, "any": true, "this": true, "that": true, "there": true, "was": true,
	"le": true, "la": true, "les": true, "de": true, "des": true, "du": true, "et": true, "un": true, "une": true,
}

// stem strips a few English suffixes so inflections meet: deploying,
// deployment, deploys -> deploy; planning -> plan; priorities -> priority.
func stem(w string) string {
	for _, suf := range []string{"ments", "ment", "ings", "ing", "ies", "es", "s", "ed"} {
		base, found := strings.CutSuffix(w, suf)
		if !found || utf8.RuneCountInString(base) < 3 {
			continue
		}
		switch suf {
		case "ies":
			return base + "y"
		case "es":
			if !strings.HasSuffix(base, "ss") && !strings.HasSuffix(base, "x") && !strings.HasSuffix(base, "ch") && !strings.HasSuffix(base, "sh") {
				return base + "e" // releases -> release, not releas
			}
		case "ing", "ings", "ed":
			if n := len(base); n >= 2 && base[n-1] == base[n-2] && !strings.ContainsRune("aeiou", rune(base[n-1])) {
				base = base[:n-1] // planning -> plan
			}
		}
		if suf == "s" && strings.HasSuffix(base, "s") {
			return w // class, access
		}
		return base
	}
	return w
}

func tokens(s string) []string {
	words := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	out := words[:0]
	for _, w := range words {
		if stopwords[w] || (len(w) < 2) {
			continue
		}
		out = append(out, stem(w))
	}
	return out
}

type scored struct {
	doc   *document
	score float64
}

// rankDocs scores candidates against query; idf comes from the whole corpus
// so scores do not depend on the scope asked. Ties are broken by document
// id, so the order is deterministic.
func rankDocs(corpus, candidates []document, query string) []scored {
	terms := uniq(tokens(query))
	if len(terms) == 0 {
		return nil
	}
	df := map[string]int{}
	for i := range corpus {
		seen := map[string]bool{}
		for _, t := range tokens(corpus[i].Title + " " + corpus[i].Body) {
			if !seen[t] {
				seen[t] = true
				df[t]++
			}
		}
	}
	n := float64(len(corpus))
	var out []scored
	for i := range candidates {
		doc := &candidates[i]
		title, body := counts(tokens(doc.Title)), counts(tokens(doc.Body))
		score := 0.0
		for _, t := range terms {
			w := 2*title[t] + body[t]
			if w == 0 {
				continue
			}
			score += (1 + math.Log(float64(w))) * math.Log(1+n/float64(max(df[t], 1)))
		}
		if score > 0 {
			out = append(out, scored{doc, math.Round(score*10000) / 10000})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].score != out[j].score {
			return out[i].score > out[j].score
		}
		return out[i].doc.ID < out[j].doc.ID
	})
	return out
}

func uniq(ts []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range ts {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

func counts(ts []string) map[string]int {
	m := map[string]int{}
	for _, t := range ts {
		m[t]++
	}
	return m
}

// snippet returns at most maxChars characters of body around the first
// query term it contains, on word boundaries, with ellipses where cut.
func snippet(body, query string, maxChars int) string {
	rs := []rune(body)
	if len(rs) <= maxChars {
		return body
	}
	start := 0
	terms := tokens(query)
	words := wordSpans(body)
	for _, w := range words {
		if len(terms) > 0 && containsStr(terms, stem(strings.ToLower(w.text))) {
			start = max(0, w.start-maxChars/4)
			break
		}
	}
	end := min(len(rs), start+maxChars-2)
	if start > 0 {
		for start < end && rs[start] != ' ' {
			start++
		}
	}
	if end < len(rs) {
		for end > start && rs[end-1] != ' ' {
			end--
		}
	}
	out := strings.TrimSpace(string(rs[start:end]))
	if start > 0 {
		out = "…" + out
	}
	if end < len(rs) {
		out += "…"
	}
	return out
}

type span struct {
	text  string
	start int // rune offset
}

func wordSpans(s string) []span {
	var out []span
	var cur []rune
	pos := 0
	for i, r := range []rune(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if len(cur) == 0 {
				pos = i
			}
			cur = append(cur, r)
			continue
		}
		if len(cur) > 0 {
			out = append(out, span{string(cur), pos})
			cur = nil
		}
	}
	if len(cur) > 0 {
		out = append(out, span{string(cur), pos})
	}
	return out
}

func containsStr(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Redaction: the sample data is meant to hold no secret, but answers pass
// through this filter anyway, as the real servers' answers do, so that a
// credential pasted into a document never leaves the server.
var credentialPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\b(proxy-)?authorization\s*:\s*(bearer|basic|token)?\s*[A-Za-z0-9._~+/=-]*`),
	regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9._~+/=-]+`),
}

func redact(b []byte) []byte {
	for _, re := range credentialPatterns {
		b = re.ReplaceAll(b, []byte("[redacted-credential]"))
	}
	return b
}
