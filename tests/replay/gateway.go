package replay

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/run"
)

// gateway is a gateway built as `nexus serve` builds it, in a home of its
// own, with the replay children as its servers.
type gateway struct {
	rt     *run.Runtime
	cfg    *config.Config
	home   string
	ctx    context.Context
	cancel context.CancelFunc
}

// startGateway builds the gateway of the children in home and waits for
// it to connect them.
func startGateway(ctx context.Context, ch *children, home string) (*gateway, error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(home, "config.json")
	if err := os.WriteFile(path, ch.config(), 0o600); err != nil {
		return nil, err
	}
	cfg, err := config.Load([]string{path}, nil)
	if err != nil {
		return nil, fmt.Errorf("replay config: %w", err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rt, err := run.Build(ctx, cfg, run.Env{Home: home, Logger: log}, run.Options{})
	if err != nil {
		return nil, fmt.Errorf("replay gateway: %w", err)
	}
	gctx, cancel := context.WithCancel(ctx)
	return &gateway{rt: rt, cfg: cfg, home: home, ctx: gctx, cancel: cancel}, nil
}

// clear forgets everything the gateway remembered, from another memory
// on its database, as `nexus cache clear` does: the gateway sees it at
// its next call.
func (g *gateway) clear(ctx context.Context) error {
	m, err := run.OpenMemory(ctx, g.cfg, run.Env{Home: g.home, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	defer m.Close()
	if _, err := m.Clear(ctx, "", ""); err != nil {
		return fmt.Errorf("clearing memory: %w", err)
	}
	return nil
}

func (g *gateway) close() {
	g.cancel()
	g.rt.Close()
}

// session is one client session on the gateway's stdio front.
type session struct {
	in    *io.PipeWriter // the client writes requests here
	out   *bufio.Reader  // and reads the gateway's messages here
	done  chan struct{}
	next  int
	tools map[string]string // the child's tool name (sN/tN) -> the name the client calls
}

// session opens a client session: initialize, then tools/list.
func (g *gateway) session() (*session, error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &session{in: inW, out: bufio.NewReaderSize(outR, 1<<20), done: make(chan struct{}), tools: map[string]string{}}
	go func() {
		defer close(s.done)
		g.rt.ServeStdio(g.ctx, inR, outW, "replay")
		outW.Close()
	}()
	if _, err := s.request("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]string{"name": "replay", "version": "1"}}); err != nil {
		s.close()
		return nil, err
	}
	if err := s.write(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); err != nil {
		s.close()
		return nil, err
	}
	res, err := s.request("tools/list", map[string]any{})
	if err != nil {
		s.close()
		return nil, err
	}
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(res, &list); err != nil {
		s.close()
		return nil, err
	}
	for _, t := range list.Tools {
		srv, tool, _ := strings.Cut(t.Name, "__") // "<server>__<tool>": sN__tN
		s.tools[srv+"/"+tool] = t.Name
	}
	return s, nil
}

// close ends the session: the end of its input, then whatever the
// gateway still writes read and dropped until it is done.
func (s *session) close() {
	s.in.Close()
	go io.Copy(io.Discard, s.out)
	<-s.done
}

func (s *session) write(msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	_, err = s.in.Write(append(b, '\n'))
	return err
}

// request sends a request and returns its result, answering the
// gateway's pings and skipping its notifications meanwhile.
func (s *session) request(method string, params any) (json.RawMessage, error) {
	s.next++
	id := s.next
	if err := s.write(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}); err != nil {
		return nil, err
	}
	for {
		line, err := s.out.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("%s: reading the answer: %w", method, err)
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		switch {
		case m.Method != "" && len(m.ID) > 0: // the gateway asks: only ping is expected
			if err := s.write(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{}}); err != nil {
				return nil, err
			}
		case m.Method != "": // a notification
		case string(m.ID) == fmt.Sprint(id):
			if m.Error != nil {
				return nil, fmt.Errorf("%s: error %d: %s", method, m.Error.Code, m.Error.Message)
			}
			return m.Result, nil
		}
	}
}

// served is what the replay reads of a tools/call result.
type served struct {
	Meta struct {
		Cache struct {
			Status   string   `json:"status"`
			Rewrites []string `json:"rewrites"`
			Matched  string   `json:"matched"`
		} `json:"nexus/cache"`
	} `json:"_meta"`
	Structured struct {
		SHA1    string `json:"sha1"`
		Session string `json:"session"`
	} `json:"structuredContent"`
}

// call makes the recorded call c, the children expecting it, and returns
// what was served and how long the call took through the gateway.
func (s *session) call(ch *children, c Call) (served, time.Duration, error) {
	spec := ch.spec(c)
	name, ok := s.tools[spec.server+"/"+spec.name]
	if !ok {
		return served{}, 0, fmt.Errorf("tool %s/%s not listed", spec.server, spec.name)
	}
	args := c.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	ch.expect.Store(&c)
	start := time.Now()
	res, err := s.request("tools/call", map[string]any{"name": name, "arguments": args})
	took := time.Since(start)
	if err != nil {
		return served{}, took, err
	}
	var out served
	if err := json.Unmarshal(res, &out); err != nil {
		return served{}, took, err
	}
	return out, took, nil
}
