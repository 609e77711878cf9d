package aggregation

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/upstream"
)

// This file lets a 2025-11-25 client run a tool as a task on a child spoken
// 2026-07-28 that offers the tasks extension (tasks_ext.go). The two eras name
// the same task differently: the legacy CreateTaskResult holds it under "task",
// with "ttl" and "pollInterval"; the extension's is the result itself, with
// "resultType": "task", "ttlMs" and "pollIntervalMs". The extension has no
// tasks/result: its tasks/get carries the result once the task is done. So the
// legacy client's task-augmented call goes to the child declaring the extension,
// its answers are reshaped, and its tasks/result polls the child's tasks/get
// until the task ends, as a legacy server's tasks/result waits. A task that
// needs its client's input (input_required) is one a legacy client cannot be
// bridged into: its tasks/result says so.

// bridgesTasks reports whether cn is a 2026-07-28 connection that offers the tasks
// extension: a legacy client's task then needs the bridge.
func bridgesTasks(cn *conn) bool {
	return cn != nil && cn.Dialect().Extension(tasksExtension)
}

// terminal reports whether a task status ends the task.
func terminal(status string) bool {
	return status == "completed" || status == "failed" || status == "cancelled"
}

// modernTask is a task as the extension reports it (a CreateTaskResult or a
// tasks/get result).
type modernTask struct {
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage,omitempty"`
	CreatedAt      string          `json:"createdAt,omitempty"`
	LastUpdatedAt  string          `json:"lastUpdatedAt,omitempty"`
	TTLMs          json.Number     `json:"ttlMs,omitempty"`
	PollIntervalMs json.Number     `json:"pollIntervalMs,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          *RPCError       `json:"error,omitempty"`
}

// pollInterval is the interval the child asks to be polled at, within a day.
func (t modernTask) pollInterval() (time.Duration, bool) {
	ms, err := strconv.ParseFloat(string(t.PollIntervalMs), 64)
	if err != nil || ms < 0 || math.IsNaN(ms) {
		return 0, false
	}
	return time.Duration(min(ms, float64((24*time.Hour).Milliseconds()))) * time.Millisecond, true
}

// legacy is the task as a 2025-11-25 client knows it.
func (t modernTask) legacy() json.RawMessage {
	out := map[string]any{"taskId": t.TaskID, "status": t.Status, "ttl": nil}
	if life, ok := taskLife(t.TTLMs); ok {
		out["ttl"] = life.Milliseconds()
	}
	if t.StatusMessage != "" {
		out["statusMessage"] = t.StatusMessage
	}
	if t.CreatedAt != "" {
		out["createdAt"] = t.CreatedAt
	}
	if t.LastUpdatedAt != "" {
		out["lastUpdatedAt"] = t.LastUpdatedAt
	}
	if ms, ok := t.pollInterval(); ok {
		out["pollInterval"] = ms.Milliseconds()
	}
	return mustMarshal(out)
}

// decodeModernTask reads a child's task; an answer that is not one is an error
// that names the server.
func decodeModernTask(server string, raw json.RawMessage) (modernTask, *RPCError) {
	var t modernTask
	if err := json.Unmarshal(raw, &t); err != nil || t.TaskID == "" || t.Status == "" {
		return t, &RPCError{Code: jsonrpc.CodeInternal, Message: fmt.Sprintf("server %s answered a task request with something that is not a task", server)}
	}
	return t, nil
}

// callBridgedTask sends a legacy client's task-augmented call to a child that
// speaks the tasks extension, and answers with the legacy CreateTaskResult. A
// child that runs the call at once answers with its result, which is the answer.
func (g *Gateway) callBridgedTask(ctx context.Context, c *caller, t *Tool, params json.RawMessage) (json.RawMessage, *RPCError) {
	raw, rpcErr := g.taskRequestWith(ctx, c, t.Server, "tools/call", params, upstream.Outgoing{Extensions: []string{tasksExtension}})
	if rpcErr != nil {
		return nil, rpcErr
	}
	if resultTypeOf(raw) != "task" {
		return raw, nil
	}
	task, rpcErr := decodeModernTask(t.Server, raw)
	if rpcErr != nil {
		return nil, rpcErr
	}
	life, _ := taskLife(task.TTLMs)
	id, err := g.tasks.add(c.s, t, task.TaskID, life)
	if err != nil {
		return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: err.Error()}
	}
	g.tasks.markBridged(id)
	task.TaskID = id
	return mustMarshal(map[string]json.RawMessage{"task": task.legacy()}), nil
}

// bridgedTaskMethod answers a legacy tasks/get, tasks/cancel or tasks/result for a
// bridged task (the route's policy was decided by the caller).
func (g *Gateway) bridgedTaskMethod(ctx context.Context, c *caller, rt *taskRoute, method string) (json.RawMessage, *RPCError) {
	switch method {
	case "tasks/result":
		return g.bridgedTaskResult(ctx, c, rt)
	case "tasks/get", "tasks/cancel":
		task, rpcErr := g.bridgedTask(ctx, c, rt, method)
		if rpcErr != nil {
			return nil, rpcErr
		}
		return task.legacy(), nil
	}
	return nil, &RPCError{Code: jsonrpc.CodeMethodNotFound, Message: method + " is not a task method"}
}

// bridgedTask asks the child for the task (tasks/get) or cancels it, and returns
// it under the gateway's id.
func (g *Gateway) bridgedTask(ctx context.Context, c *caller, rt *taskRoute, method string) (modernTask, *RPCError) {
	raw, rpcErr := g.taskRequestWith(ctx, c, rt.server, method, map[string]string{"taskId": rt.child}, upstream.Outgoing{Extensions: []string{tasksExtension}})
	if rpcErr != nil {
		if method == "tasks/get" && rpcErr.Code == jsonrpc.CodeInvalidParams {
			g.tasks.remove(rt.id) // the child no longer knows the task
		}
		return modernTask{}, renameTaskError(rpcErr, rt.child, rt.id)
	}
	task, rpcErr := decodeModernTask(rt.server, raw)
	if rpcErr != nil {
		return task, rpcErr
	}
	task.TaskID = rt.id
	return task, nil
}

// Bounds on how often tasks/result asks a bridged task's child how it is going.
const (
	minTaskPoll = 10 * time.Millisecond
	maxTaskPoll = 5 * time.Second
)

// bridgedTaskResult is a legacy tasks/result: it waits, polling the child at the
// interval the child asks for, until the task ends, then answers with its result
// (or its error), related to the task as a legacy server's answer is.
func (g *Gateway) bridgedTaskResult(ctx context.Context, c *caller, rt *taskRoute) (json.RawMessage, *RPCError) {
	for {
		task, rpcErr := g.bridgedTask(ctx, c, rt, "tasks/get")
		if rpcErr != nil {
			return nil, rpcErr
		}
		switch {
		case task.Status == "input_required":
			return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: fmt.Sprintf(
				"task %s needs its client's input, and server %s asks for it the 2026-07-28 way, which a 2025-11-25 session cannot answer: connect with protocol version 2026-07-28, or cancel the task", quoted(rt.id), rt.server)}
		case task.Status == "cancelled":
			return nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("task %s was cancelled", quoted(rt.id))}
		case task.Error != nil:
			return nil, renameTaskError(task.Error, rt.child, rt.id)
		case terminal(task.Status):
			if len(task.Result) == 0 {
				return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: fmt.Sprintf("server %s ended task %s (%s) without a result", rt.server, quoted(rt.id), task.Status)}
			}
			return withRelatedTask(task.Result, rt.id), nil
		}
		wait := minTaskPoll
		if d, ok := task.pollInterval(); ok {
			wait = min(max(d, minTaskPoll), maxTaskPoll)
		}
		c.letGo()
		if !sleep(ctx, wait) {
			return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: fmt.Sprintf("waiting for task %s: %v", quoted(rt.id), context.Cause(ctx))}
		}
	}
}

// withRelatedTask is a task's result with its _meta naming the task, as a legacy
// tasks/result carries it.
func withRelatedTask(raw json.RawMessage, id string) json.RawMessage {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || fields == nil {
		return raw
	}
	var meta map[string]json.RawMessage
	_ = json.Unmarshal(fields["_meta"], &meta)
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	meta[relatedTaskKey] = mustMarshal(map[string]string{"taskId": id})
	fields["_meta"] = marshal(meta)
	delete(fields, "resultType")
	return marshal(fields)
}
