package pins

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"unicode/utf8"
)

// canonicalValid re-encodes raw, one valid JSON value (one encoding/json has
// already decoded from a checked text), the way decoding it into an any
// (numbers kept as spelt) and encoding that without HTML escaping does: object
// keys sorted and unique (the last of a repeated key wins), no insignificant
// space, strings escaped as encoding/json escapes them. It walks the bytes
// instead of building maps: a gateway checks every pinned and every listed
// definition as it starts, and the reflective round trip cost it tens of
// milliseconds for a few hundred tools. Strings that need any unescaping or
// escaping go through encoding/json itself, so the result is the same byte for
// byte. raw is not validated again: given anything but valid JSON, the walk
// may panic.
func canonicalValid(raw []byte) ([]byte, error) {
	c := canonicalizer{in: raw}
	return c.value(make([]byte, 0, len(raw)))
}

// canonicalizer reads one valid JSON text from in.
type canonicalizer struct {
	in  []byte
	pos int
}

func (c *canonicalizer) space() {
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

// value appends the canonical form of the value at pos to dst.
func (c *canonicalizer) value(dst []byte) ([]byte, error) {
	c.space()
	switch c.in[c.pos] {
	case '{':
		return c.object(dst)
	case '[':
		return c.array(dst)
	case '"':
		token, plain := c.token()
		if plain {
			return append(dst, token...), nil
		}
		s, err := unquote(token)
		if err != nil {
			return nil, err
		}
		return appendQuoted(dst, s)
	default: // a number or a literal, kept as written
		start := c.pos
		for c.pos < len(c.in) && !strings.ContainsRune(" \t\n\r,]}", rune(c.in[c.pos])) {
			c.pos++
		}
		return append(dst, c.in[start:c.pos]...), nil
	}
}

// member is one member of an object being written: its key and where
// `"key":value` lies in the output.
type member struct {
	key        []byte // its value: the token's bytes when plain
	start, end int
}

// object appends the object at pos, its members in key order, each key once
// (the last of a repeated key wins, as decoding into a map does). Members are
// written as they come and moved only when the keys were not in order already.
func (c *canonicalizer) object(dst []byte) ([]byte, error) {
	c.pos++ // {
	base := len(dst)
	dst = append(dst, '{')
	var stack [16]member
	members := stack[:0]
	inOrder := true
	for {
		c.space()
		if c.in[c.pos] == '}' {
			c.pos++
			break
		}
		if c.in[c.pos] == ',' {
			c.pos++
			c.space()
			dst = append(dst, ',')
		}
		token, plain := c.token()
		key := token[1 : len(token)-1]
		start := len(dst)
		if plain {
			dst = append(dst, token...)
		} else {
			s, err := unquote(token)
			if err != nil {
				return nil, err
			}
			if dst, err = appendQuoted(dst, s); err != nil {
				return nil, err
			}
			key = []byte(s)
		}
		c.space()
		c.pos++ // :
		dst = append(dst, ':')
		var err error
		if dst, err = c.value(dst); err != nil {
			return nil, err
		}
		if n := len(members); n > 0 && bytes.Compare(members[n-1].key, key) >= 0 {
			inOrder = false
		}
		members = append(members, member{key, start, len(dst)})
	}
	if !inOrder {
		written := slices.Clone(dst[base:])
		// Sorted stably, so that of a repeated key the last is last.
		slices.SortStableFunc(members, func(a, b member) int { return bytes.Compare(a.key, b.key) })
		dst = append(dst[:base], '{')
		first := true
		for i, m := range members {
			if i+1 < len(members) && bytes.Equal(members[i+1].key, m.key) {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(dst, written[m.start-base:m.end-base]...)
		}
	}
	return append(dst, '}'), nil
}

// topMembers splits a canonical object into its members' canonical texts.
func topMembers(canon []byte) (map[string][]byte, error) {
	if len(canon) < 2 || canon[0] != '{' {
		return nil, errors.New("not a JSON object")
	}
	top := canonicalizer{in: canon, pos: 1}
	fields := make(map[string][]byte, len(definitionFields)+2)
	for top.in[top.pos] != '}' {
		if top.in[top.pos] == ',' {
			top.pos++
		}
		token, plain := top.token()
		key := string(token[1 : len(token)-1])
		if !plain {
			var err error
			if key, err = unquote(token); err != nil {
				return nil, err
			}
		}
		top.pos++ // :
		start := top.pos
		top.skip()
		fields[key] = canon[start:top.pos]
	}
	return fields, nil
}

// skip moves pos past the value at pos in canonical JSON (no space between
// tokens), which a member, or an element, ends with ',', '}' or ']'. It only
// finds where the value ends: canonical text needs no second canonicalizing.
func (c *canonicalizer) skip() {
	depth := 0
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case '"':
			c.pos++
			for c.in[c.pos] != '"' {
				if c.in[c.pos] == '\\' {
					c.pos++ // the escaped byte cannot end the string
				}
				c.pos++
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
		c.pos++
		if depth == 0 && (c.pos == len(c.in) || c.in[c.pos] == ',' || c.in[c.pos] == '}' || c.in[c.pos] == ']') {
			return
		}
	}
}

func (c *canonicalizer) array(dst []byte) ([]byte, error) {
	c.pos++ // [
	dst = append(dst, '[')
	for {
		c.space()
		switch c.in[c.pos] {
		case ']':
			c.pos++
			return append(dst, ']'), nil
		case ',':
			c.pos++
			dst = append(dst, ',')
			continue
		}
		var err error
		if dst, err = c.value(dst); err != nil {
			return nil, err
		}
	}
}

// token reads the string at pos and returns it as written, and whether that is
// also how encoding/json would write its value: no escape, valid UTF-8, no
// U+2028 or U+2029.
func (c *canonicalizer) token() (token []byte, plain bool) {
	start := c.pos
	c.pos++ // "
	plain = true
	ascii := true
	for b := c.in[c.pos]; b != '"'; b = c.in[c.pos] {
		switch {
		case b == '\\':
			plain = false
			c.pos++ // the escaped byte cannot end the string
		case b >= utf8.RuneSelf:
			ascii = false
		}
		c.pos++
	}
	c.pos++
	token = c.in[start:c.pos]
	if plain && !ascii {
		plain = utf8.Valid(token) && !bytes.Contains(token, []byte("\u2028")) && !bytes.Contains(token, []byte("\u2029"))
	}
	return token, plain
}

// unquote is the value of a JSON string as encoding/json decodes it.
func unquote(token []byte) (string, error) {
	var s string
	if err := json.Unmarshal(token, &s); err != nil {
		return "", err
	}
	return s, nil
}

// appendQuoted appends s as encoding/json writes it without HTML escaping
// (encoding/json's appendString with escapeHTML false, which FuzzCanonical
// holds it to).
func appendQuoted(dst []byte, s string) ([]byte, error) {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), nil
}
