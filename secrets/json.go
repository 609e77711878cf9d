package secrets

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
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

// escapesMayHide reports whether raw holds an escape that decodes to a byte some
// pattern contains, or a doubled backslash that may start such an escape one level
// down. Ordinary escapes (\n in text, \" around quotes) then cost no decoding.
func (s *snapshot) escapesMayHide(raw []byte) bool {
	for i := 0; ; {
		j := bytes.IndexByte(raw[i:], '\\')
		if j < 0 {
			return false
		}
		i += j
		if i+1 >= len(raw) {
			return false
		}
		c := raw[i+1]
		switch c {
		case 'u':
			if r, ok := hex4(raw[i+2:]); ok && (r == '\\' || s.hidesRune(r)) {
				return true
			}
		case '\\':
			if i+2 < len(raw) {
				switch next := raw[i+2]; next {
				case 'u', '/', '\\', '"':
					return true
				default:
					if d, ok := unescapeByte(next); ok && s.charset[d] {
						return true
					}
				}
			}
			if s.charset['\\'] {
				return true
			}
		default:
			if d, ok := unescapeByte(c); ok && s.charset[d] {
				return true
			}
		}
		i += 2
	}
}

// hidesRune reports whether \uXXXX encoding r may spell a byte of some pattern. Its
// first UTF-8 byte is checked: of the rune, of U+FFFD (which a lone surrogate decodes
// to), or, for a high surrogate, of the rune it forms with any low one.
func (s *snapshot) hidesRune(r rune) bool {
	var buf [utf8.UTFMax]byte
	switch {
	case 0xD800 <= r && r < 0xDC00:
		lead := 0xF0 | byte((0x40+r-0xD800)>>8)
		utf8.EncodeRune(buf[:], utf8.RuneError)
		return s.charset[lead] || s.charset[buf[0]]
	case utf16.IsSurrogate(r):
		r = utf8.RuneError
	}
	utf8.EncodeRune(buf[:], r)
	return s.charset[buf[0]]
}

// unescapeByte decodes the one-character JSON escape \c.
func unescapeByte(c byte) (byte, bool) {
	switch c {
	case '"', '\\', '/':
		return c, true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	}
	return 0, false
}

// hex4 decodes four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
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

// unescape decodes the JSON escapes in b (a string body, or text that is one) and
// returns, for each decoded byte i, the range b[from[i]:to[i]] it came from. Bytes
// that start no valid escape are kept as they are.
func unescape(b []byte) (out []byte, from, to []int) {
	out = make([]byte, 0, len(b))
	from = make([]int, 0, len(b))
	to = make([]int, 0, len(b))
	emit := func(p []byte, i, j int) {
		for range p {
			from, to = append(from, i), append(to, j)
		}
		out = append(out, p...)
	}
	var buf [utf8.UTFMax]byte
	for i := 0; i < len(b); {
		if b[i] != '\\' || i+1 >= len(b) {
			emit(b[i:i+1], i, i+1)
			i++
			continue
		}
		if d, ok := unescapeByte(b[i+1]); ok {
			buf[0] = d
			emit(buf[:1], i, i+2)
			i += 2
			continue
		}
		r, ok := hex4(b[i+2:])
		if b[i+1] != 'u' || !ok {
			emit(b[i:i+1], i, i+1)
			i++
			continue
		}
		n := 6
		if utf16.IsSurrogate(r) {
			r2, ok2 := rune(0), false
			if i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
				r2, ok2 = hex4(b[i+8:])
			}
			if dec := utf16.DecodeRune(r, r2); ok2 && dec != utf8.RuneError {
				r, n = dec, 12
			} else {
				r = utf8.RuneError
			}
		}
		emit(buf[:utf8.EncodeRune(buf[:], r)], i, i+n)
		i += n
	}
	return out, from, to
}
