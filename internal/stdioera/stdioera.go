// Package stdioera serves an mcp-go server on stdio as a server of one protocol
// era, for tests: mcp-go serves both eras at once, and a test of how a gateway finds
// a child's era needs children that speak only one, or that stay silent.
package stdioera

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/mark3labs/mcp-go/server"
)

// The eras a server may be served in.
const (
	Dual   = "dual"   // both eras, as mcp-go serves them
	Legacy = "legacy" // initialize only: server/discover is an unknown method
	Silent = "silent" // legacy, and server/discover gets no answer at all
	Modern = "modern" // 2026-07-28 only: initialize is refused with the versions it speaks
)

// Serve serves srv on in and out in era until in ends or ctx is done. seen, when
// set, is told the method of every message that arrives.
func Serve(ctx context.Context, srv *server.MCPServer, era string, in io.Reader, out io.Writer, seen func(method string), opts ...server.StdioOption) error {
	w := &lockedWriter{w: out}
	filtered, feed := io.Pipe()
	go func() {
		defer feed.Close()
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			line := sc.Bytes()
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			_ = json.Unmarshal(line, &m)
			if m.Method != "" && seen != nil {
				seen(m.Method)
			}
			if answer, refused := refusal(era, m.Method, m.ID); refused {
				if answer != "" {
					fmt.Fprintln(w, answer)
				}
				continue
			}
			if _, err := feed.Write(append(append([]byte(nil), line...), '\n')); err != nil {
				return
			}
		}
	}()
	stdio := server.NewStdioServer(srv)
	for _, opt := range opts {
		opt(stdio)
	}
	err := stdio.Listen(ctx, filtered, w)
	if err == io.EOF {
		return nil
	}
	return err
}

// refusal is how a server of era answers method instead of the server itself
// ("" for no answer), or false when the server answers it.
func refusal(era, method string, id json.RawMessage) (string, bool) {
	switch {
	case method == "server/discover" && (era == Legacy || era == Silent) && len(id) > 0:
		if era == Silent {
			return "", true
		}
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, id), true
	case method == "initialize" && era == Modern:
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32022,"message":"this server speaks only 2026-07-28","data":{"supported":["2026-07-28"],"requested":"2025-11-25"}}}`, id), true
	}
	return "", false
}

// lockedWriter serialises whole writes: the refusals and the server's own
// messages share one stream.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
