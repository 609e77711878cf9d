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
)

// maxConcurrentCalls bounds the requests one stdio client runs at once beyond the
// stdioWorkers that are always there.
const (
	maxConcurrentCalls = 64
	stdioWorkers       = 8
)

// ServeStdio serves one client over newline-delimited JSON-RPC on in and out until in
// ends or ctx is done. agent, when not empty, is the client's identity (--agent,
// NEXUS_AGENT); otherwise initialize decides it from the client's name, else
// anonymous. Nothing but MCP messages is ever written to out.
func (g *Gateway) ServeStdio(ctx context.Context, in io.Reader, out io.Writer, agent string) error {
	w := &lineWriter{w: out}
	s := g.newSession(frontStdio, agent, w)
	defer s.close()
	stop := context.AfterFunc(ctx, s.close)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.readStdio(s.ctx, s, in, w)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return nil
}

// readStdio reads the client's lines and hands each message to the session.
// Responses, notifications and requests answered from memory of the gateway itself
// (initialize, ping, lists) run inline, in order; requests that wait on a child run
// on workers, so a slow call never holds up the client's answer to a sampling
// request or its cancellation.
func (g *Gateway) readStdio(ctx context.Context, s *session, in io.Reader, w *lineWriter) {
	limit := g.cfg.Load().MessageLimit()
	lr := &lineReader{r: bufio.NewReaderSize(in, 64*1024), limit: limit}
	// Calls run on long-lived workers: a goroutine's stack grows on its first trip
	// through SQLite or JSON, and a fresh goroutine per call would pay that every time.
	// When every worker is busy, extra goroutines take the overflow, up to the bound.
	var calls sync.WaitGroup
	work := make(chan func())
	for range stdioWorkers {
		calls.Go(func() {
			for f := range work {
				f()
			}
		})
	}
	defer calls.Wait()
	defer close(work)
	sem := make(chan struct{}, maxConcurrentCalls)
	run := func(f func()) {
		select {
		case work <- f:
		default:
			sem <- struct{}{}
			calls.Go(func() {
				defer func() { <-sem }()
				f()
			})
		}
	}
	for {
		line, id, err := lr.next()
		if errors.Is(err, errTooLarge) {
			g.log.Warn("refused an over-size message", "limit", limit)
			w.reply(s.outward(tooLarge(id, limit)))
			continue
		}
		if err != nil {
			return
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if line[0] == '[' {
			run(func() { g.serveBatch(ctx, s, line, w) })
			continue
		}
		m, reply := decode(line)
		if reply != nil {
			w.reply(s.outward(reply))
			continue
		}
		if m.isRequest() && !(inline[m.Method] && g.started()) {
			run(func() { s.handle(ctx, m, w) })
			continue
		}
		s.handle(ctx, m, w)
	}
}

// inline are the requests the gateway answers without waiting on a child (lists
// only once the children's first attempts are over: until then they may wait).
var inline = map[string]bool{
	"initialize": true, "ping": true, "tools/list": true, "prompts/list": true,
	"resources/list": true, "resources/templates/list": true,
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
// answers with one array of the responses, in the order of the requests.
func (g *Gateway) serveBatch(ctx context.Context, s *session, line []byte, to sink) {
	var items []json.RawMessage
	if err := json.Unmarshal(line, &items); err != nil {
		to.reply(s.outward(errorBytes(nil, codeParseError, "malformed JSON-RPC batch: %v", err)))
		return
	}
	if len(items) == 0 {
		to.reply(s.outward(errorBytes(nil, codeInvalidRequest, "empty batch")))
		return
	}
	replies := make([][]byte, len(items))
	var wg sync.WaitGroup
	for i, it := range items {
		m, reply := decode(it)
		if reply != nil {
			replies[i] = s.outward(reply)
			continue
		}
		if m.isRequest() {
			wg.Go(func() { s.handle(ctx, m, &batchSink{to: to, into: &replies[i]}) })
			continue
		}
		s.handle(ctx, m, to)
	}
	wg.Wait()
	var out [][]byte
	for _, r := range replies {
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

// batchSink keeps the response of one request of a batch; what the request sends
// meanwhile (progress) goes straight to the client.
type batchSink struct {
	to   sink
	into *[]byte
}

func (b *batchSink) send(msg []byte) bool { return b.to.send(msg) }
func (b *batchSink) reply(msg []byte)     { *b.into = msg }

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
