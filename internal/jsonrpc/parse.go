package jsonrpc

import "encoding/json"

// Unmarshal decodes b into a zeroed m as json.Unmarshal(b, m) does, and fails
// where it fails; the error, when there is one, is encoding/json's. The messages a
// gateway reads all day (a request, a notification, a result) are decoded in
// one pass with no reflection: on a relayed call, encoding/json's two decodes
// (the client's request, the child's answer) cost a fifth of the gateway's CPU.
// Anything less plain (an escaped key, a key spelt in another case, an error
// object, a method that is not plain ASCII) is left to encoding/json, which
// then decides as it always did.
//
// m's raw parts (ID, Params, Result) are b's own bytes, not copies: b must not
// change once decoded. (json.Unmarshal copies them.)
func Unmarshal(b []byte, m *Message) error {
	*m = Message{}
	if parseMessage(b, m) {
		return nil
	}
	*m = Message{}
	return json.Unmarshal(b, m)
}

// maxParseDepth is how deeply parseMessage follows nested values before it
// leaves the message to encoding/json (whose own bound is 10,000).
const maxParseDepth = 1000

// parseMessage decodes b into m when b is valid JSON and a plain message, and
// reports whether it did. When it reports false, m may hold a part of b.
func parseMessage(b []byte, m *Message) bool {
	p := parser{b: b}
	p.space()
	if !p.next('{') {
		return false
	}
	p.space()
	if p.next('}') {
		return p.end()
	}
	for {
		p.space()
		key, ok := p.plainString()
		if !ok {
			return false
		}
		p.space()
		if !p.next(':') {
			return false
		}
		p.space()
		start := p.i
		if !p.value(0) {
			return false
		}
		v := b[start:p.i:p.i]
		switch key {
		case "jsonrpc":
			if !setString(&m.JSONRPC, v) {
				return false
			}
		case "method":
			if !setString(&m.Method, v) {
				return false
			}
		case "id":
			m.ID = v
		case "params":
			m.Params = v
		case "result":
			m.Result = v
		default:
			if foldsToField(key) {
				return false // encoding/json matches keys in any case: its call
			}
		}
		p.space()
		if p.next('}') {
			return p.end()
		}
		if !p.next(',') {
			return false
		}
	}
}

// setString sets *s to the JSON string v when it is plain ASCII; null leaves *s
// as it is, as encoding/json does. Anything else is encoding/json's to decode
// (an escape, non-ASCII text it may mend) or to refuse (a number).
func setString(s *string, v []byte) bool {
	switch {
	case string(v) == "null":
		return true
	case len(v) < 2 || v[0] != '"':
		return false
	}
	text := v[1 : len(v)-1]
	for _, c := range text {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	if string(text) == "2.0" {
		*s = "2.0" // every message says it: no allocation
	} else {
		*s = string(text)
	}
	return true
}

// foldsToField reports whether key may be one of Message's fields as
// encoding/json matches them: in any case, and by Unicode's folding, where
// "ſ" is an "s" (so any key that is not ASCII may be one). "error" is always
// left to it.
func foldsToField(key string) bool {
	if hasNonASCII(key) {
		return true
	}
	for _, f := range [...]string{"jsonrpc", "id", "method", "params", "result", "error"} {
		if len(key) == len(f) && asciiFold(key, f) {
			return true
		}
	}
	return false
}

// asciiFold reports whether a and b, of one length, differ only in the case
// of ASCII letters.
func asciiFold(a, b string) bool {
	for i := range len(a) {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func hasNonASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return true
		}
	}
	return false
}

// parser walks JSON text and checks it as encoding/json's scanner does.
type parser struct {
	b []byte
	i int
}

func (p *parser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) next(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end reports whether only space is left.
func (p *parser) end() bool {
	p.space()
	return p.i == len(p.b)
}

// plainString reads a string with no escape, as a key: a key with one is
// encoding/json's to unescape.
func (p *parser) plainString() (string, bool) {
	if !p.next('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '"':
			s := string(p.b[start:p.i])
			p.i++
			return s, true
		case c == '\\' || c < 0x20:
			return "", false
		}
		p.i++
	}
	return "", false
}

// value checks one value, of any kind, and moves past it.
func (p *parser) value(depth int) bool {
	if p.i >= len(p.b) || depth > maxParseDepth {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '"':
		return p.string()
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '-' || '0' <= c && c <= '9':
		return p.number()
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	}
	return false
}

func (p *parser) object(depth int) bool {
	p.i++ // {
	p.space()
	if p.next('}') {
		return true
	}
	for {
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != '"' || !p.string() {
			return false
		}
		p.space()
		if !p.next(':') {
			return false
		}
		p.space()
		if !p.value(depth) {
			return false
		}
		p.space()
		if p.next('}') {
			return true
		}
		if !p.next(',') {
			return false
		}
	}
}

func (p *parser) array(depth int) bool {
	p.i++ // [
	p.space()
	if p.next(']') {
		return true
	}
	for {
		p.space()
		if !p.value(depth) {
			return false
		}
		p.space()
		if p.next(']') {
			return true
		}
		if !p.next(',') {
			return false
		}
	}
}

// string checks a string: no control character, only JSON's escapes. Bytes
// that are not UTF-8 pass, as they pass encoding/json's scanner.
func (p *parser) string() bool {
	p.i++ // "
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			p.i++
			if p.i >= len(p.b) {
				return false
			}
			switch p.b[p.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if p.i+4 >= len(p.b) {
					return false
				}
				for _, h := range p.b[p.i+1 : p.i+5] {
					if !isHex(h) {
						return false
					}
				}
				p.i += 4
			default:
				return false
			}
		}
		p.i++
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// number checks -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?.
func (p *parser) number() bool {
	p.next('-')
	switch {
	case p.next('0'):
	case p.digits() == 0:
		return false
	}
	if p.next('.') && p.digits() == 0 {
		return false
	}
	if p.next('e') || p.next('E') {
		if !p.next('+') {
			p.next('-')
		}
		if p.digits() == 0 {
			return false
		}
	}
	return true
}

func (p *parser) digits() int {
	start := p.i
	for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
		p.i++
	}
	return p.i - start
}

func (p *parser) literal(word string) bool {
	if len(p.b)-p.i < len(word) || string(p.b[p.i:p.i+len(word)]) != word {
		return false
	}
	p.i += len(word)
	return true
}
