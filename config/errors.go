package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Error is a configuration mistake: where it is and what to write instead.
type Error struct {
	File string // the layer that holds the mistake
	// Line and Col locate the key (or the syntax error) in File, 1-based; 0 when
	// unknown.
	Line, Col int
	Key       string // dotted path of the key, e.g. "servers.github.command"
	// Msg says what is wrong and what to write instead.
	Msg string
	// Err is the underlying error, if any (a JSON syntax error, a failed read),
	// for errors.Is and errors.As; Msg already says it in words.
	Err error
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Error reads like a compiler's: FILE:LINE:COL: KEY: MESSAGE, so editors and
// terminals can jump to the spot.
func (e *Error) Error() string {
	where := e.File
	if e.Line > 0 {
		where = fmt.Sprintf("%s:%d:%d", e.File, e.Line, e.Col)
	}
	if e.Key == "" {
		return where + ": " + e.Msg
	}
	return where + ": " + e.Key + ": " + e.Msg
}

// Problems lists every configuration mistake err holds, in the order found: Load,
// LoadLayers and Parse report all of a config's mistakes at once, joined.
func Problems(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, Problems(e)...)
		}
		return out
	}
	return []error{err}
}

// problems collects mistakes, each once, so that a config with five mistakes is
// fixed in one round rather than five.
type problems struct {
	errs []error
	seen map[string]bool
}

func (p *problems) add(err error) {
	for _, e := range Problems(err) {
		if p.seen == nil {
			p.seen = map[string]bool{}
		}
		if p.seen[e.Error()] {
			continue
		}
		p.seen[e.Error()] = true
		p.errs = append(p.errs, e)
	}
}

func (p *problems) err() error { return errors.Join(p.errs...) }

// syntaxError turns a JSON decoding error of data into an Error at its line and
// column, with the likely cause in words: encoding/json reports the character it
// choked on ("invalid character '}' looking for beginning of object key string"),
// which for a trailing comma points one step past the real mistake.
func syntaxError(file string, data []byte, err error) *Error {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			line, col := lineCol(data, int64(len(data)))
			return &Error{File: file, Line: line, Col: col, Msg: "the JSON ends too early: a '}' or ']' is missing"}
		}
		return &Error{File: file, Msg: "not valid JSON: " + strings.TrimPrefix(err.Error(), "json: ")}
	}
	off := min(max(se.Offset-1, 0), int64(len(data)))
	line, col := lineCol(data, off)
	msg := "not valid JSON: " + se.Error()
	if cause, at := syntaxCause(data, off); cause != "" {
		line, col = lineCol(data, at)
		msg = cause
	}
	return &Error{File: file, Line: line, Col: col, Msg: msg}
}

// syntaxCause names the usual hand-editing mistakes at off, the offset of the
// character the decoder refused, and where that mistake starts.
func syntaxCause(data []byte, off int64) (cause string, at int64) {
	if off >= int64(len(data)) {
		return "the JSON ends too early: a '}' or ']' is missing", int64(len(data))
	}
	c := data[off]
	prev := bytes.TrimRight(data[:off], " \t\r\n")
	switch {
	case (c == '}' || c == ']') && bytes.HasSuffix(prev, []byte(",")):
		return fmt.Sprintf("trailing comma before '%c': JSON allows no comma after the last entry; remove it", c), int64(len(prev) - 1)
	case c == '/' && off+1 < int64(len(data)) && (data[off+1] == '/' || data[off+1] == '*'):
		return "comments are not allowed in JSON; remove it", off
	case c == '\'':
		return `strings and keys take double quotes ("), not single ones`, off
	case c == '"' && len(prev) > 0 && (prev[len(prev)-1] == '"' || prev[len(prev)-1] == '}' || prev[len(prev)-1] == ']' || isDigit(prev[len(prev)-1])):
		return "a comma is missing before this entry", off
	case c == '{' && len(prev) > 0 && prev[len(prev)-1] == '}':
		return "a comma is missing before this entry", off
	case isLetter(c) && len(prev) > 0 && (prev[len(prev)-1] == '{' || prev[len(prev)-1] == ','):
		return "keys take double quotes: write \"key\": value", off
	}
	return "", 0
}

func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }

// lineCol is the 1-based line and column of byte offset off in data.
func lineCol(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = 1 + bytes.Count(before, []byte("\n"))
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// position is the line and column of the key at path in the JSON object data, or
// 0, 0 when it is not there (a key added by a merge, say).
func position(data []byte, path ...string) (line, col int) {
	if len(path) == 0 || len(data) == 0 {
		return 0, 0
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	off, ok := keyOffset(dec, data, path)
	if !ok {
		return 0, 0
	}
	return lineCol(data, off)
}

// keyOffset walks the object dec is at down path and returns the offset of the
// last key's opening quote.
func keyOffset(dec *json.Decoder, data []byte, path []string) (int64, bool) {
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0, false
	}
	for dec.More() {
		start := skipSeparators(data, dec.InputOffset())
		t, err := dec.Token()
		if err != nil {
			return 0, false
		}
		if key, _ := t.(string); key == path[0] {
			if len(path) == 1 {
				return start, true
			}
			return keyOffset(dec, data, path[1:])
		}
		if !skipValue(dec) {
			return 0, false
		}
	}
	return 0, false
}

func skipSeparators(data []byte, off int64) int64 {
	for off < int64(len(data)) && strings.IndexByte(" \t\r\n,:", data[off]) >= 0 {
		off++
	}
	return off
}

// skipValue reads one whole value, however deeply nested.
func skipValue(dec *json.Decoder) bool {
	depth := 0
	for {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return true
		}
	}
}
