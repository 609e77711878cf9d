package secrets

import (
	"bytes"
	"encoding/binary"
	"slices"
)

// snapshot is an immutable set of patterns, longest first, with an index that finds
// them in one pass.
//
// The index is a sampled 4-gram filter. Let m be the shortest pattern's length. Any
// occurrence of a pattern covers m bytes, and among any m-3 consecutive positions one
// is a multiple of stride = m-3; so reading the 4 bytes at every stride-th position of
// the input, and looking each up among the 4-grams that patterns have at offsets 0 to
// m-4, sees every occurrence exactly once. With realistic secrets (m of 16 or more)
// that is one lookup per dozen bytes, whatever the number of patterns; a bitset in
// front of the map keeps the lookups that find nothing to a load and a test.
type snapshot struct {
	pats      []pattern
	multiLine bool // some pattern contains a newline

	stride  int
	minLen  int
	bits    []uint64          // bit hash(g) set for every indexed 4-gram g
	grams   map[uint32][]gram // 4-gram -> where it sits in which patterns
	charset [256]bool         // bytes that occur in some pattern
}

type gram struct{ pat, off int32 }

const gramBits = 16 // bitset of 2^16 bits: 8 KiB per snapshot

func gramHash(g uint32) uint32 { return (g * 0x9E3779B1) >> (32 - gramBits) }

func newSnapshot(pats []pattern) *snapshot {
	// Longest first: the label of an overlap is the longest value's.
	slices.SortStableFunc(pats, func(a, b pattern) int { return len(b.val) - len(a.val) })
	s := &snapshot{pats: pats, bits: make([]uint64, 1<<gramBits/64), grams: map[uint32][]gram{}}
	s.minLen = len(pats[len(pats)-1].val)
	s.stride = s.minLen - 3
	for i, p := range pats {
		s.multiLine = s.multiLine || bytes.IndexByte(p.val, '\n') >= 0
		for _, c := range p.val {
			s.charset[c] = true
		}
		for off := 0; off <= s.minLen-4; off++ {
			g := binary.LittleEndian.Uint32(p.val[off:])
			h := gramHash(g)
			s.bits[h/64] |= 1 << (h % 64)
			s.grams[g] = append(s.grams[g], gram{int32(i), int32(off)})
		}
	}
	return s
}

// any reports whether b contains any pattern.
func (s *snapshot) any(b []byte) bool {
	if len(b) < s.minLen {
		return false
	}
	for q := 0; q+4 <= len(b); q += s.stride {
		g := binary.LittleEndian.Uint32(b[q:])
		if h := gramHash(g); s.bits[h/64]&(1<<(h%64)) == 0 {
			continue
		}
		for _, e := range s.grams[g] {
			if s.at(b, q-int(e.off), int(e.pat)) {
				return true
			}
		}
	}
	return false
}

// at reports whether pattern i occurs in b at start.
func (s *snapshot) at(b []byte, start, i int) bool {
	p := s.pats[i].val
	return start >= 0 && start+len(p) <= len(b) && bytes.Equal(b[start:start+len(p)], p)
}

// span is a merged run of bytes to replace, labelled by pattern index. quote is set
// where the run lies outside a JSON string, so its label must be quoted.
type span struct {
	start, end, pat int
	quote           bool
}

// spans finds every occurrence of every pattern (overlapping ones included) and merges
// them into disjoint runs sorted by start.
func (s *snapshot) spans(b []byte) []span {
	if len(b) < s.minLen {
		return nil
	}
	var all []span
	for q := 0; q+4 <= len(b); q += s.stride {
		g := binary.LittleEndian.Uint32(b[q:])
		if h := gramHash(g); s.bits[h/64]&(1<<(h%64)) == 0 {
			continue
		}
		for _, e := range s.grams[g] {
			if start := q - int(e.off); s.at(b, start, int(e.pat)) {
				all = append(all, span{start: start, end: start + len(s.pats[e.pat].val), pat: int(e.pat)})
			}
		}
	}
	return mergeSpans(all)
}

// mergeSpans sorts spans and merges overlapping ones: the union of their bytes, under
// the longest value's label.
func mergeSpans(all []span) []span {
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
			last.quote = last.quote || sp.quote
			continue
		}
		merged = append(merged, sp)
	}
	return merged
}
