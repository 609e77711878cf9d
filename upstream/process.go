package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/internal/pipeio"
)

// Limits of a stdio child's streams.
const (
	// maxStderrLine is the longest stderr line logged whole; a longer one is logged
	// cut, with its size. A child's log is never a reason to stop it.
	maxStderrLine = 16 << 10
	// redactMargin is how much of a line is kept past where it is cut, so that it
	// is redacted before the cut: a value that straddles the cut is then replaced
	// whole rather than logged but for its last bytes. It exceeds every spelling of
	// a value the secret store accepts (2560 bytes, escaped at most 6 bytes a byte).
	redactMargin = 16 << 10
	// maxStrayLine is how much of a line on stdout that is not JSON-RPC is logged.
	maxStrayLine = 80
	// shutdownGrace is how long a child has to exit after its stdin closes before it
	// is signalled.
	shutdownGrace = 2 * time.Second
)

// Process is the transport to a stdio child: newline-delimited JSON-RPC over the
// process's stdin and stdout. It is the gateway's own rather than mcp-go's because
// the gateway needs what a generic client does not give:
//   - the process's exit, not the end of its stderr, marks it gone;
//   - a message from the child is bounded (maxMessage); an over-size response fails
//     its call with a clear error and the stream stays in step;
//   - stderr lines of any length are logged (cut), never fatal;
//   - one decode per message, and the raw result handed on as the child's bytes;
//   - shutdown closes stdin, waits, then signals the child's process group, and
//     waits for its pipes a bounded time.
type Process struct {
	name       string // the server's name, for messages
	cmd        *exec.Cmd
	stdin      *os.File            // closed to end the child
	stdout     *os.File            // closed to stop reading it
	lines      *jsonrpc.LineWriter // stdin, written as pipeio writes a pipe
	out        io.Reader           // stdout, read as pipeio reads one
	log        *slog.Logger
	maxMessage int64
	tail       *Tail
	stderrLine func(string) // logs one line of the child's stderr
	// redact removes secret values from the child's text before it is cut and
	// logged; nil keeps it as is.
	redact func(string) string
	ledger *Ledger

	mu       sync.Mutex
	pending  map[string]chan reply
	handlers Handlers
	exited   chan struct{} // closed when the process has exited
	exitErr  error
	closed   bool
	// stranded is closed when the child sends a request once its stdin is
	// closed: it waits for an answer that cannot come (see Close).
	stranded     chan struct{}
	strandedOnce sync.Once
	lostOnce     sync.Once
	ctx          context.Context
	cancel       context.CancelFunc
}

var _ Transport = (*Process)(nil)

// Options are what a Process needs besides its command.
type Options struct {
	Name   string       // the server's name, for messages
	Logger *slog.Logger // never nil
	// MaxMessage bounds one message from the child: over it, the request it
	// answers fails with a TooLargeError and the stream stays in step.
	MaxMessage int64
	// Tail keeps the last lines of the child's stderr, for failure reports.
	Tail *Tail
	// StderrLine logs one line of the child's stderr (already redacted and cut).
	StderrLine func(string)
	// Redact removes secret values from the child's text before it is cut and
	// logged; nil keeps it as is.
	Redact func(string) string
	// Ledger records the child's process group while it lives, for the next
	// gateway to end if this one is killed; nil records nothing.
	Ledger *Ledger
}

// NewProcess is the transport to the child cmd starts; Start starts it.
func NewProcess(cmd *exec.Cmd, o Options) *Process {
	if o.Tail == nil {
		o.Tail = &Tail{}
	}
	return &Process{cmd: cmd, name: o.Name, log: o.Logger, maxMessage: o.MaxMessage, tail: o.Tail,
		stderrLine: o.StderrLine, redact: o.Redact, ledger: o.Ledger, pending: map[string]chan reply{}, exited: make(chan struct{}),
		stranded: make(chan struct{})}
}

