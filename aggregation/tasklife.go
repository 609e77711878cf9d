package aggregation

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// maxTaskLife bounds how long a task is honoured, whatever ttl its child gives.
// A ttl in milliseconds that is turned into a time.Duration unchecked overflows
// past about 292 years (9223372036854 ms, plus the handle's minute of grace, is
// already negative): the handle would be expired when made, and the task could
// never be polled. A task a month old is past any client's patience anyway.
const maxTaskLife = 30 * 24 * time.Hour

// taskLife is a child's task ttl, in milliseconds as the child wrote it, as a
// duration within (0, maxTaskLife]. ok is false when there is none: absent,
// null, zero, negative or not a number. It takes any JSON number (a fraction, an
// exponent, one past int64), since the ttl is the child's to write.
func taskLife(ttlMs json.Number) (d time.Duration, ok bool) {
	ms, err := strconv.ParseFloat(string(ttlMs), 64)
	if err != nil && !math.IsInf(ms, 1) || math.IsNaN(ms) || ms <= 0 {
		return 0, false
	}
	if ms >= float64(maxTaskLife.Milliseconds()) {
		return maxTaskLife, true
	}
	return max(time.Duration(ms*float64(time.Millisecond)), 1), true
}
