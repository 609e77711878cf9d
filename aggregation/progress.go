package aggregation

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"time"
)

// progressLinger keeps a route open briefly after its call ends: a child may write its
// last progress notification after its response (mcp-go's stdio server does).
const progressLinger = 2 * time.Second

// progressRoutes maps the progress tokens the gateway gives children back to the
// client's own token and connection. Children never see a client's token, so two
// clients that both use token 1 cannot receive each other's progress.
type progressRoutes struct {
	mu     sync.Mutex
	next   int64
	routes map[string]*progressRoute
}

type progressRoute struct {
	client  any // the client's token, decoded exactly (json.Number for numbers)
	notify  notifyFunc
	expires time.Time // zero while the call runs
}

func newProgressRoutes() *progressRoutes {
	return &progressRoutes{routes: map[string]*progressRoute{}}
}

func (p *progressRoutes) add(clientToken json.RawMessage, notify notifyFunc) string {
	dec := json.NewDecoder(bytes.NewReader(clientToken))
	dec.UseNumber()
	var tok any
	_ = dec.Decode(&tok)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	token := "nexus-progress-" + strconv.FormatInt(p.next, 10)
	p.routes[token] = &progressRoute{client: tok, notify: notify}
	return token
}

func (p *progressRoutes) release(token string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.routes[token]; r != nil {
		r.expires = time.Now().Add(progressLinger)
	}
}

// deliver forwards a child's progress notification to the client that owns the token.
func (p *progressRoutes) deliver(params map[string]any) {
	token, _ := params["progressToken"].(string)
	p.mu.Lock()
	r := p.routes[token]
	p.mu.Unlock()
	if r == nil {
		return
	}
	out := make(map[string]any, len(params))
	for k, v := range params {
		out[k] = v
	}
	out["progressToken"] = r.client
	r.notify("notifications/progress", out)
}

func (p *progressRoutes) sweep(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			p.mu.Lock()
			for tok, r := range p.routes {
				if !r.expires.IsZero() && now.After(r.expires) {
					delete(p.routes, tok)
				}
			}
			p.mu.Unlock()
		}
	}
}

// inflightCalls lets a client's notifications/cancelled reach the call it names.
type inflightCalls struct {
	mu sync.Mutex
	m  map[string]context.CancelFunc
}

func newInflightCalls() *inflightCalls { return &inflightCalls{m: map[string]context.CancelFunc{}} }

func inflightKey(session string, id json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, id) != nil {
		return session + "\x00" + string(id)
	}
	return session + "\x00" + b.String()
}

func (f *inflightCalls) add(session string, id json.RawMessage, cancel context.CancelFunc) (remove func()) {
	k := inflightKey(session, id)
	f.mu.Lock()
	f.m[k] = cancel
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		delete(f.m, k)
		f.mu.Unlock()
	}
}

// cancel handles notifications/cancelled: params.requestId names the call.
func (f *inflightCalls) cancel(session string, params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.RequestID) == 0 {
		return
	}
	f.mu.Lock()
	cancel := f.m[inflightKey(session, p.RequestID)]
	f.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}