// Start starts the process and its readers.
func (p *Process) Start(ctx context.Context) error {
	// The child's stdin and stdout are os.Pipe's own ends (exec.Cmd's
	// StdinPipe hides the File), read and written as pipeio does.
	if p.cmd.Stdin != nil || p.cmd.Stdout != nil {
		return errors.New("the command's stdin or stdout is already set: the transport needs both")
	}
	childStdin, stdin, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("stdin pipe: %w", err)
	}
	p.cmd.Stdin, p.stdin, p.lines = childStdin, stdin, jsonrpc.NewLineWriter(pipeio.Raw(stdin))
	stdout, childStdout, err := os.Pipe()
	if err != nil {
		_, _ = childStdin.Close(), stdin.Close()
		return fmt.Errorf("stdout pipe: %w", err)
	}
	p.cmd.Stdout, p.stdout, p.out = childStdout, stdout, pipeio.Raw(stdout)
	closeChildEnds := func() { _, _ = childStdin.Close(), childStdout.Close() }
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		closeChildEnds()
		_, _ = stdin.Close(), stdout.Close()
		return fmt.Errorf("stderr pipe: %w", err)
	}
	ownGroup(p.cmd)
	err = p.cmd.Start()
	closeChildEnds() // the child has its copies, or none
	if err != nil {
		_, _ = stdin.Close(), stdout.Close()
		return err
	}
	forget := p.ledger.record(p.name, p.cmd.Process.Pid)
	p.ctx, p.cancel = context.WithCancel(context.WithoutCancel(ctx))
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		p.readStderr(stderr)
		_ = stderr.Close()
	}()
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		p.readStdout()
		_ = p.stdout.Close()
	}()
	go func() {
		// The leader's exit is waited for, not its pipes' end (which cmd.Wait
		// waits for): what it started and left in its group (npx's node, a
		// wrapper's helper) may hold them open. The last answers it wrote are
		// read first, and its last words on stderr, which a report of its
		// failure quotes; if the pipes do not end soon, its group is ended, and
		// then they do. Only then is the child gone; what it left goes with it.
		state, err := p.cmd.Process.Wait()
		if err == nil && !state.Success() {
			err = &exec.ExitError{ProcessState: state}
		}
		pgid := p.cmd.Process.Pid
		pipesDone := make(chan struct{})
		go func() {
			<-readerDone
			<-stderrDone
			close(pipesDone)
		}()
		select {
		case <-pipesDone:
		case <-time.After(leftoverWait):
			p.endLeftovers(pgid)
			<-readerDone
			select { // stderr may be held by what left the group: it is only a log
			case <-stderrDone:
			case <-time.After(leftoverWait):
			}
		}
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(p.exited)
		p.lost(fmt.Errorf("the server exited: %v", exitReason(err)))
		p.endLeftovers(pgid)
		forget()
	}()
	return nil
}

// leftoverWait is how long the pipes of a child that exited may take to end
// before what it left holding them is ended.
const leftoverWait = 100 * time.Millisecond

// endLeftovers ends what the child left running in its group.
func (p *Process) endLeftovers(pgid int) {
	if !groupExists(pgid) {
		return
	}
	if err := killGroup(pgid); err != nil {
		p.log.Warn("ending what the server left running failed", "server", p.name, "err", err)
	}
}

