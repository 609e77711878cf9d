package secrets

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// JSON escapes: the prefilter that tells whether a message's escapes could hide a
// registered value, and the decoder that sees through them.

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
