package secrets

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// MinRedactBytes is the shortest value a Redactor replaces. Shorter values ("1",
// "true", "abc") would shred ordinary output while protecting nothing.
const MinRedactBytes = 4

// Redactor replaces every known secret value with [redacted:NAME] in strings and
// bytes. It is the one point every outward string passes: tool results, error texts,
// log lines, child stderr.
//
// Matching is exact bytes, for the value and its JSON-escaped forms (a secret inside a
// JSON string may appear escaped); other encodings (base64, URL escaping) are not
// guessed at, since each guess also matches innocent text. Where occurrences of
// different values overlap, the union of their bytes is replaced, labelled with the
// longest value's name, so no fragment of either leaks.
//
// A Redactor is safe for concurrent use. Values can be added at any time, for example
// when a child starts and its secrets are resolved; they are never removed, because
// output produced with an old value may still be in flight. Lookups read an immutable
// snapshot without locking, which keeps the hot path (every tool result) cheap.
type Redactor struct {
	mu   sync.Mutex // serializes Add
	snap atomic.Pointer[snapshot]
}

// snapshot is an immutable set of patterns, longest first.
type snapshot struct {
	pats      []pattern
	multiLine bool // some pattern contains a newline
}

type pattern struct {
	val   []byte
	sval  string
	label []byte // "[redacted:NAME]"
}

// NewRedactor returns a Redactor that knows no secrets.
func NewRedactor() *Redactor { return &Redactor{} }

// Add registers value under name. Values shorter than MinRedactBytes are ignored. A
// value already registered keeps its first name.
func (r *Redactor) Add(name, value string) {
	if len(value) < MinRedactBytes {
		return
	}
	forms := []string{value}
	// Go's encoding/json escapes <, > and & by default; most other encoders do not.
	for _, html := range []bool{true, false} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(html)
		if enc.Encode(value) == nil {
			s := strings.TrimSuffix(buf.String(), "\n")
			s = s[1 : len(s)-1] // drop the quotes
			if !slices.Contains(forms, s) {
				forms = append(forms, s)
			}
		}
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.snap.Load()
	var pats []pattern
	if old != nil {
		pats = slices.Clone(old.pats)
	}
	label := []byte("[redacted:" + name + "]")
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
	// Longest first: the label of an overlap is the longest value's, and a scan
	// that stops at the first hit finds long values no later than short ones.
	slices.SortStableFunc(pats, func(a, b pattern) int { return len(b.val) - len(a.val) })
	s := &snapshot{pats: pats}
	for _, p := range pats {
		s.multiLine = s.multiLine || bytes.IndexByte(p.val, '\n') >= 0
	}
	r.snap.Store(s)
}

// String returns s with every known value replaced. It returns s itself when nothing
// matched.
func (r *Redactor) String(s string) string {
	snap := r.snap.Load()
	if snap == nil || !snap.anyString(s) {
		return s
	}
	return string(snap.redact([]byte(s), spans(snap, []byte(s))))
}

// Bytes returns b with every known value replaced. It returns b itself, not a copy,
// when nothing matched, so the common case allocates nothing; when something matched
// it returns a new slice and leaves b untouched.
func (r *Redactor) Bytes(b []byte) []byte {
	snap := r.snap.Load()
	if snap == nil || !snap.any(b) {
		return b
	}
	return snap.redact(b, spans(snap, b))
}

// any reports whether b contains any pattern: one bytes.Index per value, which uses
// the CPU's vector instructions and is far cheaper than a byte-by-byte trie walk when,
// as usual, nothing matches.
func (s *snapshot) any(b []byte) bool {
	for _, p := range s.pats {
		if bytes.Contains(b, p.val) {
			return true
		}
	}
	return false
}

func (s *snapshot) anyString(str string) bool {
	for _, p := range s.pats {
		if strings.Contains(str, p.sval) {
			return true
		}
	}
	return false
}

// span is a merged run of bytes to replace, labelled by pattern index.
type span struct{ start, end, pat int }

// spans finds every occurrence of every pattern (overlapping ones included) and merges
// them into disjoint runs sorted by start.
func spans(s *snapshot, b []byte) []span {
	var all []span
	for i, p := range s.pats {
		for off := 0; ; {
			j := bytes.Index(b[off:], p.val)
			if j < 0 {
				break
			}
			all = append(all, span{off + j, off + j + len(p.val), i})
			off += j + 1
		}
	}
	if len(all) == 0 {
		return nil
	}
	slices.SortFunc(all, func(a, b span) int {
		if a.start != b.start {
			return a.start - b.start
		}
		return a.pat - b.pat
	})
	merged := all[:1]
	for _, sp := range all[1:] {
		last := &merged[len(merged)-1]
		if sp.start < last.end {
			last.end = max(last.end, sp.end)
			last.pat = min(last.pat, sp.pat) // lower index = longer value
			continue
		}
		merged = append(merged, sp)
	}
	return merged
}

// redact builds b with each span replaced by its label.
func (s *snapshot) redact(b []byte, sp []span) []byte {
	if len(sp) == 0 {
		return b
	}
	out := make([]byte, 0, len(b))
	prev := 0
	for _, x := range sp {
		out = append(out, b[prev:x.start]...)
		out = append(out, s.pats[x.pat].label...)
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
