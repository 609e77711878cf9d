package aggregation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/memory"
)

// ServeStdio serves one client over newline-delimited JSON-RPC on in and out until in
// ends or ctx is done. agent, when not empty, is the client's identity (--agent,
// NEXUS_AGENT); otherwise initialize decides it from the client's name, else
// anonymous. Nothing but MCP messages is ever written to out.
func (g *Gateway) ServeStdio(ctx context.Context, in io.Reader, out io.Writer, agent string) error {
	w := lineSink{jsonrpc.NewLineWriter(out)}
	s := g.newSession(frontStdio, agent, w)
	g.sessions.add(s)
	defer s.close()
	stop := context.AfterFunc(ctx, s.close)
	defer stop()
	r := &stdioReader{g: g, s: s, w: w, eof: make(chan struct{}),
		lr: jsonrpc.NewLineReader(in, g.cfg.Load().MessageLimit())}
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
	w       lineSink
	lr      *jsonrpc.LineReader // used by one goroutine at a time: the one holding the baton
	wg      sync.WaitGroup
	eof     chan struct{}
	eofOnce sync.Once
}

func (r *stdioReader) loop(ctx context.Context) {
	defer r.wg.Done()
	for {
		line, id, err := r.lr.Next()
		if errors.Is(err, jsonrpc.ErrTooLarge) {
			r.g.log.Warn("refused an over-size message", "limit", r.lr.Limit())
			r.w.reply(r.s.outward(tooLarge(id, r.lr.Limit())))
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
		} else if m, reply := jsonrpc.Decode(line); reply != nil {
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

func tooLarge(id json.RawMessage, limit int64) []byte {
	return jsonrpc.ErrorResponse(id, jsonrpc.CodeInvalidRequest, "message larger than %d bytes refused; raise maxMessageBytes in the config if it is legitimate", limit)
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
	m *jsonrpc.Message
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
