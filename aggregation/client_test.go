package aggregation

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
)

// testClient is a minimal MCP client over either front, written against the wire so
// the tests see exactly what a real client would: every byte it receives is kept.
type testClient struct {
	t    *testing.T
	post func(msg []byte) // sends one wireMsg to the gateway

	mu      sync.Mutex
	nextID  int
	waiting map[string]chan wireMsg
	notes   []wireMsg
	noted   chan struct{}
	seen    bytes.Buffer // every byte received
	// answer replies to requests the gateway sends (sampling, roots...).
	answer func(method string, params json.RawMessage) (any, *RPCError)
	// end closes the client's session: an HTTP DELETE, or the end of the stdio
	// connection.
	end func()
}

func newTestClient(t *testing.T) *testClient {
	return &testClient{t: t, waiting: map[string]chan wireMsg{}, noted: make(chan struct{}, 1)}
}

// stdioClient serves a session of g over in-process pipes.
func stdioClient(t *testing.T, g *Gateway, agent string) *testClient {
	c := newTestClient(t)
	toGW, fromClient := io.Pipe()
	fromGW, toClient := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.ServeStdio(ctx, toGW, toClient, agent)
		toClient.Close()
	}()
	var wmu sync.Mutex
	c.post = func(msg []byte) {
		wmu.Lock()
		defer wmu.Unlock()
		_, _ = fromClient.Write(append(append([]byte{}, msg...), '\n'))
	}
	go func() {
		sc := bufio.NewScanner(fromGW)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			c.receive(sc.Bytes())
		}
	}()
	var once sync.Once
	c.end = func() { once.Do(func() { cancel(); fromClient.Close(); <-done }) }
	t.Cleanup(c.end)
	return c
}

// httpClient is a session over the HTTP front at url, with a bearer token. Like most
// clients, it opens the session's stream after initialize.
func httpClient(t *testing.T, url, token string) *testClient {
	return httpClientStream(t, url, token, true)
}

func httpClientStream(t *testing.T, url, token string, openStream bool) *testClient {
	c := newTestClient(t)
	var mu sync.Mutex
	var sessionID string
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	do := func(method string, body []byte) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		mu.Lock()
		if sessionID != "" {
			req.Header.Set("Mcp-Session-Id", sessionID)
		}
		mu.Unlock()
		return http.DefaultClient.Do(req)
	}
	c.end = func() {
		if resp, err := do(http.MethodDelete, nil); err == nil {
			resp.Body.Close()
		}
	}
	c.post = func(msg []byte) {
		go func() {
			resp, err := do(http.MethodPost, msg)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
				mu.Lock()
				first := sessionID == ""
				sessionID = id
				mu.Unlock()
				if first && openStream { // the session's own stream
					go func() {
						resp, err := do(http.MethodGet, nil)
						if err == nil {
							defer resp.Body.Close()
							c.readSSE(resp.Body)
						}
					}()
				}
			}
			if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				c.readSSE(resp.Body)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			if len(bytes.TrimSpace(b)) > 0 {
				c.receive(b)
			}
		}()
	}
	return c
}

// readSSE reads events as a client does: an event is its data lines, taken when
// the blank line that ends it arrives. One cut short (the stream closed as the
// test ends) is dropped, as the SSE specification says.
func (c *testClient) readSSE(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if len(data) > 0 {
				c.receive([]byte(strings.Join(data, "\n")))
			}
			data = nil
			continue
		}
		if d, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(d, " "))
		}
	}
}

type wireMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *RPCError       `json:"error"`
}

