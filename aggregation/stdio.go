package aggregation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
)

// ServeStdio serves one client over newline-delimited JSON-RPC on in and out until in
// ends, a write to out fails, or ctx is done. agent, when not empty, is the
// client's identity (--agent, NEXUS_AGENT); otherwise initialize decides it from
// the client's name, else anonymous. Nothing but MCP messages is ever written to
// out.
func (g *Gateway) ServeStdio(ctx context.Context, in io.Reader, out io.Writer, agent string) error {
	client := &clientWriter{w: out, left: make(chan struct{})}
	w := lineSink{jsonrpc.NewLineWriter(client)}
	s := g.newSession(frontStdio, agent, w)
	g.sessions.add(s)
	defer s.close()
	stop := context.AfterFunc(ctx, s.close)
	defer stop()
	f := &stdioFront{g: g, s: s, w: w, lr: jsonrpc.NewLineReader(in, g.cfg.Load().MessageLimit()),
		jobs: make(chan func()), eof: make(chan struct{})}
	f.run(f.read)
	select {
	case <-f.eof:
		f.workers.Wait() // the calls still running answer before the session ends
	case <-client.left:
		g.log.Info("the client stopped reading: the session ends", "err", client.err)
	case <-ctx.Done():
		// The reader may be blocked reading in, which only the end of in, of
		// the process, or (raw stdin) the caller's closing of its descriptor
		// interrupts; the calls end with the session.
	}
	return nil
}

// clientWriter is the client's stdout. A write that fails there (the client
// closed its end, or is gone) means the client has left, as the end of its
// stdin does: left is closed, and the session ends.
type clientWriter struct {
	w    io.Writer
	once sync.Once
	err  error // the first failed write's; read once left is closed
	left chan struct{}
}

func (c *clientWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if err != nil {
		c.once.Do(func() {
			c.err = err
			close(c.left)
		})
	}
	return n, err
}

// stdioFront is one stdio client. Its goroutines are workers: one of them reads the
// client's messages at a time. A tools/call runs on the worker that read it, so a
// memory hit or a refusal is answered without a hand-off to another goroutine;
// when the call is about to wait (caller.letGo), the reading passes to another
// worker, and the client's next messages (a cancellation, its answer to a
// sampling request, other calls) are read meanwhile. Every other request runs on
// a worker of its own from the start. A worker that finished waits for the next
// job rather than ending, so a stack a call grew is reused, not grown again for
// every request. Workers are bounded by the session's slots
// (limits.maxCallsPerSession), and a request past them is refused at once.
type stdioFront struct {
	g       *Gateway
	s       *session
	w       lineSink
	lr      *jsonrpc.LineReader // read by one worker at a time
	jobs    chan func()         // to an idle worker
	workers sync.WaitGroup
	eof     chan struct{} // closed when the client's input ended
	eofOnce sync.Once
}

// read reads the client's messages until its input ends, or until a call it ran
// handed the reading to another worker.
func (f *stdioFront) read() {
	for {
		line, id, err := f.lr.Next()
		if errors.Is(err, jsonrpc.ErrTooLarge) {
			f.g.log.Warn("refused an over-size message", "limit", f.lr.Limit())
			f.w.reply(f.s.outward(tooLarge(id, f.lr.Limit())))
			continue
		}
		if err != nil {
			f.eofOnce.Do(func() { close(f.eof) })
			return
		}
		line = bytes.TrimSpace(line)
		switch {
		case len(line) == 0:
		case line[0] == '[':
			f.g.serveBatch(f.s.ctx, f.s, line, f.w, f.run)
		default:
			m, reply := jsonrpc.Decode(line)
			if reply != nil {
				f.w.reply(f.s.outward(reply))
			} else if m.Method == "tools/call" && m.HasID() && !mayBeModern(m.Params) {
				if handed := f.callHere(m); handed {
					return
				}
			} else {
				f.s.handle(f.s.ctx, m, f.w, f.run)
			}
		}
	}
}

// callHere runs a legacy tools/call on the reading worker and reports whether
// the call handed the reading on. (A 2026-07-28 call is a session of its own,
// with a sink of its own: it runs on a worker.)
func (f *stdioFront) callHere(m *jsonrpc.Message) (handed bool) {
	r := &readingSink{lineSink: f.w, f: f}
	f.s.handle(f.s.ctx, m, r, inline)
	return !r.keep()
}

// handOffAfter is how long a call that waits keeps the reading before another
// worker takes it, when no message of the client is waiting to be read: a call
// answered within it (most are) costs no hand-off, and a message the client
// sends meanwhile (a cancellation, the answer to a sampling request) is read
// within it.
const handOffAfter = time.Millisecond

// readingSink is the sink of a call running on the worker that reads the client.
type readingSink struct {
	lineSink
	f     *stdioFront
	state atomic.Int32 // reading, handed or kept
	timer *time.Timer  // set by letGo; only the call's goroutine touches it
}

const (
	reading = iota // the call's worker still reads the client
	handed         // another worker does
	kept           // the call ended first: its worker reads on
)

