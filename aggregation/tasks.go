package aggregation

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/upstream"
)

// This file carries the tasks of protocol 2025-11-25 (a task-augmented tools/call,
// then tasks/get, tasks/result, tasks/list and tasks/cancel) to the child that owns
// them. A child's task id never reaches a client: the client is given a random
// opaque id of the gateway's, which maps to (server, the child's id) and is honoured
// only for the agent and session that created the task. Children list every task
// they hold, whoever made it; tasks/list is therefore answered by the gateway from
// its own routes, so a client sees its own tasks and nobody else's.

// maxTasksPerSession bounds the task routes one session holds: the gateway's memory
// for them stays bounded whatever a client creates.
const maxTasksPerSession = 1000

// taskRoute is one task a client created through the gateway.
type taskRoute struct {
	id      string // the gateway's id, the one the client knows
	server  string
	child   string // the child's own id
	s       *session
	agent   string
	tool    *Tool     // the tool it runs: policy is decided again on every use
	seq     int       // creation order, for tasks/list
	expires time.Time // zero: kept until its session ends
	// bridged says the child runs the task under the tasks extension of
	// 2026-07-28 for this legacy client (tasks_bridge.go).
	bridged bool
}

// taskRoutes holds the gateway's task routes.
type taskRoutes struct {
	mu   sync.Mutex
	seq  int
	byID map[string]*taskRoute
}

// add records a task a child created for session s and returns the id the client
// gets, or an error when the session holds its maximum.
func (tr *taskRoutes) add(s *session, t *Tool, childID string, ttl time.Duration) (string, error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := "nexus-task-" + hex.EncodeToString(b[:])
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, r := range tr.byID {
		if r.s == s {
			n++
		}
	}
	if n >= maxTasksPerSession {
		return "", fmt.Errorf("this session holds its maximum of %d tasks; let some expire", maxTasksPerSession)
	}
	if tr.byID == nil {
		tr.byID = map[string]*taskRoute{}
	}
	tr.seq++
	r := &taskRoute{id: id, server: t.Server, child: childID, s: s, agent: s.agent, tool: t, seq: tr.seq}
	if ttl > 0 {
		r.expires = time.Now().Add(ttl)
	}
	tr.byID[id] = r
	return id, nil
}

// lookup is the route of id when it belongs to session s (and so to its agent).
func (tr *taskRoutes) lookup(id string, s *session) *taskRoute {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	r := tr.byID[id]
	if r == nil || r.s != s || r.agent != s.agent {
		return nil
	}
	return r
}

// of lists the routes of session s in creation order.
func (tr *taskRoutes) of(s *session) []*taskRoute {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []*taskRoute
	for _, r := range tr.byID {
		if r.s == s {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *taskRoute) int { return a.seq - b.seq })
	return out
}

// byChild is the route of a child's task id on server, for its status notifications.
func (tr *taskRoutes) byChild(server, childID string) *taskRoute {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, r := range tr.byID {
		if r.server == server && r.child == childID {
			return r
		}
	}
	return nil
}

// markBridged marks the route of id as a bridged task.
func (tr *taskRoutes) markBridged(id string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if r := tr.byID[id]; r != nil {
		r.bridged = true
	}
}

func (tr *taskRoutes) remove(id string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	delete(tr.byID, id)
}

// dropSession forgets the tasks of a session that ended: their ids are honoured for
// that session only.
func (tr *taskRoutes) dropSession(s *session) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for id, r := range tr.byID {
		if r.s == s {
			delete(tr.byID, id)
		}
	}
}

// sweep forgets tasks past the time to live their child gave them.
func (tr *taskRoutes) sweep(now time.Time) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for id, r := range tr.byID {
		if !r.expires.IsZero() && now.After(r.expires) {
			delete(tr.byID, id)
		}
	}
}

