package samples

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// frontDoor answers a tools/call whose arguments break the tool's input schema with
// JSON-RPC -32602 and a plain message ("invalid params for kg_latest_graph: unknown
// field \"repo\""), before mcp-go sees the call. mcp-go v1.2.1 has no way for a
// handler to answer -32602 itself (see registry), and the rename the before-call
// hook falls back on garbles the message; the transports Serve runs put this door
// in front, so only in-process use (tests) sees the fallback.
type frontDoor struct {
	checks map[string]inputSpec
	log    *callLog // rejected calls are calls too
}

// reject is the -32602 response to msg, or nil when msg is anything but a
// tools/call with invalid arguments (mcp-go handles those, unknown tools included).
func (f frontDoor) reject(msg []byte) []byte {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &req) != nil || req.Method != string(mcp.MethodToolsCall) || len(req.ID) == 0 {
		return nil
	}
	in, known := f.checks[req.Params.Name]
	if !known {
		return nil
	}
	args := req.Params.Arguments
	if t := bytes.TrimSpace(args); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		args = json.RawMessage("{}")
	}
	err := checkArgs(in, args)
	if err == nil {
		return nil
	}
	if f.log != nil {
		f.log.record(req.Params.Name)
	}
	resp, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      req.ID,
		"error":   map[string]any{"code": mcp.INVALID_PARAMS, "message": invalidParamsMessage(req.Params.Name, err)},
	})
	return resp
}

// invalidParamsMessage reads "invalid params for TOOL: REASON".
func invalidParamsMessage(tool string, err error) string {
	reason := strings.TrimPrefix(err.Error(), errInvalidParams.Error()+": ")
	return fmt.Sprintf("%s for %s: %s", errInvalidParams, tool, reason)
}

// serveStdio runs serve (mcp-go's stdio loop) behind the door: lines from stdin pass
// through a pipe unless the door answers them itself, and both write whole lines
// to stdout under one lock.
func (f frontDoor) serveStdio(ctx context.Context, stdin io.Reader, stdout io.Writer, serve func(context.Context, io.Reader, io.Writer) error) error {
	out := &lockedWriter{w: stdout}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(f.filter(stdin, pw, out))
	}()
	err := serve(ctx, pr, out)
	pr.Close() // unblocks the filter if serve stopped first
	return err
}

// filter copies stdin's lines to next, answering invalid calls on out instead.
func (f frontDoor) filter(stdin io.Reader, next, out io.Writer) error {
	r := bufio.NewReaderSize(stdin, 64*1024)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			if resp := f.reject(line); resp != nil {
				if _, werr := out.Write(append(resp, '\n')); werr != nil {
					return werr
				}
			} else if _, werr := next.Write(line); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// lockedWriter keeps each Write whole when two goroutines write lines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// handler puts the door in front of a streamable HTTP handler: a POSTed single
// tools/call with invalid arguments is answered here.
func (f frontDoor) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4<<20))
		if err != nil {
			http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		if resp := f.reject(body); resp != nil {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(resp)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}