func exitReason(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// lost fails every pending request and tells the connection, once.
func (p *Process) lost(err error) {
	p.lostOnce.Do(func() {
		p.mu.Lock()
		pending := p.pending
		p.pending = map[string]chan reply{}
		onLost := p.handlers.Lost
		p.mu.Unlock()
		for _, ch := range pending {
			close(ch)
		}
		p.cancel()
		if onLost != nil {
			onLost(err)
		}
	})
}

// readStdout reads the child's messages until its stdout ends.
func (p *Process) readStdout() {
	lr := jsonrpc.NewLineReader(p.out, p.maxMessage)
	for {
		line, id, err := lr.Next()
		if errors.Is(err, jsonrpc.ErrTooLarge) {
			p.tooLarge(id)
			continue
		}
		if err != nil {
			return
		}
		p.dispatch(line)
	}
}

// tooLarge fails the call an over-size response belongs to; the message itself was
// never held.
func (p *Process) tooLarge(id json.RawMessage) {
	p.log.Warn("refused an over-size message from the server", "limit", p.maxMessage, "id", string(id))
	key := jsonrpc.IDKey(id)
	p.mu.Lock()
	ch := p.pending[key]
	delete(p.pending, key)
	p.mu.Unlock()
	if ch != nil {
		ch <- reply{err: &TooLargeError{fmt.Sprintf("the answer of server %s is larger than %d bytes and was refused; raise maxChildMessageBytes in the config if it is legitimate", p.name, p.maxMessage)}}
	}
}

// reply is what a pending request gets: the child's response, or the gateway's
// own reason for having none.
type reply struct {
	resp *jsonrpc.Message
	err  error
}

// TooLargeError is Nexus's refusal of a child's over-size answer: an error of the
// gateway's, never mistaken for one of the child's own, which reach the client as
// the child gave them.
type TooLargeError struct{ msg string }

func (e *TooLargeError) Error() string { return e.msg }

// dispatch routes one message from the child, decoded once: a notification
// or a request to the handlers (Receive), a response to the request waiting
// for it.
func (p *Process) dispatch(line []byte) {
	m := new(jsonrpc.Message)
	if err := jsonrpc.Unmarshal(line, m); err != nil {
		p.log.Warn("the server wrote a line that is not JSON-RPC", "err", err, "line", p.cut(line, maxStrayLine))
		return
	}
	switch {
	case m.IsNotification():
		p.mu.Lock()
		onNote := p.handlers.Notification
		p.mu.Unlock()
		if onNote != nil {
			onNote(m.Method, notificationParams(m.Params))
		}
	case m.Method != "":
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if closed {
			p.strandedOnce.Do(func() { close(p.stranded) })
			return
		}
		go p.serveRequest(m)
	case m.HasID():
		key := jsonrpc.IDKey(m.ID)
		p.mu.Lock()
		ch := p.pending[key]
		delete(p.pending, key)
		p.mu.Unlock()
		if ch != nil {
			ch <- reply{resp: m}
		}
	}
}

// serveRequest answers a request from the child with the gateway's handler,
// under the id the child sent, byte for byte.
func (p *Process) serveRequest(m *jsonrpc.Message) {
	p.mu.Lock()
	h := p.handlers.Request
	p.mu.Unlock()
	var result json.RawMessage
	rpcErr := &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no handler for " + m.Method}
	if h != nil {
		result, rpcErr = h(p.ctx, m)
	}
	_ = p.write(jsonrpc.Response(m.ID, result, rpcErr))
}

func (p *Process) readStderr(r io.Reader) {
	br := bufio.NewReaderSize(r, 4<<10)
	var line []byte
	size := 0
	for {
		chunk, err := br.ReadSlice('\n')
		size += len(chunk)
		if keep := maxStderrLine + redactMargin; len(line) < keep {
			line = append(line, chunk[:min(len(chunk), keep-len(line))]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(line) > 0 {
			text := p.cutLine(trimNewline(line), size)
			p.tail.add(text)
			if p.stderrLine != nil {
				p.stderrLine(text)
			}
		}
		line, size = line[:0], 0
		if err != nil {
			return // the end of stderr is the end of the log, not of the process
		}
	}
}

// cutLine is a stderr line (size bytes long, of which line holds the first ones)
// as it is logged: redacted, then cut to maxStderrLine with its size said.
func (p *Process) cutLine(line []byte, size int) string {
	text := p.redactText(string(line))
	if len(text) <= maxStderrLine && size <= maxStderrLine {
		return text
	}
	return validPrefix(text, maxStderrLine) + " … (line of " + strconv.Itoa(size) + " bytes, cut)"
}

// cut is b as a quoted excerpt of at most n bytes for a log line: redacted first,
// then cut, so a value that straddles the cut is replaced whole.
func (p *Process) cut(b []byte, n int) string {
	text := p.redactText(string(b[:min(len(b), n+redactMargin)]))
	if len(text) <= n && len(b) <= n+redactMargin {
		return strconv.Quote(text)
	}
	return strconv.Quote(validPrefix(text, n)) + "… (" + strconv.Itoa(len(b)) + " bytes)"
}

func (p *Process) redactText(s string) string {
	if p.redact == nil {
		return s
	}
	return p.redact(s)
}

// validPrefix is s cut to at most n bytes, at a rune boundary.
func validPrefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// write writes one message as one line. What it holds that came from a
// client (an answer to the child's request, a call's arguments) may be
// pretty-printed: the LineWriter compacts it first. The requests of calls
// made at once go in one write (jsonrpc.LineWriter).
func (p *Process) write(b []byte) error {
	if err := p.lines.Write(b); err != nil {
		if errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EPIPE) {
			// The child exited (or is being closed) between Send's check and
			// the write: the transport is closed, as for a request after it.
			return fmt.Errorf("writing to the server: %w (%v)", transport.ErrTransportClosed, errors.Unwrap(err))
		}
		return fmt.Errorf("writing to the server: %w", errors.Unwrap(err))
	}
	return nil
}

// Send sends req and waits for its response, the process's exit or ctx.
// beforeWrite, when not nil, runs just before the request is written, and a
// refusal stops the write (see gate.go); the write and the gate's hold are one
// step.
func (p *Process) Send(ctx context.Context, req Request, beforeWrite func() (func(), error)) (*jsonrpc.Message, error) {
	key := jsonrpc.IDKey(req.ID) // the child echoes the id as we wrote it
	ch := make(chan reply, 1)
	p.mu.Lock()
	if p.closed || p.ctx == nil || p.ctx.Err() != nil {
		p.mu.Unlock()
		return nil, transport.ErrTransportClosed
	}
	p.pending[key] = ch
	p.mu.Unlock()
	b, err := encodeRequest(req)
	if err == nil {
		err = p.gatedWrite(b, beforeWrite)
	}
	if err != nil {
		p.mu.Lock()
		delete(p.pending, key)
		p.mu.Unlock()
		return nil, err
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return nil, transport.ErrTransportClosed
		}
		if r.err != nil {
			return nil, r.err
		}
		r.resp.ID = req.ID
		return r.resp, nil
	case <-ctx.Done():
		p.mu.Lock()
		delete(p.pending, key)
		p.mu.Unlock()
		return nil, ctx.Err()
	}
}

// gatedWrite writes b once beforeWrite, if any, let it.
func (p *Process) gatedWrite(b []byte, beforeWrite func() (func(), error)) error {
	if beforeWrite == nil {
		return p.write(b)
	}
	release, err := beforeWrite()
	if err != nil {
		return err
	}
	defer release()
	return p.write(b)
}

// encodeRequest writes a request by hand: params that are already JSON (a call's
// arguments, as the client sent them) are copied, not re-encoded.
func encodeRequest(req Request) ([]byte, error) {
	if _, raw := req.Params.(json.RawMessage); !raw && req.Params != nil {
		params, err := json.Marshal(req.Params)
		if err != nil {
			return nil, unsent{fmt.Errorf("encoding the params of %s: %w", req.Method, err)}
		}
		return jsonrpc.Request(req.ID, req.Method, json.RawMessage(params)), nil
	}
	return jsonrpc.Request(req.ID, req.Method, req.Params), nil
}

// Notify sends the child a notification.
func (p *Process) Notify(_ context.Context, method string, params any) error {
	if _, raw := params.(json.RawMessage); !raw && params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return fmt.Errorf("encoding the params of %s: %w", method, err)
		}
		params = json.RawMessage(b)
	}
	return p.write(jsonrpc.Notification(method, params))
}

