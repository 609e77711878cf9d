package jsonrpc

import (
	"encoding/json"

	"github.com/nexus-mcp/nexus/internal/jsonwalk"
)

// Unmarshal decodes b into a zeroed m as json.Unmarshal(b, m) does, and fails
// where it fails; the error, when there is one, is encoding/json's. The messages a
// gateway reads all day (a request, a notification, a result) are decoded in
// one pass with no reflection: on a relayed call, encoding/json's two decodes
// (the client's request, the child's answer) cost a fifth of the gateway's CPU.
// Anything less plain (an escaped key, a key spelt in another case or
// repeated, an error object, a method escaped or not UTF-8) is left to
// encoding/json, which then decides as it always did.
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

// messageFields are the members of a Message, in the order parseMessage reads
// them from Fields.
var messageFields = []string{"jsonrpc", "method", "id", "params", "result", "error"}

// parseMessage decodes b into m when b is valid JSON and a plain message, and
// reports whether it did.
func parseMessage(b []byte, m *Message) bool {
	var v [6]json.RawMessage
	if !Fields(b, messageFields, v[:]) || v[5] != nil { // an error object is encoding/json's
		return false
	}
	if !SetString(&m.JSONRPC, v[0]) || !SetString(&m.Method, v[1]) {
		return false
	}
	m.ID, m.Params, m.Result = v[2], v[3], v[4]
	return true
}

// Fields finds, in one pass that checks the whole of obj, the values of the
// members of the JSON object obj named in names: values[i] is the value of
// names[i] as obj wrote it, nil when absent. That is what encoding/json gives
// for a struct of json.RawMessage fields of those names. It reports false for
// whatever it leaves to encoding/json to judge: obj is not a valid JSON
// object, or a key is escaped, is not ASCII, is one of names spelt in another
// case (encoding/json matches keys in any case, and by Unicode's folding,
// where "ſ" is an "s"), or is one of names repeated (encoding/json decodes
// each in turn: a string then null keeps the string). The values are obj's
// own bytes.
func Fields(obj []byte, names []string, values []json.RawMessage) bool {
	p := parser{b: obj}
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
		if !matchField(key, names, values, obj[start:p.i:p.i]) {
			return false
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

// matchField sets the value of the name key is, and reports false when key
// repeats one of names, or may be one only as encoding/json matches keys.
func matchField(key []byte, names []string, values []json.RawMessage, v json.RawMessage) bool {
	for i, name := range names {
		if string(key) == name {
			if values[i] != nil {
				return false // repeated
			}
			values[i] = v
			return true
		}
	}
	if hasNonASCII(key) {
		return false
	}
	for _, name := range names {
		if len(key) == len(name) && asciiFold(key, name) {
			return false
		}
	}
	return true
}

// SetString sets *s to the JSON string v, a value Fields found, when its bytes
// are its text (jsonwalk.PlainString); null, or no value, leaves *s as it is,
// as encoding/json does. It reports false for anything else, which is
// encoding/json's to decode (an escape, bytes that are not UTF-8, which it
// mends) or to refuse (a number).
func SetString(s *string, v json.RawMessage) bool {
	switch {
	case v == nil || string(v) == "null":
		return true
	case len(v) < 2 || v[0] != '"':
		return false
	}
	if !jsonwalk.PlainString(v) {
		return false
	}
	text := v[1 : len(v)-1]
	if string(text) == "2.0" {
		*s = "2.0" // every message says it: no allocation
	} else {
		*s = string(text)
	}
	return true
}

// asciiFold reports whether a and b, of one length, differ only in the case
// of ASCII letters.
func asciiFold(a []byte, b string) bool {
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

func hasNonASCII(s []byte) bool {
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
// encoding/json's to unescape. It returns the string's bytes, not a copy.
func (p *parser) plainString() ([]byte, bool) {
	if !p.next('"') {
		return nil, false
	}
	start := p.i
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		}
		p.i++
	}
	return nil, false
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
