package memory

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// maxCanonicalDepth bounds the nesting of arrays and objects CanonicalJSON
// accepts, so hostile arguments cannot exhaust the stack.
const maxCanonicalDepth = 512

// CanonicalJSON returns the canonical encoding of a JSON value: the form two
// calls must share to be the same call.
//
//   - Object members are sorted by key (bytewise on the UTF-8 key); a key
//     that appears twice is an error, since children disagree on which wins.
//   - Numbers keep the spelling they were written in: 1, 1.0, 1e0 and -0
//     are four keys. A Python child reads 1 as an int and 1.0 as a float, a
//     JavaScript one keeps -0, and either may answer each differently, so
//     one spelling's answer is never another's.
//   - Strings are re-escaped: only '"', '\\' and control characters are
//     escaped (as \b \f \n \r \t or \u00XX); "\u00e9" and "é" encode alike.
//   - What a child may see differently stays different: a lone surrogate
//     escape is kept as a lower-case escape ("\ud800"), and a byte that is
//     not UTF-8 is kept as it is. Neither is folded into U+FFFD (as
//     encoding/json would), because a JavaScript or Python child receives
//     "\ud800" and "\ufffd" as two different strings.
//   - There is no insignificant whitespace.
//
// Empty input and JSON null both encode as {}: MCP clients omit arguments,
// send null and send {} for the same argument-less call.
func CanonicalJSON(raw json.RawMessage) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte("{}"), nil
	}
	c := canonicalizer{in: raw, out: make([]byte, 0, len(raw))}
	c.skipSpace()
	if err := c.value(0); err != nil {
		return nil, fmt.Errorf("memory: canonical JSON: %w", err)
	}
	c.skipSpace()
	if c.pos != len(c.in) {
		return nil, fmt.Errorf("memory: canonical JSON: unexpected data at offset %d after the value", c.pos)
	}
	if string(c.out) == "null" {
		return []byte("{}"), nil
	}
	return c.out, nil
}

// fingerprint returns the hex SHA-256 of canonical arguments.
func fingerprint(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

// cacheKey identifies an entry: tool, scope and argument fingerprint.
func cacheKey(tool, scope, fp string) []byte {
	h := sha256.New()
	h.Write([]byte("nexus-memory-v1\x00"))
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write([]byte(scope))
	h.Write([]byte{0})
	h.Write([]byte(fp))
	return h.Sum(nil)
}

type canonicalizer struct {
	in  []byte
	pos int
	out []byte
}

func (c *canonicalizer) skipSpace() {
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *canonicalizer) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %w", c.pos, fmt.Errorf(format, args...))
}

func (c *canonicalizer) value(depth int) error {
	if c.pos >= len(c.in) {
		return c.errorf("unexpected end of input")
	}
	switch b := c.in[c.pos]; {
	case b == '{':
		return c.object(depth + 1)
	case b == '[':
		return c.array(depth + 1)
	case b == '"':
		s, err := c.string()
		if err != nil {
			return err
		}
		c.out = appendString(c.out, s)
		return nil
	case b == '-' || (b >= '0' && b <= '9'):
		return c.number()
	default:
		for _, lit := range [...]string{"true", "false", "null"} {
			if bytes.HasPrefix(c.in[c.pos:], []byte(lit)) {
				c.pos += len(lit)
				c.out = append(c.out, lit...)
				return nil
			}
		}
		return c.errorf("invalid character %q looking for a value", b)
	}
}

func (c *canonicalizer) array(depth int) error {
	if depth > maxCanonicalDepth {
		return c.errorf("nesting deeper than %d", maxCanonicalDepth)
	}
	c.pos++ // '['
	c.out = append(c.out, '[')
	c.skipSpace()
	if c.pos < len(c.in) && c.in[c.pos] == ']' {
		c.pos++
		c.out = append(c.out, ']')
		return nil
	}
	for {
		c.skipSpace()
		if err := c.value(depth); err != nil {
			return err
		}
		c.skipSpace()
		if c.pos >= len(c.in) {
			return c.errorf("unexpected end of input in array")
		}
		switch c.in[c.pos] {
		case ',':
			c.pos++
			c.out = append(c.out, ',')
		case ']':
			c.pos++
			c.out = append(c.out, ']')
			return nil
		default:
			return c.errorf("invalid character %q after array element", c.in[c.pos])
		}
	}
}

