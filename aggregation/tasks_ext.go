package aggregation

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nexus-mcp/nexus/internal/jsonrpc"
)

// This file carries the tasks extension of 2026-07-28 (io.modelcontextprotocol/tasks)
// between modern clients and the children that offer it. A child that is told its
// client takes tasks may answer a tools/call with a task (resultType "task"), which
// the client then polls (tasks/get), answers (tasks/update) or cancels
// (tasks/cancel). The task id a client is given is a handle sealed by Nexus: it names
// the server, the child's own id, the agent and the tool, so that any replica sharing
// the state key routes it, another agent's use of it is refused, and the tool's
// policy is decided again on every use. Nexus keeps nothing per task.

// tasksExtension names the extension in capabilities.
const tasksExtension = "io.modelcontextprotocol/tasks"

// stateTask is the kind of a sealed task handle (requestState's kinds are in mrtr.go).
const stateTask = "task"

// taskHandleLife is how long a task handle is honoured when the child gives the
// task no ttl.
const taskHandleLife = 24 * time.Hour

// offersTasks reports whether a child of the gateway offers the tasks extension.
func (g *Gateway) offersTasks() bool {
	for _, c := range g.kids() {
		if caps, ok := c.knownCaps(); ok {
			if _, ok := caps.Extensions[tasksExtension]; ok {
				return true
			}
		}
	}
	return false
}

// sealTask gives a child's CreateTaskResult the handle the client knows the task by.
func (g *Gateway) sealTask(s *session, server, tool string, raw json.RawMessage) (json.RawMessage, *RPCError) {
	var task struct {
		TaskID string      `json:"taskId"`
		TTL    json.Number `json:"ttlMs"`
	}
	if json.Unmarshal(raw, &task) != nil || task.TaskID == "" {
		return nil, &RPCError{Code: jsonrpc.CodeInternal, Message: fmt.Sprintf("server %s answered with a task that has no taskId", server)}
	}
	life := taskHandleLife
	if ttl, ok := taskLife(task.TTL); ok {
		life = ttl + time.Minute
	}
	handle := g.sealer.seal(requestState{Kind: stateTask, Server: server, Child: mustMarshal(task.TaskID), Tool: tool,
		Agent: s.agent, Method: "tasks", Expires: time.Now().Add(life).UnixMilli()})
	return renameTask(raw, task.TaskID, handle), nil
}

// extTaskMethod is tasks/get, tasks/update or tasks/cancel of the extension: the
// handle is opened for the caller's agent, the policy of the task's tool is decided
// again (a task may always be cancelled), and the child is asked under its own id.
func extTaskMethod(method string) method {
	return func(ctx context.Context, s *session, params json.RawMessage, r sink) (json.RawMessage, *RPCError) {
		g := s.g
		var fields map[string]json.RawMessage
		var handle string
		if json.Unmarshal(params, &fields) != nil || json.Unmarshal(fields["taskId"], &handle) != nil || handle == "" {
			return nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: method + ` params must be {"taskId": "<id>"}`}
		}
		st, err := g.sealer.open(handle, s.agent, "tasks", "", time.Now())
		if err != nil || st.Kind != stateTask {
			return nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown task %s: %v", quoted(handle), err)}
		}
		var childID string
		_ = json.Unmarshal(st.Child, &childID)
		t := g.lists.current().lookup(st.Tool)
		if t == nil || t.Server != st.Server {
			if method != "tasks/cancel" {
				return nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("the tool of task %s, %s, is no longer served; the task can only be cancelled", quoted(handle), st.Tool)}
			}
		} else if method != "tasks/cancel" {
			if refused := g.taskRefusal(method, s, t, nil); refused != nil {
				return nil, refused
			}
		}
		fields["taskId"] = mustMarshal(childID)
		passFieldsMeta(fields)
		raw, rpcErr := g.taskRequest(ctx, &caller{s: s, r: r}, st.Server, method, fields)
		if rpcErr != nil {
			return nil, renameTaskError(rpcErr, childID, handle)
		}
		return renameTask(raw, childID, handle), nil
	}
}
