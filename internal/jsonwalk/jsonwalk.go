// Package jsonwalk finds its way around JSON that was checked already, without
// decoding it again: the members of an object, and an object written back from
// its members. Nexus checks a message once, where it
// comes in (encoding/json decodes it, which validates it whole); after that, a
// tool's members or a request's _meta need only be found, and each function here
// gives what encoding/json would give for the same bytes, as fuzz tests check.
//
// The input must be valid JSON: the walks do not check it, and may panic on
// bytes that are not.
package jsonwalk

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"unicode/utf8"
)

// Object is what encoding/json writes for fields, members that are valid JSON,
// with HTML escaping off: keys sorted and escaped, values compacted, a nil
// value written null. It spares the reflective encoder and its validating
// compaction, which cost a gateway with many servers a few milliseconds of
// every start for tools it had already decoded.
func Object(fields map[string]json.RawMessage) json.RawMessage {
	keys := slices.Sorted(maps.Keys(fields))
	n := 2
	for _, k := range keys {
		n += len(k) + len(fields[k]) + 4
	}
	out := make([]byte, 1, n)
	out[0] = '{'
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		if plainKey(k) {
			out = append(out, '"')
			out = append(out, k...)
			out = append(out, '"')
		} else {
			out = append(out, Marshal(k)...)
		}
		out = append(out, ':')
		if v := fields[k]; v == nil {
			out = append(out, "null"...)
		} else {
			out = appendCompact(out, v)
		}
	}
	return append(out, '}')
}

// Members is what decoding obj, valid JSON, into a map[string]json.RawMessage
// gives: its members by key (the last of a repeated key wins), keys unescaped as
// encoding/json unescapes them. The values are obj's own bytes, as written. It
// fails only when obj is not an object.
func Members(obj []byte) (map[string]json.RawMessage, error) {
	i := skipSpace(obj, 0)
	if i == len(obj) || obj[i] != '{' {
		return nil, errors.New("not a JSON object")
	}
	fields := make(map[string]json.RawMessage, 8)
	for i++; ; {
		i = skipSpace(obj, i)
		if obj[i] == '}' {
			return fields, nil
		}
		if obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
		start := i
		i = skipString(obj, i)
		token := obj[start:i]
		var key string
		if PlainString(token) {
			key = string(token[1 : len(token)-1])
		} else if err := json.Unmarshal(token, &key); err != nil {
			return nil, err
		}
		i = skipSpace(obj, i)
		i = skipSpace(obj, i+1) // :
		start = i
		i = skipValue(obj, i)
		fields[key] = obj[start:i]
	}
}

// PlainString reports whether a JSON string token means its bytes between the
// quotes: no escape, valid UTF-8 (encoding/json replaces invalid bytes).
func PlainString(token []byte) bool {
	ascii := true
	for _, b := range token {
		switch {
		case b == '\\':
			return false
		case b >= utf8.RuneSelf:
			ascii = false
		}
	}
	return ascii || utf8.Valid(token)
}

// skipSpace is the index of the first byte at or after i that is not space
// between JSON tokens.
func skipSpace(v []byte, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r') {
		i++
	}
	return i
}

// skipString is the index just past the JSON string that starts at i.
func skipString(v []byte, i int) int {
	for i++; v[i] != '"'; i++ {
		if v[i] == '\\' {
			i++ // the escaped byte cannot end the string
		}
	}
	return i + 1
}

// skipValue is the index just past the valid JSON value that starts at i.
func skipValue(v []byte, i int) int {
	depth := 0
	for {
		switch v[i] {
		case '"':
			i = skipString(v, i)
		case '{', '[':
			depth++
			i++
		case '}', ']':
			depth--
			i++
		default:
			i++
		}
		if depth == 0 {
			if i == len(v) {
				return i
			}
			switch v[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
		}
	}
}

// plainKey reports whether encoding/json writes key as it is, between quotes:
// printable ASCII without a quote or a backslash.
func plainKey(key string) bool {
	for i := 0; i < len(key); i++ {
		if b := key[i]; b < 0x20 || b > 0x7e || b == '"' || b == '\\' {
			return false
		}
	}
	return true
}

// appendCompact appends valid JSON v to dst without the space between its
// tokens, as json.Compact does: strings are copied as they are.
func appendCompact(dst []byte, v []byte) []byte {
	start, in := 0, false
	for i := 0; i < len(v); i++ {
		switch b := v[i]; {
		case in:
			switch b {
			case '\\':
				i++ // the escaped byte cannot end the string
			case '"':
				in = false
			}
		case b == '"':
			in = true
		case b == ' ' || b == '\t' || b == '\n' || b == '\r':
			dst = append(dst, v[start:i]...)
			start = i + 1
		}
	}
	return append(dst, v[start:]...)
}

// Marshal is v as encoding/json writes it with HTML escaping off: how Object
// writes a key that needs escaping, and how Nexus writes the JSON it passes on
// (a child's "<" stays "<"). It returns nil for a value that does not encode.
func Marshal(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return nil
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