// callTask is a task-augmented tools/call: the tool is resolved and decided by
// policy as any call, then sent to its child with the client's task params. Memory
// is not consulted: the answer is a task of this client's, not a result to share.
// The child's task id in the answer is replaced with the gateway's.
func (g *Gateway) callTask(ctx context.Context, c *caller, p callParams) (raw json.RawMessage, rpcErr *RPCError) {
	s := c.s
	rec := &Call{Start: time.Now(), Method: "tools/call", Agent: s.agent, Requested: p.Name, Arguments: p.Arguments}
	rec.by(s)
	defer func() {
		rec.finish(raw, rpcErr)
		g.observe(rec)
	}()
	t, err := g.resolveTool(ctx, g.agentAudience(s.agent), p.Name)
	if err != nil {
		var down *notRunningError
		if errors.As(err, &down) {
			rec.Server = down.st.Name
			return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: down.Error()}
		}
		return nil, err.(*RPCError)
	}
	rec.resolved(t)
	args, rpcErr := arguments(t, p.Arguments)
	if rpcErr != nil {
		return nil, rpcErr
	}
	rec.Arguments = args
	if refused := g.taskRefusal("tools/call", s, t, rec); refused != nil {
		return nil, refused
	}
	var token string
	if progress := p.progressToken(); progress != nil {
		token = g.progress.add(t.Server, progress, c)
		defer g.progress.release(token)
	}
	params := callRequest(t.Name, args, passMeta(p.Meta), token)
	if ch := g.kids()[t.Server]; ch != nil {
		if bridgesTasks(ch.connected(ctx)) {
			return g.callBridgedTask(ctx, c, t, params)
		}
	}
	params = append(params[:len(params)-1], `,"task":`...) // the object reopened for the task
	params = append(append(params, p.Task...), '}')
	raw, rpcErr = g.taskRequest(ctx, c, t.Server, "tools/call", params)
	if rpcErr != nil {
		return nil, rpcErr
	}
	var created struct {
		Task struct {
			TaskID string      `json:"taskId"`
			TTL    json.Number `json:"ttl"`
		} `json:"task"`
	}
	if json.Unmarshal(raw, &created) != nil || created.Task.TaskID == "" {
		return raw, nil // the child ran the call at once: its result is the answer
	}
	ttl, _ := taskLife(created.Task.TTL)
	id, err := g.tasks.add(s, t, created.Task.TaskID, ttl)
	if err != nil {
		return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: err.Error()}
	}
	return renameTask(raw, created.Task.TaskID, id), nil
}

// taskRefusal decides the agent's policy for the tool a task runs: nil when allowed,
// else the JSON-RPC error that names the rule. Unlike a plain call's refusal (an
// isError result) it is an error: a task request has no tool result to carry it. rec
// is the call being observed, if any; a refused tasks/* request is observed on its
// own, like a refused prompt or resource.
func (g *Gateway) taskRefusal(method string, s *session, t *Tool, rec *Call) *RPCError {
	agent := s.agent
	d := g.pol.Load().Decide(agent, t.policyTool())
	g.denials.Record(d)
	if rec != nil {
		rec.decided(d)
	}
	if d.Allowed {
		return nil
	}
	g.log.Info("policy: task refused", "agent", agent, "tool", t.Canonical, "rule", d.Rule, "origin", d.Origin)
	if rec == nil {
		rec = &Call{Start: time.Now(), Method: method, Agent: agent, Tool: t.Canonical, Server: t.Server, Requested: t.Canonical}
		rec.decided(d)
		g.observe(rec)
	}
	return &RPCError{Code: jsonrpc.CodeInvalidParams, Message: toldTo(s, d).Message()}
}

// taskRequest sends one task request to a child as the call of c: what the child asks
// the client meanwhile (an input_required task's elicitation) finds its way back.
func (g *Gateway) taskRequest(ctx context.Context, c *caller, server, method string, params any) (json.RawMessage, *RPCError) {
	return g.taskRequestWith(ctx, c, server, method, params, upstream.Outgoing{})
}