type member struct {
	key string
	val []byte
}

func (c *canonicalizer) object(depth int) error {
	if depth > maxCanonicalDepth {
		return c.errorf("nesting deeper than %d", maxCanonicalDepth)
	}
	c.pos++ // '{'
	c.skipSpace()
	if c.pos < len(c.in) && c.in[c.pos] == '}' {
		c.pos++
		c.out = append(c.out, "{}"...)
		return nil
	}
	var members []member
	for {
		c.skipSpace()
		if c.pos >= len(c.in) || c.in[c.pos] != '"' {
			return c.errorf("object key must be a string")
		}
		key, err := c.string()
		if err != nil {
			return err
		}
		c.skipSpace()
		if c.pos >= len(c.in) || c.in[c.pos] != ':' {
			return c.errorf("missing ':' after object key")
		}
		c.pos++
		c.skipSpace()
		// Encode the value on its own, then move it aside for sorting.
		start := len(c.out)
		if err := c.value(depth); err != nil {
			return err
		}
		val := slices.Clone(c.out[start:])
		c.out = c.out[:start]
		members = append(members, member{key: key, val: val})
		c.skipSpace()
		if c.pos >= len(c.in) {
			return c.errorf("unexpected end of input in object")
		}
		if c.in[c.pos] == '}' {
			c.pos++
			break
		}
		if c.in[c.pos] != ',' {
			return c.errorf("invalid character %q after object member", c.in[c.pos])
		}
		c.pos++
	}
	slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.key, b.key) })
	c.out = append(c.out, '{')
	for i, m := range members {
		if i > 0 {
			if members[i-1].key == m.key {
				return c.errorf("duplicate object key %q", m.key)
			}
			c.out = append(c.out, ',')
		}
		c.out = appendString(c.out, m.key)
		c.out = append(c.out, ':')
		c.out = append(c.out, m.val...)
	}
	c.out = append(c.out, '}')
	return nil
}

// string decodes the JSON string at c.pos.
func (c *canonicalizer) string() (string, error) {
	c.pos++ // opening quote
	start := c.pos
	// Fast path: no escapes, valid UTF-8, no control characters.
	for c.pos < len(c.in) {
		b := c.in[c.pos]
		if b == '"' {
			s := c.in[start:c.pos]
			c.pos++
			if utf8.Valid(s) {
				return string(s), nil
			}
			var sb strings.Builder
			writeRaw(&sb, s)
			return sb.String(), nil
		}
		if b == '\\' || b < 0x20 {
			break
		}
		c.pos++
	}
	var sb strings.Builder
	writeRaw(&sb, c.in[start:c.pos])
	for {
		if c.pos >= len(c.in) {
			return "", c.errorf("unterminated string")
		}
		b := c.in[c.pos]
		switch {
		case b == '"':
			c.pos++
			return sb.String(), nil
		case b < 0x20:
			return "", c.errorf("control character %#x in string", b)
		case b != '\\':
			// A run of raw bytes up to the next escape or quote (ASCII, so
			// no character is split).
			run := c.pos
			for c.pos < len(c.in) && c.in[c.pos] != '\\' && c.in[c.pos] != '"' && c.in[c.pos] >= 0x20 {
				c.pos++
			}
			writeRaw(&sb, c.in[run:c.pos])
			continue
		}
		if c.pos+1 >= len(c.in) {
			return "", c.errorf("unterminated escape")
		}
		e := c.in[c.pos+1]
		c.pos += 2
		switch e {
		case '"', '\\', '/':
			sb.WriteByte(e)
		case 'b':
			sb.WriteByte('\b')
		case 'f':
			sb.WriteByte('\f')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'u':
			r, ok := c.hex4()
			if !ok {
				return "", c.errorf("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				// A high surrogate followed by a low one is one code point.
				save := c.pos
				if c.pos+1 < len(c.in) && c.in[c.pos] == '\\' && c.in[c.pos+1] == 'u' {
					c.pos += 2
					if r2, ok := c.hex4(); ok {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							sb.WriteRune(dec)
							continue
						}
					}
				}
				c.pos = save
				// Lone: kept as a marker appendString turns back into "\udXXX".
				sb.WriteString(loneSurrogate(r))
				continue
			}
			sb.WriteRune(r)
		default:
			return "", c.errorf("invalid escape \\%c", e)
		}
	}
}

