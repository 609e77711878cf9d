package aggregation

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/nexus-mcp/nexus/memory"
)

// ServeStdio serves one client over newline-delimited JSON-RPC on in and out until in
// ends or ctx is done. agent, when not empty, is the client's identity (--agent,
// NEXUS_AGENT); otherwise initialize decides it from the client's name, else
// anonymous. Nothing but MCP messages is ever written to out.
func (g *Gateway) ServeStdio(ctx context.Context, in io.Reader, out io.Writer, agent string) error {
	w := &lineWriter{w: out}
	s := g.newSession(frontStdio, agent, w)
	g.sessions.add(s)
	defer s.close()
	stop := context.AfterFunc(ctx, s.close)
	defer stop()
	r := &stdioReader{g: g, s: s, w: w, eof: make(chan struct{}),
		lr: &lineReader{r: bufio.NewReaderSize(in, 64*1024), limit: g.cfg.Load().MessageLimit()}}
	r.wg.Add(1)
	go r.loop(s.ctx)
	select {
	case <-r.eof:
		r.wg.Wait() // the calls still running answer before the session ends
	case <-ctx.Done():
		// The reader may be blocked reading in, which nothing but the end of in or
		// of the process interrupts; the calls end with the session.
	}
	return nil
}

// stdioReader reads one stdio client's messages. Whichever goroutine reads a request
// also runs it: a request answered without waiting (a memory hit, a list, a refusal)
// costs no hand-off to another goroutine. A request about to wait on a child, or on
// anything slow, first hands the reading on to a new goroutine (baton.yield), so the
// client's next messages (a cancellation, its answer to a sampling request, other
// calls) are read meanwhile. Only a request holding one of the session's slots
// yields, so the goroutines of one client are bounded by limits.maxCallsPerSession;
// a request past it is refused at once and reading never waits (the client's answer
// to a sampling request must always get through).
type stdioReader struct {
	g       *Gateway
	s       *session
	w       *lineWriter
	lr      *lineReader // used by one goroutine at a time: the one holding the baton
	wg      sync.WaitGroup
	eof     chan struct{}
	eofOnce sync.Once
}

func (r *stdioReader) loop(ctx context.Context) {
	defer r.wg.Done()
	for {
		line, id, err := r.lr.next()
		if errors.Is(err, errTooLarge) {
			r.g.log.Warn("refused an over-size message", "limit", r.lr.limit)
			r.w.reply(r.s.outward(tooLarge(id, r.lr.limit)))
			continue
		}
		if err != nil {
			r.eofOnce.Do(func() { close(r.eof) })
			return
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		b := &baton{r: r, ctx: ctx}
		bctx := b.context()
		if line[0] == '[' {
			r.g.serveBatch(bctx, r.s, line, r.w)
		} else if m, reply := decode(line); reply != nil {
			r.w.reply(r.s.outward(reply))
		} else {
			r.s.handle(bctx, m, r.w)
		}
		if b.yielded.Load() {
			return // another goroutine reads now
		}
	}
}

// baton is the reading duty of one stdio client, held by the goroutine running the
// request it read.
type baton struct {
	r       *stdioReader
	ctx     context.Context
	once    sync.Once
	yielded atomic.Bool
}

type batonKey struct{}

func (b *baton) context() context.Context {
	return memory.WithBeforeBlocking(context.WithValue(b.ctx, batonKey{}, b), b.yield)
}

// yield hands the reading on to a new goroutine, once: the caller is about to wait.
func (b *baton) yield() {
	b.once.Do(func() {
		b.yielded.Store(true)
		b.r.wg.Add(1)
		go b.r.loop(b.ctx)
	})
}

// yieldReader is called before anything that may wait long (a child's answer, a
// server still starting): on the stdio front it hands the reading on.
func yieldReader(ctx context.Context) {
	if b, ok := ctx.Value(batonKey{}).(*baton); ok {
		b.yield()
	}
}

// decode parses one message, or returns the error response it gets.
func decode(b []byte) (*message, []byte) {
	var m message
	if err := json.Unmarshal(b, &m); err != nil {
		var probe struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(b, &probe)
		if len(probe.ID) == 0 || !validID(probe.ID) {
			probe.ID = nil
		}
		return nil, errorBytes(probe.ID, codeParseError, "malformed JSON-RPC message: %v", err)
	}
	if why := m.invalid(); why != "" {
		id := m.ID
		if len(id) > 0 && !validID(id) {
			id = nil
		}
		return nil, errorBytes(id, codeInvalidRequest, "invalid request: %s", why)
	}
	return &m, nil
}

func tooLarge(id json.RawMessage, limit int64) []byte {
	return errorBytes(id, codeInvalidRequest, "message larger than %d bytes refused; raise maxMessageBytes in the config if it is legitimate", limit)
}

// serveBatch runs a JSON-RPC batch through the same path as single messages and
// answers with one array of the responses, in the order of the requests. A batch is
// bounded three ways (limits): its length, the requests it runs at once (workers
// holding the session's slots, never a goroutine per item), and the bytes of its
// answers together.
func (g *Gateway) serveBatch(ctx context.Context, s *session, line []byte, to sink) {
	lim := g.cfg.Load().Limits
	items, n, err := splitBatch(line, lim.BatchMessages())
	switch {
	case err != nil:
		to.reply(s.outward(errorBytes(nil, codeParseError, "malformed JSON-RPC batch: %v", err)))
		return
	case n == 0:
		to.reply(s.outward(errorBytes(nil, codeInvalidRequest, "empty batch")))
		return
	case n > len(items):
		g.log.Warn("refused an over-long batch", "messages", n, "limit", len(items))
		to.reply(s.outward(errorBytes(nil, codeInvalidRequest,
			"batch of %d messages: at most %d; send smaller batches (limits.maxBatchMessages)", n, len(items))))
		return
	}
	b := &batch{s: s, to: to, limit: lim.BatchAnswerBytes(), replies: make([][]byte, len(items))}
	for i, it := range items {
		m, reply := decode(it)
		switch {
		case reply != nil:
			b.replies[i] = s.outward(reply)
		case m.isRequest():
			b.jobs = append(b.jobs, job{i, m})
		default:
			s.handle(ctx, m, to)
		}
	}
	b.run(ctx)
	var out [][]byte
	for _, r := range b.replies {
		if r != nil {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		to.reply(nil) // only notifications and responses: nothing to answer
		return
	}
	to.reply(append(append([]byte{'['}, bytes.Join(out, []byte{','})...), ']'))
}

// splitBatch returns the first most messages of a batch and how many it holds. The
// rest are counted, not kept: the count is all a refusal needs.
func splitBatch(line []byte, most int) ([]json.RawMessage, int, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, 0, errors.New("a batch is a JSON array")
	}
	var items []json.RawMessage
	var skipped json.RawMessage // reused: counting keeps nothing
	n := 0
	for dec.More() {
		dst := &skipped
		if n < most {
			items = append(items, nil)
			dst = &items[n]
		}
		if err := dec.Decode(dst); err != nil {
			return nil, 0, err
		}
		n++
	}
	if _, err := dec.Token(); err != nil {
		return nil, 0, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, 0, errors.New("trailing data after the batch")
	}
	return items, n, nil
}

// batch is one batch's requests being run, and their answers.
type batch struct {
	s    *session
	to   sink
	jobs []job
	next atomic.Int64 // index of the next job a worker takes

	limit int64 // bytes of all answers together (limits.maxBatchAnswerBytes)

	mu      sync.Mutex
	used    int64 // bytes of the answers kept so far
	replies [][]byte
}

type job struct {
	i int // position in the batch
	m *message
}

// run answers the batch's requests with as many workers as the session has free
// slots (at most one per request). With none free, each request gets the session's
// busy error.
func (b *batch) run(ctx context.Context) {
	if len(b.jobs) == 0 {
		return
	}
	workers := 0
	for workers < len(b.jobs) && b.s.acquire() {
		workers++
	}
	if workers == 0 {
		for _, j := range b.jobs {
			b.replies[j.i] = b.s.outward(b.s.busy(j.m.ID))
		}
		return
	}
	yieldReader(ctx) // the batch waits for its requests
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(func() { b.work(ctx) })
	}
	b.work(ctx)
	wg.Wait()
}

