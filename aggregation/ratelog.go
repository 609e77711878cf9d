package aggregation

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// rateLog logs one kind of event at most once per interval, with how many times it
// happened since its last line: a flood (a child's notifications dropped, its
// requests refused) costs a line a second, not a line per event. The count of a
// flood's last interval is logged when the interval ends.
type rateLog struct {
	log   *slog.Logger
	level slog.Level
	msg   string
	every time.Duration

	mu      sync.Mutex
	last    time.Time // when the last line was written
	count   int       // events since it
	args    []any     // of the latest event
	pending bool      // a flush is scheduled
}

func newRateLog(log *slog.Logger, level slog.Level, msg string, every time.Duration) *rateLog {
	return &rateLog{log: log, level: level, msg: msg, every: every}
}

// add records one event; args describe it (the latest event's are logged).
func (r *rateLog) add(args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count++
	r.args = args
	if r.pending {
		return // the scheduled flush writes it
	}
	wait := r.every - time.Since(r.last)
	if wait <= 0 {
		r.writeLocked()
		return
	}
	r.pending = true
	time.AfterFunc(wait, r.flush)
}

func (r *rateLog) flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = false
	if r.count > 0 {
		r.writeLocked()
	}
}

func (r *rateLog) writeLocked() {
	r.log.Log(context.Background(), r.level, r.msg, append(r.args, "count", r.count)...)
	r.last, r.count, r.args = time.Now(), 0, nil
}
