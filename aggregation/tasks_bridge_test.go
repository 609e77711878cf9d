package aggregation

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestLegacyClientTaskOnModernChild: a 2025-11-25 client runs a tool as a task on a
// child spoken 2026-07-28 that offers the tasks extension. It is offered the
// legacy tasks capability, gets a legacy CreateTaskResult under the gateway's id
// (never the child's, and with a huge ttl kept within bounds), polls it with
// tasks/get, sees it in tasks/list, and tasks/result waits for the task to end and
// answers with its result, related to the task, where the child has no
// tasks/result at all.
func TestLegacyClientTaskOnModernChild(t *testing.T) {
	g, url := agentsGateway(t, testChildServer("raw", "raw-tasks", ""))
	for _, front := range fronts {
		t.Run(front, func(t *testing.T) {
			var c *testClient
			if front == frontStdio {
				c = stdioClient(t, g, "tester")
			} else {
				c = httpClient(t, url, tokens["tester"])
			}
			init := c.request("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
				"clientInfo": map[string]any{"name": "legacy", "version": "1"}})
			if !strings.Contains(string(init.Result), `"requests":{"tools":{"call":{}}}`) {
				t.Errorf("a legacy client is not offered task-augmented calls: %s", init.Result)
			}
			c.notify("notifications/initialized", map[string]any{})

			created := c.request("tools/call", map[string]any{"name": "raw__slow", "task": map[string]any{"ttl": 60000}})
			var res struct {
				Task struct {
					TaskID       string `json:"taskId"`
					Status       string `json:"status"`
					TTL          int64  `json:"ttl"`
					PollInterval int64  `json:"pollInterval"`
				} `json:"task"`
			}
			if created.Error != nil || json.Unmarshal(created.Result, &res) != nil || res.Task.TaskID == "" {
				t.Fatalf("a task-augmented call: %s %+v", created.Result, created.Error)
			}
			id := res.Task.TaskID
			if strings.Contains(string(created.Result), "slow-") || strings.Contains(string(created.Result), "ttlMs") ||
				res.Task.Status != "working" || res.Task.PollInterval != 20 || res.Task.TTL == 0 {
				t.Errorf("the created task as a legacy client gets it: %s", created.Result)
			}

			got := c.request("tasks/get", map[string]any{"taskId": id})
			if got.Error != nil || !strings.Contains(string(got.Result), `"status":"working"`) ||
				!strings.Contains(string(got.Result), `"statusMessage":"half way"`) || strings.Contains(string(got.Result), "resultType") {
				t.Errorf("tasks/get: %s %+v", got.Result, got.Error)
			}
			result := c.requestWithin("tasks/result", map[string]any{"taskId": id}, 10*time.Second)
			if result.Error != nil || !strings.Contains(string(result.Result), "the slow job is done") ||
				!strings.Contains(string(result.Result), `"`+relatedTaskKey+`":{"taskId":"`+id+`"}`) || strings.Contains(string(result.Result), "slow-") {
				t.Errorf("tasks/result: %s %+v", result.Result, result.Error)
			}
			list := c.request("tasks/list", nil)
			if list.Error != nil || !strings.Contains(string(list.Result), `"taskId":"`+id+`"`) || !strings.Contains(string(list.Result), `"status":"completed"`) {
				t.Errorf("tasks/list: %s %+v", list.Result, list.Error)
			}
			if m := c.request("tasks/result", map[string]any{"taskId": "slow-1"}); m.Error == nil {
				t.Errorf("the child's own id was honoured: %s", m.Result)
			}
		})
	}
}
