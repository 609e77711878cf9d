package jsonrpc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
)

// ErrTooLarge is what LineReader.Next returns for a message over its limit.
var ErrTooLarge = errors.New("message too large")

// LineReader reads newline-delimited messages and refuses one over its limit
// without holding it in memory; the id of a refused message is read as it
// streams past, so that its refusal can carry it.
type LineReader struct {
	r     *bufio.Reader
	limit int64
}

// NewLineReader reads r with a bound of limit bytes on one message.
func NewLineReader(r io.Reader, limit int64) *LineReader {
	return &LineReader{r: bufio.NewReaderSize(r, 64<<10), limit: limit}
}

// Limit is the bound on one message.
func (l *LineReader) Limit() int64 { return l.limit }

// Buffered reports whether bytes of a next message were read already.
func (l *LineReader) Buffered() bool { return l.r.Buffered() > 0 }

// Next returns the next line, newline included. A line over the limit is
// skipped: Next returns ErrTooLarge with the line's id, if it had one. A last
// line without a newline is returned before io.EOF.
func (l *LineReader) Next() (line []byte, tooLargeID []byte, err error) {
	var buf []byte
	for {
		chunk, err := l.r.ReadSlice('\n')
		if int64(len(buf)+len(chunk)) > l.limit+1 {
			var sc IDScanner
			sc.Write(buf)
			sc.Write(chunk)
			for errors.Is(err, bufio.ErrBufferFull) {
				chunk, err = l.r.ReadSlice('\n')
				sc.Write(chunk)
			}
			return nil, sc.ID(), ErrTooLarge
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			buf = append(buf, chunk...)
			continue
		case err == io.EOF && len(buf)+len(chunk) > 0:
			return append(buf, chunk...), nil, nil
		case err != nil:
			return nil, nil, err
		}
		if buf == nil {
			// The common case, a line that fit in the buffer: one copy, since
			// the reader's buffer is reused by the next read.
			return append([]byte(nil), chunk...), nil, nil
		}
		return append(buf, chunk...), nil, nil
	}
}

// LineWriter writes whole messages, one per line, atomically: the messages of
// many requests share one stream.
//
// Messages that are ready together are written together. The first writer of
// a batch yields once before it writes (runtime.Gosched), and whoever is ready
// to run meanwhile (the other answers a child sent in one read, the other
// calls a client sent at once) adds its message to the batch and waits for
// it: one write system call, and one wake-up of the reader on the other end,
// for all of them. With no one else ready, the yield returns at once (tens of
// nanoseconds); under load, the first writer's message waits for the others
// ready before it to run until they write or wait.
type LineWriter struct {
	w io.Writer

	mu    sync.Mutex
	buf   []byte     // the batch being gathered
	spare []byte     // the last batch's buffer, reused
	batch *lineBatch // nil when none is being gathered
	err   error      // the first failed write's

	writeMu sync.Mutex // one batch is written at a time, in order
}

// lineBatch is the messages written in one system call, and how it went.
type lineBatch struct {
	done chan struct{} // made by the first writer to join; closed once written
	err  error
}

// NewLineWriter writes lines to w.
func NewLineWriter(w io.Writer) *LineWriter { return &LineWriter{w: w} }

// Write writes msg as one line, compacted first: pretty-printed JSON must still
// fit on one. It returns once the line is written. Once a write failed, every
// later one fails with the same error, and writes nothing.
func (lw *LineWriter) Write(msg []byte) error {
	msg = Compact(msg)
	lw.mu.Lock()
	if lw.err != nil {
		defer lw.mu.Unlock()
		return lw.err
	}
	// Copied into a buffer of our own: msg may be shared (with other
	// sessions) and must not be appended to.
	lw.buf = append(append(lw.buf, msg...), '\n')
	if b := lw.batch; b != nil {
		if b.done == nil {
			b.done = make(chan struct{})
		}
		lw.mu.Unlock()
		<-b.done
		return b.err
	}
	b := &lineBatch{}
	lw.batch = b
	lw.mu.Unlock()

	runtime.Gosched()
	lw.flush(b)
	return b.err
}

// flush writes batch b, gathered so far, once the batch before it is written,
// and tells its writers how it went: with a write that failed before it, b is
// not written and fails with that write's error. The writers are told, and
// the next batch may write, even when w panics.
func (lw *LineWriter) flush(b *lineBatch) {
	lw.writeMu.Lock()
	defer lw.writeMu.Unlock()
	lw.mu.Lock()
	out, failed := lw.buf, lw.err
	lw.buf, lw.spare, lw.batch = lw.spare[:0], nil, nil
	lw.mu.Unlock()
	defer func() {
		panicked := recover()
		lw.mu.Lock()
		if panicked != nil {
			b.err = fmt.Errorf("writing a message: the writer panicked: %v", panicked)
		}
		if b.err != nil && lw.err == nil {
			lw.err = b.err
		}
		if cap(out) <= 1<<20 && lw.spare == nil {
			lw.spare = out[:0] // keep no megabyte buffer around for one large batch
		}
		done := b.done
		lw.mu.Unlock()
		if done != nil {
			close(done)
		}
		if panicked != nil {
			panic(panicked) // the writers are told; the panic is the writer's to report
		}
	}()
	if failed != nil {
		b.err = failed
		return
	}
	if _, err := lw.w.Write(out); err != nil {
		b.err = fmt.Errorf("writing a message: %w", err)
	}
}