// Receive sets the handlers of what the child sends unasked.
func (p *Process) Receive(h Handlers) {
	p.mu.Lock()
	p.handlers = h
	p.mu.Unlock()
}

// Remote reports false: a Process is a local child (see Transport).
func (*Process) Remote() bool { return false }

// MCP is the process as mcp-go's client drives it for the handshake.
func (p *Process) MCP() transport.Interface { return mcpProcess{p} }

// mcpProcess is a Process in mcp-go's types, converted here, for mcp-go's
// client to send the handshake through. What the child sends unasked goes to
// the Process's handlers (Receive), never to mcp-go's.
type mcpProcess struct{ p *Process }

var _ transport.Interface = mcpProcess{}

// Start does nothing: the Process was started as a Transport.
func (mcpProcess) Start(context.Context) error { return nil }

func (a mcpProcess) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	id, err := idText(req.ID)
	if err != nil {
		return nil, fmt.Errorf("encoding the id of %s: %w", req.Method, err)
	}
	resp, err := a.p.Send(ctx, Request{ID: id, Method: req.Method, Params: req.Params}, nil)
	if err != nil {
		return nil, err
	}
	out := &transport.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: req.ID, Result: resp.Result}
	if e := resp.Error; e != nil {
		out.Result, out.Error = nil, &mcp.JSONRPCErrorDetails{Code: e.Code, Message: e.Message, Data: e.Data}
	}
	return out, nil
}