// letGo is said before the call waits. The reading passes to another worker at
// once when the client's next message is already there, else after
// handOffAfter unless the call is over by then.
func (r *readingSink) letGo() {
	switch {
	case r.timer != nil || r.state.Load() != reading:
	case r.f.lr.Buffered():
		r.handOff()
	default:
		r.timer = time.AfterFunc(handOffAfter, r.handOff)
	}
}

func (r *readingSink) handOff() {
	if r.state.CompareAndSwap(reading, handed) {
		r.f.run(r.f.read)
	}
}

// keep reports, once the call is over, whether its worker still holds the
// reading.
func (r *readingSink) keep() bool {
	if r.timer != nil {
		r.timer.Stop()
	}
	return r.state.CompareAndSwap(reading, kept) || r.state.Load() == kept
}

// run runs job on an idle worker, or on a new one when none is idle.
func (f *stdioFront) run(job func()) {
	select {
	case f.jobs <- job:
	default:
		f.workers.Add(1)
		go f.work(job)
	}
}

func (f *stdioFront) work(job func()) {
	defer f.workers.Done()
	for {
		job()
		select {
		case job = <-f.jobs:
		case <-f.eof:
			return
		}
	}
}

// runner runs a request's work: at once on the HTTP front, whose request has a
// goroutine of its own, on a worker on stdio (stdioFront.run).
type runner func(job func())

func inline(job func()) { job() }

func tooLarge(id json.RawMessage, limit int64) []byte {
	return jsonrpc.ErrorResponse(id, jsonrpc.CodeInvalidRequest, "message larger than %d bytes refused; raise maxMessageBytes in the config if it is legitimate", limit)
}

// serveBatch runs a JSON-RPC batch through the same path as single messages and
// answers with one array of the responses, in the order of the requests. A batch is
// bounded three ways (limits): its length, the requests it runs at once (workers
// holding the session's slots, never a goroutine per item), and the bytes of its
// answers together.
func (g *Gateway) serveBatch(ctx context.Context, s *session, line []byte, to sink, run runner) {
	lim := g.cfg.Load().Limits
	items, n, err := splitBatch(line, lim.BatchMessages())
	switch {
	case err != nil:
		to.reply(s.outward(jsonrpc.ErrorResponse(nil, jsonrpc.CodeParseError, "malformed JSON-RPC batch: %v", err)))
		return
	case n == 0:
		to.reply(s.outward(jsonrpc.ErrorResponse(nil, jsonrpc.CodeInvalidRequest, "empty batch")))
		return
	case n > len(items):
		g.log.Warn("refused an over-long batch", "messages", n, "limit", len(items))
		to.reply(s.outward(jsonrpc.ErrorResponse(nil, jsonrpc.CodeInvalidRequest,
			"batch of %d messages: at most %d; send smaller batches (limits.maxBatchMessages)", n, len(items))))
		return
	}
	b := &batch{s: s, to: to, limit: lim.BatchAnswerBytes(), replies: make([][]byte, len(items))}
	for i, it := range items {
		m, reply := jsonrpc.Decode(it)
		switch {
		case reply != nil:
			b.replies[i] = s.outward(reply)
		case m.IsRequest():
			b.jobs = append(b.jobs, job{i, m})
		default:
			s.handle(ctx, m, to, inline) // a notification or a response: never waits
		}
	}
	workers := b.slots()
	if workers == 0 {
		to.reply(b.answer())
		return
	}
	run(func() {
		b.run(ctx, workers)
		to.reply(b.answer())
	})
}

// answer is the batch's answer: one array of the responses, in the order of the
// requests; nil when it held only notifications and responses.
func (b *batch) answer() []byte {
	var out [][]byte
	for _, r := range b.replies {
		if r != nil {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil // only notifications and responses: nothing to answer
	}
	return append(append([]byte{'['}, bytes.Join(out, []byte{','})...), ']')
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
	m *jsonrpc.Message
}

// slots takes as many of the session's slots as the batch has requests, or as
// are free; with none free, each request gets the session's busy error.
func (b *batch) slots() int {
	workers := 0
	for workers < len(b.jobs) && b.s.acquire() {
		workers++
	}
	if workers == 0 {
		for _, j := range b.jobs {
			b.replies[j.i] = b.s.outward(b.s.busy(j.m.ID))
		}
	}
	return workers
}

// run answers the batch's requests with the workers slots took, each holding one.
func (b *batch) run(ctx context.Context, workers int) {
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
		msg = b.s.outward(jsonrpc.ErrorResponse(j.m.ID, jsonrpc.CodeInternal,
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

// lineSink is a stdio session's sink: messages as lines on the client's stdout.
type lineSink struct{ w *jsonrpc.LineWriter }

func (ls lineSink) send(msg []byte) bool { return ls.w.Write(msg) == nil }

func (ls lineSink) reply(msg []byte) {
	if msg != nil {
		ls.w.Write(msg)
	}
}
