package aggregation

import (
	"encoding/json"
	"testing"
	"time"
)

func TestTaskLife(t *testing.T) {
	tests := []struct {
		ttl    string
		want   time.Duration
		wantOK bool
	}{
		{"60000", time.Minute, true},
		{"1.5", 1500 * time.Microsecond, true},
		{"9223372036854", maxTaskLife, true},
		{"9223372036854775807", maxTaskLife, true},
		{"1e30", maxTaskLife, true},
		{"1e400", maxTaskLife, true},
		{"0", 0, false},
		{"-1", 0, false},
		{"-1e400", 0, false},
		{"", 0, false},
	}
	for _, tc := range tests {
		got, ok := taskLife(json.Number(tc.ttl))
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("taskLife(%s) = %s, %v; want %s, %v", tc.ttl, got, ok, tc.want, tc.wantOK)
		}
	}
}

// TestTaskHandleOfAHugeTTL: a child's task with a ttl too long for a duration
// gets a handle that can be polled, not one already expired.
func TestTaskHandleOfAHugeTTL(t *testing.T) {
	g := &Gateway{sealer: newSealer(nil)}
	s := &session{agent: "alice"}
	for _, ttl := range []string{"9223372036854", "9223372036854775807", "1e30"} {
		raw, rpcErr := g.sealTask(s, "jobs", "jobs__run", json.RawMessage(`{"resultType":"task","taskId":"job-1","status":"working","ttlMs":`+ttl+`}`))
		if rpcErr != nil {
			t.Fatalf("ttlMs %s: %+v", ttl, rpcErr)
		}
		var task struct {
			TaskID string `json:"taskId"`
		}
		if err := json.Unmarshal(raw, &task); err != nil {
			t.Fatal(err)
		}
		st, err := g.sealer.open(task.TaskID, "alice", "tasks", "", time.Now())
		if err != nil {
			t.Fatalf("ttlMs %s: the handle does not open: %v", ttl, err)
		}
		if life := time.Until(time.UnixMilli(st.Expires)); life < maxTaskLife || life > maxTaskLife+2*time.Minute {
			t.Errorf("ttlMs %s: the handle lives %s, want about %s", ttl, life, maxTaskLife)
		}
	}
}
