package aggregation

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/mark3labs/mcp-go/server"
)

// maxConcurrentCalls bounds the tools/call requests one front connection runs at once
// beyond the stdioWorkers that are always there.
const (
	maxConcurrentCalls = 64
	stdioWorkers       = 8
)

// ServeStdio serves one client over newline-delimited JSON-RPC on in and out until in
// ends or ctx is done. agent, when not empty, is the caller's identity. Nothing but
// MCP messages is ever written to out.
func (g *Gateway) ServeStdio(ctx context.Context, in io.Reader, out io.Writer, agent string) error {
	w := &lineWriter{w: out}
	pr, pw := io.Pipe()
	ss := server.NewStdioServer(g.front)
	ss.SetErrorLogger(slog.NewLogLogger(g.log.Handler(), slog.LevelError))
	sessionCtx := make(chan context.Context, 1)
	ss.SetContextFunc(func(ctx context.Context) context.Context {
		if agent != "" {
			ctx = WithAgent(ctx, agent)
		}
		sessionCtx <- ctx
		return ctx
	})
	listenErr := make(chan error, 1)
	go func() { listenErr <- ss.Listen(ctx, pr, w) }()
	var base context.Context
	select {
	case base = <-sessionCtx:
	case err := <-listenErr:
		return err
	}

	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		g.readStdio(base, in, w, pw)
	}()
	select {
	case <-readDone:
	case <-ctx.Done():
	}
	pw.Close()
	return <-listenErr
}

// readStdio is the stdio front door: calls go down the chain on their own goroutine,
// everything else to mcp-go through the pipe.
func (g *Gateway) readStdio(ctx context.Context, in io.Reader, w *lineWriter, toMCP io.Writer) {
	limit := g.cfg.Load().MessageLimit()
	lr := &lineReader{r: bufio.NewReaderSize(in, 64*1024), limit: limit}
	notify := func(method string, params map[string]any) { w.writeLine(notificationLine(method, params)) }
	serve := func(msg *incoming) { w.writeLine(g.serveCall(ctx, "stdio", g.agentOf(ctx), msg, notify)) }
	// Calls run on long-lived workers: a goroutine's stack grows on its first trip
	// through SQLite or JSON, and a fresh goroutine per call would pay that every time.
	// When every worker is busy, extra goroutines take the overflow, up to the bound.
	var calls sync.WaitGroup
	work := make(chan *incoming)
	for range stdioWorkers {
		calls.Go(func() {
			for msg := range work {
				serve(msg)
			}
		})
	}
	defer calls.Wait()
	defer close(work)
	sem := make(chan struct{}, maxConcurrentCalls)
	for {
		line, err := lr.next()
		if errors.Is(err, errTooLarge) {
			g.log.Warn("refused an over-size message", "limit", limit)
			w.writeLine(responseLine(nil, nil, &RPCError{Code: codeInvalidRequest,
				Message: fmt.Sprintf("message larger than %d bytes refused; raise maxMessageBytes in the config if it is legitimate", limit)}))
			continue
		}
		if err != nil {
			return
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var msg incoming
		if json.Unmarshal(line, &msg) == nil {
			if msg.isCall() {
				select {
				case work <- &msg:
				default:
					sem <- struct{}{}
					calls.Go(func() {
						defer func() { <-sem }()
						serve(&msg)
					})
				}
				continue
			}
			if msg.Method == "notifications/cancelled" {
				g.inflight.cancel("stdio", msg.Params)
			}
		}
		if line[len(line)-1] != '\n' {
			line = append(line, '\n')
		}
		if _, err := toMCP.Write(line); err != nil {
			return
		}
	}
}

var errTooLarge = errors.New("message too large")

// lineReader reads newline-delimited messages and refuses one over limit without
// holding it in memory.
type lineReader struct {
	r     *bufio.Reader
	limit int64
}

func (l *lineReader) next() ([]byte, error) {
	var buf []byte
	for {
		chunk, err := l.r.ReadSlice('\n')
		if int64(len(buf)+len(chunk)) > l.limit+1 {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = l.r.ReadSlice('\n')
			}
			return nil, errTooLarge
		}
		buf = append(buf, chunk...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(buf) > 0:
			return buf, nil
		case err != nil:
			return nil, err
		}
		return buf, nil
	}
}

// lineWriter writes whole lines atomically: mcp-go's responses, the front door's
// responses and progress notifications share one stdout.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (lw *lineWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.w.Write(p)
}

func (lw *lineWriter) writeLine(b []byte) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	_, _ = lw.w.Write(append(b, '\n'))
}
