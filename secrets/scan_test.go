package secrets

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestScanFindsEveryOccurrence compares the sampled 4-gram scan with a plain search,
// over patterns of mixed lengths (the shortest sets the stride) placed at every offset.
func TestScanFindsEveryOccurrence(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "abcxyz"[rng.IntN(6)] // a small alphabet: many near misses
		}
		return string(b)
	}
	for _, lens := range [][]int{{4}, {5, 9}, {8, 40}, {20, 21, 64}} {
		t.Run(fmt.Sprint(lens), func(t *testing.T) {
			var pats []pattern
			for i, n := range lens {
				v := word(n)
				pats = append(pats, pattern{val: []byte(v), sval: v, label: []byte(fmt.Sprint(i))})
			}
			s := newSnapshot(pats)
			for range 200 {
				in := []byte(word(rng.IntN(300)))
				for range rng.IntN(3) {
					p := s.pats[rng.IntN(len(s.pats))].val
					at := rng.IntN(len(in) + 1)
					in = append(in[:at:at], append(append([]byte{}, p...), in[at:]...)...)
				}
				var want []span
				for i, p := range s.pats {
					for off := 0; ; {
						j := bytes.Index(in[off:], p.val)
						if j < 0 {
							break
						}
						want = append(want, span{start: off + j, end: off + j + len(p.val), pat: i})
						off += j + 1
					}
				}
				want = mergeSpans(want)
				got := s.spans(in)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("in %q: spans %v, want %v", in, got, want)
				}
				if s.any(in) != (len(want) > 0) {
					t.Fatalf("in %q: any = %v", in, !(len(want) > 0))
				}
			}
		})
	}
}

func TestRedactorEncodings(t *testing.T) {
	r := NewRedactor()
	r.Add("k", "tok+en/with spaces?&=")
	for _, in := range []string{
		"tok+en/with spaces?&=",
		"tok%2Ben%2Fwith+spaces%3F%26%3D",     // url.QueryEscape
		"tok+en%2Fwith%20spaces%3F&=",         // url.PathEscape
		"dG9rK2VuL3dpdGggc3BhY2VzPyY9",        // base64, unpadded
		"dG9rK2VuL3dpdGggc3BhY2VzPyY9\n",      // in a log line
		"tok+en/with spaces?\\u0026=",         // JSON-escaped by encoding/json
		`"tok+en/with spaces?\u0026="` + "\n", // in a quoted log value
	} {
		if got := r.String(in); bytes.Contains([]byte(got), []byte("spaces")) || bytes.Contains([]byte(got), []byte("c3BhY2Vz")) {
			t.Errorf("String(%q) = %q", in, got)
		}
	}
	if got := r.String("dG9rK2VuL3dpdGggc3BhY2VzPyY9=="); got != "[redacted:k]==" {
		t.Errorf("padded base64: %q", got)
	}
	r.Add("odd\"name\\\n", "value-with-odd-name")
	if got := r.JSON([]byte(`["value-with-odd-name"]`)); string(got) != `["[redacted:odd_name__]"]` {
		t.Errorf("a label must stay valid JSON: %s", got)
	}
}