// work runs jobs until none is left, then gives its slot back.
func (b *batch) work(ctx context.Context) {
	defer b.s.release()
	for {
		k := int(b.next.Add(1)) - 1
		if k >= len(b.jobs) {
			return
		}
		j := b.jobs[k]
		b.s.respond(ctx, j.m, &batchSink{b: b, j: j})
	}
}

// keep stores the answer of one request, or an error in its place once the batch's
// answers would pass their bound.
func (b *batch) keep(j job, msg []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+int64(len(msg)) > b.limit {
		msg = b.s.outward(errorBytes(j.m.ID, codeInternal,
			"the answers of this batch passed their bound of %d bytes (limits.maxBatchAnswerBytes); send this request alone", b.limit))
	} else {
		b.used += int64(len(msg))
	}
	b.replies[j.i] = msg
}

// batchSink keeps the response of one request of a batch; what the request sends
// meanwhile (progress) goes straight to the client.
type batchSink struct {
	b *batch
	j job
}

func (bs *batchSink) send(msg []byte) bool { return bs.b.to.send(msg) }
func (bs *batchSink) reply(msg []byte)     { bs.b.keep(bs.j, msg) }

var errTooLarge = errors.New("message too large")

// lineReader reads newline-delimited messages and refuses one over limit without
// holding it in memory; the id of a refused message is read as it streams past.
type lineReader struct {
	r     *bufio.Reader
	limit int64
}

func (l *lineReader) next() (line []byte, tooLargeID json.RawMessage, err error) {
	var buf []byte
	for {
		chunk, err := l.r.ReadSlice('\n')
		if int64(len(buf)+len(chunk)) > l.limit+1 {
			var sc idScanner
			sc.write(buf)
			sc.write(chunk)
			for errors.Is(err, bufio.ErrBufferFull) {
				chunk, err = l.r.ReadSlice('\n')
				sc.write(chunk)
			}
			return nil, sc.result(), errTooLarge
		}
		buf = append(buf, chunk...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(buf) > 0:
			return buf, nil, nil
		case err != nil:
			return nil, nil, err
		}
		return buf, nil, nil
	}
}

// lineWriter writes whole lines atomically: responses and notifications of many
// calls share one stdout. It is the stdio session's sink.
type lineWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
	err error
}

func (lw *lineWriter) send(msg []byte) bool {
	msg = compact(msg) // a child's pretty-printed JSON must still fit on one line
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.err != nil {
		return false
	}
	// One write per message, from a buffer of our own: msg may be shared with other
	// sessions and must not be appended to.
	lw.buf = append(append(lw.buf[:0], msg...), '\n')
	if _, err := lw.w.Write(lw.buf); err != nil {
		lw.err = fmt.Errorf("writing to the client: %w", err)
		return false
	}
	if cap(lw.buf) > 1<<20 {
		lw.buf = nil // keep no megabyte buffer around for one large message
	}
	return true
}

func (lw *lineWriter) reply(msg []byte) {
	if msg != nil {
		lw.send(msg)
	}
}