// taskRequestWith is taskRequest with what the request carries besides its params.
func (g *Gateway) taskRequestWith(ctx context.Context, c *caller, server, method string, params any, out upstream.Outgoing) (json.RawMessage, *RPCError) {
	ch := g.kids()[server]
	if ch == nil {
		return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: fmt.Sprintf("server %s was removed from the config", server)}
	}
	ctx, cancel := context.WithTimeoutCause(ctx, ch.config().CallTimeout(), errCallTimeout)
	defer cancel()
	cn, err := ch.connFor(ctx, c)
	if err != nil {
		return nil, connError(err)
	}
	ctx = withCaller(ctx, cn, c)
	_, remove := cn.callers.add(c)
	defer remove()
	raw, err := cn.RequestWith(ctx, method, params, out)
	if err != nil {
		return nil, g.childError(ctx, server, method, err)
	}
	return g.fromChild(raw), nil
}

// taskTool is the tool a task runs as the manifest has it now (a reload may have
// changed its annotations, and with them what @readonly allows), else as it was
// when the task was created.
func (g *Gateway) taskTool(rt *taskRoute) *Tool {
	if t := g.lists.current().lookup(rt.tool.Canonical); t != nil && t.Server == rt.server {
		return t
	}
	return rt.tool
}

// taskMethod is tasks/get, tasks/result or tasks/cancel: the client's task id is
// honoured for its own session only, the policy for the task's tool is decided
// again, and the child is asked under its own id.
func taskMethod(method string) method {
	return func(ctx context.Context, s *session, params json.RawMessage, r sink) (json.RawMessage, *RPCError) {
		var fields map[string]json.RawMessage
		var id string
		if json.Unmarshal(params, &fields) != nil || json.Unmarshal(fields["taskId"], &id) != nil || id == "" {
			return nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: method + ` params must be {"taskId": "<id>"}`}
		}
		rt := s.g.tasks.lookup(id, s)
		if rt == nil {
			return nil, unknownTask(id)
		}
		if refused := s.g.taskRefusal(method, s, s.g.taskTool(rt), nil); refused != nil {
			return nil, refused
		}
		if rt.bridged {
			return s.g.bridgedTaskMethod(ctx, &caller{s: s, r: r}, rt, method)
		}
		fields["taskId"] = mustMarshal(rt.child)
		passFieldsMeta(fields)
		raw, rpcErr := s.g.taskRequest(ctx, &caller{s: s, r: r}, rt.server, method, fields)
		if rpcErr != nil {
			if method == "tasks/get" && rpcErr.Code == jsonrpc.CodeInvalidParams {
				s.g.tasks.remove(rt.id) // the child no longer knows the task
			}
			return nil, renameTaskError(rpcErr, rt.child, rt.id)
		}
		return renameTask(raw, rt.child, rt.id), nil
	}
}

// listTaskReads bounds the tasks/get requests one tasks/list has in flight.
const listTaskReads = 8

// listTasks is tasks/list: the caller's own tasks whose tools its policy still
// allows, each as its child reports it now. A task its child no longer knows is
// forgotten. Every task is on the one page.
func listTasks(ctx context.Context, s *session, _ json.RawMessage, r sink) (json.RawMessage, *RPCError) {
	routes := s.g.tasks.of(s)
	tasks := make([]json.RawMessage, len(routes))
	pol := s.g.pol.Load()
	slots := make(chan struct{}, listTaskReads)
	var wg sync.WaitGroup
	for i, rt := range routes {
		if !pol.Decide(s.agent, s.g.taskTool(rt).policyTool()).Allowed {
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if rt.bridged {
				if task, rpcErr := s.g.bridgedTask(ctx, &caller{s: s, r: r}, rt, "tasks/get"); rpcErr == nil {
					tasks[i] = task.legacy()
				}
				return
			}
			raw, rpcErr := s.g.taskRequest(ctx, &caller{s: s, r: r}, rt.server, "tasks/get", map[string]string{"taskId": rt.child})
			if rpcErr != nil {
				if rpcErr.Code == jsonrpc.CodeInvalidParams {
					s.g.tasks.remove(rt.id)
				}
				return
			}
			tasks[i] = withoutMeta(renameTask(raw, rt.child, rt.id))
		})
	}
	wg.Wait()
	out := make([]json.RawMessage, 0, len(tasks))
	for _, t := range tasks {
		if t != nil {
			out = append(out, t)
		}
	}
	raw, err := json.Marshal(map[string]any{"tasks": out})
	if err != nil {
		return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: fmt.Sprintf("encoding tasks/list: %v", err)}
	}
	return raw, nil
}