func (c *testClient) receive(b []byte) {
	c.mu.Lock()
	c.seen.Write(b)
	c.seen.WriteByte('\n')
	c.mu.Unlock()
	var batch []wireMsg
	if json.Unmarshal(b, &batch) != nil {
		var m wireMsg
		if err := json.Unmarshal(b, &m); err != nil {
			c.t.Errorf("the gateway sent a line that is not JSON-RPC: %q", b)
			return
		}
		batch = []wireMsg{m}
	}
	for _, m := range batch {
		switch {
		case m.Method != "" && len(m.ID) > 0:
			go c.serveRequest(m)
		case m.Method != "":
			c.mu.Lock()
			c.notes = append(c.notes, m)
			c.mu.Unlock()
			select {
			case c.noted <- struct{}{}:
			default:
			}
		default:
			c.mu.Lock()
			ch := c.waiting[string(m.ID)]
			delete(c.waiting, string(m.ID))
			c.mu.Unlock()
			if ch != nil {
				ch <- m
			}
		}
	}
}

func (c *testClient) serveRequest(m wireMsg) {
	var result any
	var rpcErr *RPCError
	if c.answer != nil {
		result, rpcErr = c.answer(m.Method, m.Params)
	} else {
		rpcErr = &RPCError{Code: jsonrpc.CodeMethodNotFound, Message: "the test client answers nothing"}
	}
	resp := map[string]any{"jsonrpc": "2.0", "id": m.ID}
	if rpcErr != nil {
		resp["error"] = rpcErr
	} else {
		resp["result"] = result
	}
	b, _ := json.Marshal(resp)
	c.post(b)
}

// request sends a request and waits for its response.
func (c *testClient) request(method string, params any) wireMsg {
	c.t.Helper()
	return c.requestWithin(method, params, 10*time.Second)
}

// requestWithin is request for a call that may take up to d.
func (c *testClient) requestWithin(method string, params any, d time.Duration) wireMsg {
	c.t.Helper()
	c.mu.Lock()
	c.nextID++
	id := fmt.Sprintf(`"c%d"`, c.nextID)
	ch := make(chan wireMsg, 1)
	c.waiting[id] = ch
	c.mu.Unlock()
	msg := map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method}
	if params != nil {
		msg["params"] = params
	}
	b, _ := json.Marshal(msg)
	c.post(b)
	select {
	case m := <-ch:
		return m
	case <-time.After(d):
		c.t.Fatalf("no answer to %s within %s", method, d)
		return wireMsg{}
	}
}

func (c *testClient) notify(method string, params any) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	c.post(b)
}

// initialize opens the session, declaring sampling and roots.
func (c *testClient) initialize(name string) {
	c.t.Helper()
	c.initializeWith(name, map[string]any{"sampling": map[string]any{}, "roots": map[string]any{"listChanged": true}})
}

// initializeWith opens the session, declaring caps.
func (c *testClient) initializeWith(name string, caps map[string]any) {
	c.t.Helper()
	m := c.request("initialize", map[string]any{
		"protocolVersion": "2025-11-25", "clientInfo": map[string]any{"name": name, "version": "1"},
		"capabilities": caps,
	})
	if m.Error != nil {
		c.t.Fatalf("initialize: %v", m.Error)
	}
	c.notify("notifications/initialized", map[string]any{})
}

// notesOf returns the notifications of method received so far.
func (c *testClient) notesOf(method string) []wireMsg {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []wireMsg
	for _, n := range c.notes {
		if n.Method == method {
			out = append(out, n)
		}
	}
	return out
}

// waitNote waits until a notification of method that satisfies ok arrives.
func (c *testClient) waitNote(method string, ok func(wireMsg) bool) bool {
	deadline := time.After(5 * time.Second)
	for {
		for _, n := range c.notesOf(method) {
			if ok == nil || ok(n) {
				return true
			}
		}
		select {
		case <-c.noted:
		case <-deadline:
			return false
		}
	}
}

func (c *testClient) received() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen.String()
}

// names lists the value of key in each item of a list result's field.
func names(t *testing.T, m wireMsg, field, key string) []string {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("listing %s: %v", field, m.Error)
	}
	var res map[string][]map[string]any
	if err := json.Unmarshal(m.Result, &res); err != nil {
		t.Fatalf("decoding %s: %v", field, err)
	}
	var out []string
	for _, it := range res[field] {
		out = append(out, fmt.Sprint(it[key]))
	}
	return out
}