func (a mcpProcess) SendNotification(_ context.Context, n mcp.JSONRPCNotification) error {
	b, err := json.Marshal(n)
	if err != nil {
		return err
	}
	return a.p.write(b)
}

func (mcpProcess) SetNotificationHandler(func(mcp.JSONRPCNotification)) {}
func (a mcpProcess) Close() error                                       { return a.p.Close() }
func (mcpProcess) GetSessionId() string                                 { return "" }

// idText is an mcp-go request id's JSON text. mcp-go's ids are numbers: they
// need no reflecting encoder.
func idText(id mcp.RequestId) (json.RawMessage, error) {
	switch v := id.Value().(type) {
	case string:
		return jsonrpc.StringID(v), nil
	case int64:
		return strconv.AppendInt(nil, v, 10), nil
	case int:
		return strconv.AppendInt(nil, int64(v), 10), nil
	}
	return json.Marshal(id)
}

// Close ends the child as MCP's stdio transport says: its stdin closes (a
// well-behaved server exits), then after a grace period SIGTERM, then SIGKILL,
// each sent to the child's process group, so that what it started (npx's node)
// ends with it. A child that asks the gateway something once its stdin is closed
// (a server asks for roots a moment after it starts) waits for an answer that
// cannot come: it is signalled without waiting out the grace. The last wait, for
// the child's stdout to end, is bounded too: a grandchild that left the group and
// keeps the pipe open does not keep the gateway.
func (p *Process) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	if p.stdin != nil {
		_ = p.stdin.Close()
	}
	if p.cmd.Process == nil {
		return nil
	}
	if p.waitExit(shutdownGrace, p.stranded) {
		return nil
	}
	_ = signalGroup(p.cmd.Process, syscall.SIGTERM)
	if p.waitExit(shutdownGrace, nil) {
		return nil
	}
	_ = signalGroup(p.cmd.Process, syscall.SIGKILL)
	if !p.waitExit(shutdownGrace, nil) {
		_ = p.stdout.Close() // its reader ends, and Wait reaps the child
		<-p.exited
	}
	return nil
}

// waitExit waits up to d for the process to exit, or for stop; it reports
// whether the process exited.
func (p *Process) waitExit(d time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-stop:
	case <-t.C:
	}
	return false
}

// Tail keeps the last lines a child wrote on stderr, for failure reports.
type Tail struct {
	mu    sync.Mutex
	lines []string
}

// tailLines is how many lines a Tail keeps.
const tailLines = 20

func (b *Tail) add(line string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, line)
	if len(b.lines) > tailLines {
		b.lines = b.lines[len(b.lines)-tailLines:]
	}
}

// String is the lines kept, oldest first.
func (b *Tail) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// Kill kills the process at once, as a crash would (tests).
func (p *Process) Kill() error { return p.cmd.Process.Kill() }