// deliverTaskStatus forwards a child's notifications/tasks/status to the session
// whose task it is, under the gateway's id; a status of a task no client made
// through the gateway goes nowhere.
func (g *Gateway) deliverTaskStatus(server string, params json.RawMessage) {
	var p struct {
		TaskID string `json:"taskId"`
	}
	if json.Unmarshal(params, &p) != nil || p.TaskID == "" {
		return
	}
	rt := g.tasks.byChild(server, p.TaskID)
	if rt == nil {
		return
	}
	if rt.bridged {
		task, rpcErr := decodeModernTask(server, params)
		if rpcErr != nil {
			return
		}
		task.TaskID = rt.id
		rt.s.push(jsonrpc.Notification("notifications/tasks/status", task.legacy()))
		return
	}
	rt.s.push(jsonrpc.Notification("notifications/tasks/status", renameTask(params, rt.child, rt.id)))
}

// unknownTask is the answer to a task id the caller does not own: the same whether
// the id is another session's or no one's, so an id's existence is not told.
func unknownTask(id string) *RPCError {
	return &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown task %s: no task of this session has that id (tasks/list shows them)", quoted(id))}
}

// relatedTaskKey is the _meta member by which a result names the task it belongs to.
const relatedTaskKey = "io.modelcontextprotocol/related-task"

// renameTask replaces the child's task id with the gateway's where the protocol puts
// one: the result's own taskId (a task), its task's (a created task), and its _meta's
// related task. Every other member keeps the child's bytes.
func renameTask(raw json.RawMessage, from, to string) json.RawMessage {
	if from == to || !bytes.Contains(raw, mustMarshal(from)) {
		return raw
	}
	top, ok := renameIn(raw, from, to)
	if !ok {
		return raw
	}
	for _, key := range []string{"task", "_meta"} {
		m, ok := renameIn(top[key], from, to)
		if !ok {
			continue
		}
		if key == "_meta" {
			if r, ok := renameIn(m[relatedTaskKey], from, to); ok {
				m[relatedTaskKey] = mustMarshal(r)
			}
		}
		top[key] = mustMarshal(m)
	}
	out, err := json.Marshal(top)
	if err != nil {
		return raw
	}
	return out
}

// renameIn decodes an object's members, its taskId replaced when it is from; ok is
// false when raw is not an object.
func renameIn(raw json.RawMessage, from, to string) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return nil, false
	}
	var id string
	if json.Unmarshal(m["taskId"], &id) == nil && id == from {
		m["taskId"] = mustMarshal(to)
	}
	return m, true
}

// renameTaskError keeps a child's error but never with its own task id in it.
func renameTaskError(e *RPCError, from, to string) *RPCError {
	out := *e
	out.Message = string(bytes.ReplaceAll([]byte(e.Message), []byte(from), []byte(to)))
	if out.Data != nil {
		if raw, err := json.Marshal(out.Data); err == nil {
			var clean any
			if json.Unmarshal(bytes.ReplaceAll(raw, []byte(from), []byte(to)), &clean) == nil {
				out.Data = clean
			}
		}
	}
	return &out
}

// withoutMeta is a tasks/get result as a member of tasks/list: the task alone.
func withoutMeta(raw json.RawMessage) json.RawMessage {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return raw
	}
	if _, ok := fields["_meta"]; !ok {
		return raw
	}
	delete(fields, "_meta")
	out, err := json.Marshal(fields)
	if err != nil {
		return raw
	}
	return out
}

func mustMarshal(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
