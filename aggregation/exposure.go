package aggregation

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// redactText removes secret values from text a person reads: a child's stderr,
// its stray stdout lines, its errors (Options.RedactText).
func (g *Gateway) redactText(s string) string { return g.text(s) }

// checkText refuses arguments whose strings are not valid Unicode text: raw bytes
// that are not UTF-8, or a \u escape of a lone surrogate (which decodes to no
// character). encoding/json lets both through, and a strict child may crash on
// them, failing every other call in flight on it. The error names the field as a
// JSON path (arguments.items[2].name). args is one JSON value, already checked to
// be valid JSON.
func checkText(args []byte) error {
	if utf8.Valid(args) && !hasSurrogateEscape(args) {
		return nil // the common case: one pass, no walk
	}
	w := textWalker{b: args}
	w.value("arguments")
	if w.bad != "" {
		return fmt.Errorf("%s: %s; arguments must be valid UTF-8 text", w.bad, w.why)
	}
	return nil
}

// hasSurrogateEscape reports whether b may hold a \uD800-\uDFFF escape.
func hasSurrogateEscape(b []byte) bool {
	for i := 0; ; i++ {
		j := bytes.Index(b[i:], []byte(`\u`))
		if j < 0 {
			return false
		}
		i += j
		if i+3 < len(b) && (b[i+2] == 'd' || b[i+2] == 'D') && strings.IndexByte("89abcdefABCDEF", b[i+3]) >= 0 {
			return true
		}
	}
}

// textWalker finds the first string of a JSON value that is not valid text, and
// its path.
type textWalker struct {
	b        []byte
	i        int
	bad, why string
}

func (w *textWalker) space() {
	for w.i < len(w.b) && strings.IndexByte(" \t\r\n", w.b[w.i]) >= 0 {
		w.i++
	}
}

// value walks the value at w.i, named path.
func (w *textWalker) value(path string) {
	w.space()
	if w.i >= len(w.b) || w.bad != "" {
		return
	}
	switch w.b[w.i] {
	case '{':
		w.i++
		for w.bad == "" {
			w.space()
			if w.i >= len(w.b) || w.b[w.i] == '}' {
				w.i++
				return
			}
			if w.b[w.i] == ',' {
				w.i++
				continue
			}
			if w.b[w.i] != '"' {
				w.i = len(w.b) // not JSON: json.Valid is the caller's check, not ours
				return
			}
			key, why := w.str()
			if why != "" {
				w.bad, w.why = path+" (a key)", why
				return
			}
			w.space()
			w.i++ // ':'
			w.value(childPath(path, key))
		}
	case '[':
		w.i++
		for n := 0; w.bad == ""; {
			w.space()
			if w.i >= len(w.b) || w.b[w.i] == ']' {
				w.i++
				return
			}
			if w.b[w.i] == ',' {
				w.i++
				n++
				continue
			}
			w.value(fmt.Sprintf("%s[%d]", path, n))
		}
	case '"':
		if _, why := w.str(); why != "" {
			w.bad, w.why = path, why
		}
	default: // a number or a literal
		start := w.i
		for w.i < len(w.b) && strings.IndexByte(",]} \t\r\n", w.b[w.i]) < 0 {
			w.i++
		}
		if w.i == start {
			w.i++ // not JSON; always move on
		}
	}
}

// str reads the string at w.i and returns its decoded text (for a path), or why
// it is not valid text.
func (w *textWalker) str() (string, string) {
	w.i++ // the opening quote
	var text []byte
	for w.i < len(w.b) {
		c := w.b[w.i]
		switch {
		case c == '"':
			w.i++
			return string(text), ""
		case c == '\\' && w.i+1 < len(w.b) && w.b[w.i+1] == 'u':
			r, _ := hex4rune(w.b[w.i+2:])
			if utf16.IsSurrogate(r) {
				r2, ok := rune(0), false
				if w.i+7 < len(w.b) && w.b[w.i+6] == '\\' && w.b[w.i+7] == 'u' {
					r2, ok = hex4rune(w.b[w.i+8:])
				}
				dec := utf16.DecodeRune(r, r2)
				if !ok || dec == utf8.RuneError {
					return "", fmt.Sprintf("a lone surrogate escape (\\u%04X)", r)
				}
				text = utf8.AppendRune(text, dec)
				w.i += 12
				continue
			}
			text = utf8.AppendRune(text, r)
			w.i += 6
		case c == '\\' && w.i+1 < len(w.b):
			text = append(text, w.b[w.i+1])
			w.i += 2
		default:
			r, n := utf8.DecodeRune(w.b[w.i:])
			if r == utf8.RuneError && n <= 1 {
				return "", fmt.Sprintf("invalid UTF-8 (byte 0x%02X at offset %d of the arguments)", c, w.i)
			}
			text = append(text, w.b[w.i:w.i+n]...)
			w.i += n
		}
	}
	return string(text), ""
}

// childPath is path.key, or path["key"] when key is not a plain name.
func childPath(path, key string) string {
	plain := key != ""
	for _, r := range key {
		plain = plain && (r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r))
	}
	if plain && len(key) <= 64 {
		return path + "." + key
	}
	return path + "[" + quoted(key) + "]"
}

// hex4rune decodes four hex digits at the start of b.
func hex4rune(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 32)
	return rune(n), err == nil
}

// unsafeNameError is a child's tool whose name no client or policy could name
// safely. It keeps the whole name so that the log can redact it before it is cut
// (describe): a secret straddling the cut would otherwise be logged but for its end.
type unsafeNameError struct{ name, server string }

func (e *unsafeNameError) Error() string { return e.describe(func(s string) string { return s }) }

func (e *unsafeNameError) describe(redact func(string) string) string {
	return fmt.Sprintf("tool %s of server %s is refused: its name has control characters, is not UTF-8, has surrounding spaces or a \"*\", so no client or policy could name it safely", quoted(redact(e.name)), e.server)
}

// skipReason is why a child's tool is skipped, as the log says it: redacted
// before any name in it is cut.
func (c *child) skipReason(err error) string {
	var unsafe *unsafeNameError
	if errors.As(err, &unsafe) {
		return unsafe.describe(c.events.redactText)
	}
	return err.Error()
}
