package secrets

import (
	"bytes"
	"io"
	"sync"
)

// maxPending bounds how much of a line without a newline a Writer holds back.
const maxPending = 64 << 10

// Writer redacts what is written through it: see Redactor.Writer.
type Writer struct {
	r *Redactor
	w io.Writer

	mu  sync.Mutex
	buf []byte // written but not yet passed on
}

// Writer wraps a log destination (stderr, a log file, a child's stderr copied out)
// so that each Write is redacted before it reaches w.
//
// A secret split across two Writes must not leak, so the Writer holds back the last
// incomplete line and passes on whole lines: a value without a newline cannot span a
// line end, so every occurrence is complete when its line is. For values that contain
// newlines (PEM keys), it also holds back any tail of complete lines that could be the
// start of such a value. A line longer than 64 KiB is passed on in pieces, holding back
// only a tail that could be the start of a value, so no value is cut in two. Flush and Close pass on everything held back; a process that
// exits without calling them loses at most its last, unterminated line, which slog and
// most loggers never leave. Writer is safe for concurrent use; Close does not close w.
func (r *Redactor) Writer(w io.Writer) *Writer { return &Writer{r: r, w: w} }

// Write redacts and passes on every complete line in p and holds back the rest. It
// reports len(p) unless w fails.
func (x *Writer) Write(p []byte) (int, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.buf = append(x.buf, p...)
	if err := x.flush(false); err != nil {
		return len(p), err
	}
	return len(p), nil
}

// Flush passes on everything held back, including a partial line.
func (x *Writer) Flush() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.flush(true)
}

// Close flushes. It does not close the underlying writer, which is usually stderr.
func (x *Writer) Close() error { return x.Flush() }

func (x *Writer) flush(force bool) error {
	n := len(x.buf)
	if n == 0 {
		return nil
	}
	snap := x.r.snap.Load()
	cut := n
	var sp []span
	if snap != nil {
		if !force {
			cut = bytes.LastIndexByte(x.buf, '\n') + 1
			if snap.multiLine {
				cut = min(cut, snap.partial(x.buf, true))
			}
			if n-cut > maxPending {
				cut = max(cut, snap.partial(x.buf, false))
			}
		}
		if cut == 0 {
			return nil
		}
		if snap.any(x.buf) {
			sp = snap.spans(x.buf)
			// Never cut through an occurrence: keep all of it for the next round.
			for i, s := range sp {
				if s.start < cut && cut < s.end {
					cut = s.start
				}
				if s.start >= cut {
					sp = sp[:i]
					break
				}
			}
		}
		if cut == 0 {
			return nil
		}
	}
	out := x.buf[:cut]
	if snap != nil {
		out = snap.redact(out, sp)
	}
	_, err := x.w.Write(out)
	// Drop what was passed on even if w failed: retrying would duplicate output.
	x.buf = x.buf[:copy(x.buf, x.buf[cut:])]
	return err
}

// partial returns where the longest tail of b that could be the start of a value
// begins (len(b) when none could): those bytes must wait for the next Write. With
// multiLine, only values containing a newline are considered, since no other value
// can run across the line end the Writer cuts at.
func (s *snapshot) partial(b []byte, multiLine bool) int {
	n := len(b)
	from := n
	for _, p := range s.pats {
		if multiLine && bytes.IndexByte(p.val, '\n') < 0 {
			continue
		}
		for i := max(0, n-len(p.val)+1); i < from; i++ {
			if b[i] == p.val[0] && bytes.HasPrefix(p.val, b[i:]) {
				from = i
				break
			}
		}
	}
	return from
}
