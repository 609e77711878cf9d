package secrets

import (
	"bytes"
	"encoding/json"
	"slices"
)

// maxJSONDepth bounds how many levels of JSON text nested in strings JSON decodes (a
// tool result's text that is itself JSON is two levels).
const maxJSONDepth = 3

// JSON returns the JSON message raw with every known value replaced, however it is
// spelled: each string is matched after decoding its escapes (any mix of \uXXXX, \/,
// surrogate pairs), then again after decoding the escapes of JSON text nested in it,
// up to maxJSONDepth levels. A value is replaced where it lies wholly inside one
// string (or one number or literal, which then becomes a string); the result is valid
// JSON when raw was, and the rest of raw keeps its bytes.
//
// Out of reach: a value split across two strings, or across a string and what
// follows it ("sec" + "ret" in two fields, or in two chunks of a stream), a value
// transformed in ways other than the registered encodings (reversed, hex, base64 of a
// longer text that contains it), and JSON nested deeper than maxJSONDepth.
//
// Like Bytes it returns raw itself when nothing matched, and then allocates nothing:
// the check is one sampled pass over raw for the registered spellings, and one
// bytes.IndexByte pass for escapes that could hide a character of one. Input that is
// not JSON (an error message's text) is redacted as Bytes would, so a caller unsure
// whether a payload is JSON can still call JSON.
func (r *Redactor) JSON(raw []byte) []byte {
	s := r.snap.Load()
	if s == nil || !s.escapesMayHide(raw) && !s.any(raw) {
		return raw
	}
	return s.redactJSON(raw)
}

// redactJSON walks raw's strings and the text between them and replaces every
// occurrence found; see JSON.
func (s *snapshot) redactJSON(raw []byte) []byte {
	var found []span
	split := false // an occurrence outside strings runs across JSON structure
	for i := 0; i < len(raw); {
		q := bytes.IndexByte(raw[i:], '"')
		if q < 0 {
			found, split = s.outsideStrings(found, split, raw, i, len(raw))
			break
		}
		found, split = s.outsideStrings(found, split, raw, i, i+q)
		start := i + q + 1
		end, escaped := stringEnd(raw, start)
		if end < 0 {
			return s.redact(raw, s.spans(raw)) // not JSON
		}
		found = s.insideString(found, raw, start, end, escaped)
		i = end + 1
	}
	if split || slices.ContainsFunc(found, func(sp span) bool { return sp.quote }) {
		// In JSON such an occurrence is a value split across tokens, out of reach, or
		// a number; in text that is not JSON (an error message) it is a plain match.
		if !json.Valid(raw) {
			return s.redact(raw, s.spans(raw))
		}
	}
	return s.redact(raw, mergeSpans(found))
}

// stringEnd finds the closing quote of the string whose body starts at start, and
// whether the body holds an escape; -1 when the string does not end. A quote after
// an odd run of backslashes is escaped.
func stringEnd(raw []byte, start int) (int, bool) {
	for j := start; ; {
		k := bytes.IndexByte(raw[j:], '"')
		if k < 0 {
			return -1, false
		}
		j += k
		n := 0
		for n < j-start && raw[j-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			return j, bytes.IndexByte(raw[start:j], '\\') >= 0
		}
		j++
	}
}

// outsideStrings adds the occurrences in raw[from:to], which holds no string: JSON
// structure, numbers and literals. An occurrence inside one number or literal replaces
// all of it, quoted. One that runs across structure is left out and reported in split.
func (s *snapshot) outsideStrings(found []span, split bool, raw []byte, from, to int) ([]span, bool) {
	if to-from < s.minLen {
		return found, split
	}
	for _, sp := range s.spans(raw[from:to]) {
		sp.start += from
		sp.end += from
		for sp.start > from && scalarByte(raw[sp.start-1]) {
			sp.start--
		}
		for sp.end < to && scalarByte(raw[sp.end]) {
			sp.end++
		}
		whole := true
		for _, c := range raw[sp.start:sp.end] {
			whole = whole && scalarByte(c)
		}
		if !whole {
			split = true
			continue
		}
		sp.quote = true
		found = append(found, sp)
	}
	return found, split
}

// scalarByte reports whether c can be part of a JSON number or literal.
func scalarByte(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '.' || c == '+' || c == '-'
}

// insideString adds the occurrences in the string body raw[start:end]. A body with
// escapes is decoded, level by level, keeping for each decoded byte the range of raw
// it came from, so that a replacement always covers whole escapes and the string stays
// valid.
func (s *snapshot) insideString(found []span, raw []byte, start, end int, escaped bool) []span {
	body := raw[start:end]
	if !escaped {
		for _, sp := range s.spans(body) {
			sp.start += start
			sp.end += start
			found = append(found, sp)
		}
		return found
	}
	text := body
	var from, to []int // text[i] came from raw[from[i]:to[i]]
	for depth := 0; depth < maxJSONDepth && bytes.IndexByte(text, '\\') >= 0; depth++ {
		dec, df, dt := unescape(text)
		if from == nil {
			for i := range df {
				df[i] += start
				dt[i] += start
			}
		} else {
			for i := range df {
				df[i], dt[i] = from[df[i]], to[dt[i]-1]
			}
		}
		text, from, to = dec, df, dt
		for _, sp := range s.spans(text) {
			sp.start, sp.end = from[sp.start], to[sp.end-1]
			found = append(found, sp)
		}
	}
	return found
}
