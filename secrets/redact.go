package secrets

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// MinRedactBytes is the shortest value a Redactor replaces. Shorter values ("1",
// "true", "abc") would shred ordinary output while protecting nothing.
const MinRedactBytes = 4

// Redactor replaces every known secret value with [redacted:NAME]. It is the one point
// every outward message passes: tool results, error texts, notifications, served
// lists, log lines, child stderr.
//
// Each value is registered with the spellings it commonly takes on the way out: as is,
// JSON-escaped (with and without HTML escaping), Go-quoted (strconv.Quote and
// QuoteToASCII), each quoted form quoted once more (a log line that quotes a quoted
// text), URL-encoded (query and path escaping), and base64 of the whole value (standard and URL-safe alphabets, matched
// without padding so padded text matches too). [Redactor.String] and [Redactor.Bytes]
// match those spellings as exact bytes, which suits logs and other text.
// [Redactor.JSON] also decodes every JSON string, through up to [maxJSONDepth] levels
// of JSON text nested in strings, so no mix of \uXXXX escapes, \/ or surrogate pairs
// hides a value; see there for what stays out of reach.
//
// Where occurrences of different values overlap, the union of their bytes is replaced,
// labelled with the longest value's name, so no fragment of either leaks.
//
// A Redactor is safe for concurrent use. Values can be added at any time, for example
// when a child starts and its secrets are resolved; they are never removed, because
// output produced with an old value may still be in flight. Lookups read an immutable
// snapshot without locking, which keeps the hot path (every message) cheap.
type Redactor struct {
	mu   sync.Mutex // serializes Add
	snap atomic.Pointer[snapshot]
}

// pattern is one spelling of one value.
type pattern struct {
	val   []byte
	sval  string
	label []byte // "[redacted:NAME]"
}

// NewRedactor returns a Redactor that knows no secrets.
func NewRedactor() *Redactor { return &Redactor{} }

// Add registers value, with its common encodings, under name. Values shorter than
// MinRedactBytes are ignored. A spelling already registered keeps its first name.
func (r *Redactor) Add(name, value string) {
	if len(value) < MinRedactBytes {
		return
	}
	forms := spellings(value)

	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.snap.Load()
	var pats []pattern
	if old != nil {
		pats = slices.Clone(old.pats)
	}
	label := []byte("[redacted:" + labelName(name) + "]")
	added := false
	for _, f := range forms {
		if slices.ContainsFunc(pats, func(p pattern) bool { return p.sval == f }) {
			continue
		}
		pats = append(pats, pattern{val: []byte(f), sval: f, label: label})
		added = true
	}
	if !added {
		return
	}
	r.snap.Store(newSnapshot(pats))
}

// spellings lists value and the encodings it is registered under, each once. Only
// encodings of the whole value are listed: base64 of a value inside a longer encoded
// text starts at an offset that changes every character.
//
// Quoting is listed twice over because logs quote what was quoted already: slog's
// text handler Go-quotes an attribute that holds a %q-quoted line, and a child's
// JSON log line is Go-quoted again when the gateway logs it. So each quoted form
// (JSON with and without HTML escaping, Go's strconv.Quote and QuoteToASCII) is
// also registered quoted once more by each of them.
func spellings(value string) []string {
	out := []string{value}
	add := func(s string) {
		if len(s) >= MinRedactBytes && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	quoted := quotings(value)
	for _, q := range quoted {
		add(q)
	}
	for _, q := range quoted {
		if q == value {
			continue // quoting changed nothing: quoting it again changes nothing either
		}
		for _, qq := range quotings(q) {
			add(qq)
		}
	}
	add(url.QueryEscape(value))
	add(url.PathEscape(value))
	// Unpadded: the padded text contains it, and so does base64 cut short.
	add(base64.RawStdEncoding.EncodeToString([]byte(value)))
	add(base64.RawURLEncoding.EncodeToString([]byte(value)))
	return out
}

// quotings is value inside each kind of quotes a log or a message puts around it,
// without the quotes: JSON (Go's encoding/json escapes <, > and & by default; most
// other encoders do not) and Go (strconv.Quote, and QuoteToASCII for non-ASCII).
func quotings(value string) []string {
	var out []string
	for _, html := range []bool{true, false} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(html)
		if enc.Encode(value) == nil {
			s := strings.TrimSuffix(buf.String(), "\n")
			out = append(out, s[1:len(s)-1]) // drop the quotes
		}
	}
	for _, q := range []string{strconv.Quote(value), strconv.QuoteToASCII(value)} {
		out = append(out, q[1:len(q)-1])
	}
	return out
}

// labelName keeps a label safe inside a JSON string and on one log line: bytes that
// would need escaping become '_'.
func labelName(name string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r >= 0x7f || r == '"' || r == '\\' {
			return '_'
		}
		return r
	}, name)
}

// String returns s with every known spelling replaced. It returns s itself when
// nothing matched.
func (r *Redactor) String(s string) string {
	snap := r.snap.Load()
	// The bytes of s are only read, never kept.
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	if snap == nil || !snap.any(b) {
		return s
	}
	return string(snap.redact(b, snap.spans(b)))
}

// Bytes returns b with every known spelling replaced, matched as exact bytes: for
// text such as logs. For a JSON message use [Redactor.JSON], which also sees through
// escapes. It returns b itself, not a copy, when nothing matched, so the common case
// allocates nothing; when something matched it returns a new slice and leaves b
// untouched.
func (r *Redactor) Bytes(b []byte) []byte {
	snap := r.snap.Load()
	if snap == nil || !snap.any(b) {
		return b
	}
	return snap.redact(b, snap.spans(b))
}

// redact builds b with each span replaced by its label (quoted where the span was
// outside a JSON string).
func (s *snapshot) redact(b []byte, sp []span) []byte {
	if len(sp) == 0 {
		return b
	}
	out := make([]byte, 0, len(b))
	prev := 0
	for _, x := range sp {
		out = append(out, b[prev:x.start]...)
		if x.quote {
			out = append(out, '"')
		}
		out = append(out, s.pats[x.pat].label...)
		if x.quote {
			out = append(out, '"')
		}
		prev = x.end
	}
	return append(out, b[prev:]...)
}

// Redacting wraps store so that every value it reads or writes is also added to r
// under its name: a secret cannot be resolved for a child without being redacted from
// what the child sends back.
func Redacting(store Store, r *Redactor) Store { return redacting{store, r} }

type redacting struct {
	Store
	r *Redactor
}

func (s redacting) Get(ctx context.Context, name string) (string, error) {
	v, err := s.Store.Get(ctx, name)
	if err == nil {
		s.r.Add(name, v)
	}
	return v, err
}

func (s redacting) Set(ctx context.Context, name, value string) error {
	err := s.Store.Set(ctx, name, value)
	if err == nil {
		s.r.Add(name, value)
	}
	return err
}