func (c *canonicalizer) hex4() (rune, bool) {
	if c.pos+4 > len(c.in) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(c.in[c.pos:c.pos+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	c.pos += 4
	return rune(v), true
}

// Decoded strings may hold two markers that no valid UTF-8 contains, so
// neither is mistaken for a character or for the other:
//   - a lone surrogate escape is written as its generalised UTF-8 form
//     (ED A0..BF xx), which appendString writes back as "\udXXX";
//   - a raw input byte that is not UTF-8 is written as FF and the byte,
//     which appendString writes back as the byte alone.
//
// Raw input bytes ED A0..BF are not UTF-8, so they become FF-marked bytes
// and never pass for a lone surrogate escape.
const rawByteMark = 0xFF

// writeRaw copies raw string bytes, marking those that are not UTF-8.
func writeRaw(sb *strings.Builder, b []byte) {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			sb.WriteByte(rawByteMark)
		}
		sb.Write(b[:n])
		b = b[n:]
	}
}

// loneSurrogate is the marker of the lone surrogate r.
func loneSurrogate(r rune) string {
	return string([]byte{0xED, byte(0x80 | (r>>6)&0x3F), byte(0x80 | r&0x3F)})
}

// surrogateAt returns the lone surrogate encoded at s[i:], if any.
func surrogateAt(s string, i int) (rune, bool) {
	if i+2 >= len(s) || s[i] != 0xED || s[i+1] < 0xA0 || s[i+1] > 0xBF || s[i+2]&0xC0 != 0x80 {
		return 0, false
	}
	return 0xD000 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F), true
}

func appendString(out []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	out = append(out, '"')
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b == rawByteMark && i+1 < len(s) {
			out = append(out, s[i+1])
			i++
			continue
		}
		if b == 0xED {
			if r, ok := surrogateAt(s, i); ok {
				out = append(out, '\\', 'u', hexDigits[r>>12], hexDigits[(r>>8)&0xF], hexDigits[(r>>4)&0xF], hexDigits[r&0xF])
				i += 2
				continue
			}
		}
		switch {
		case b == '"' || b == '\\':
			out = append(out, '\\', b)
		case b >= 0x20:
			out = append(out, b)
		case b == '\b':
			out = append(out, '\\', 'b')
		case b == '\f':
			out = append(out, '\\', 'f')
		case b == '\n':
			out = append(out, '\\', 'n')
		case b == '\r':
			out = append(out, '\\', 'r')
		case b == '\t':
			out = append(out, '\\', 't')
		default:
			out = append(out, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
		}
	}
	return append(out, '"')
}

var errNumber = errors.New("invalid number")

// number validates the JSON number at c.pos and appends it as it is written.
func (c *canonicalizer) number() error {
	start := c.pos
	if c.in[c.pos] == '-' {
		c.pos++
	}
	intStart := c.pos
	for c.pos < len(c.in) && isDigit(c.in[c.pos]) {
		c.pos++
	}
	intPart := c.in[intStart:c.pos]
	if len(intPart) == 0 || (len(intPart) > 1 && intPart[0] == '0') {
		return c.errorf("%w %q", errNumber, c.in[start:c.pos])
	}
	if c.pos < len(c.in) && c.in[c.pos] == '.' {
		c.pos++
		fs := c.pos
		for c.pos < len(c.in) && isDigit(c.in[c.pos]) {
			c.pos++
		}
		if fs == c.pos {
			return c.errorf("%w %q", errNumber, c.in[start:c.pos])
		}
	}
	if c.pos < len(c.in) && (c.in[c.pos] == 'e' || c.in[c.pos] == 'E') {
		c.pos++
		if c.pos < len(c.in) && (c.in[c.pos] == '+' || c.in[c.pos] == '-') {
			c.pos++
		}
		ds := c.pos
		for c.pos < len(c.in) && isDigit(c.in[c.pos]) {
			c.pos++
		}
		if ds == c.pos {
			return c.errorf("%w %q", errNumber, c.in[start:c.pos])
		}
	}
	c.out = append(c.out, c.in[start:c.pos]...)
	return nil
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }
