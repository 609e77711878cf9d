package audit

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Defaults of a Writer.
const (
	DefaultMaxAge   = 30 * 24 * time.Hour
	DefaultMaxBytes = 64 << 20
	// flushEvery bounds how long a record waits before it is written: the
	// batching that keeps disk syncs off the calls' path.
	flushEvery = 200 * time.Millisecond
	// batchSize wakes the writer early when this many records wait.
	batchSize = 256
	// maxPending bounds what waits while the store is down; past it the oldest
	// records are dropped (and the drop is logged), so a dead store cannot grow
	// the gateway's memory without bound.
	maxPending = 100_000
	pruneEvery = 10 * time.Minute
)

// WriterOptions configure a Writer.
type WriterOptions struct {
	Logger   *slog.Logger
	MaxAge   time.Duration // default DefaultMaxAge
	MaxBytes int64         // default DefaultMaxBytes
}

// Writer writes records to a Store in batches, from a goroutine it owns: Add
// queues and returns at once; the goroutine writes what waits every 200ms (or
// sooner when a batch fills), and prunes the store to its bounds now and then. A
// store that fails is logged and retried; records wait for it (up to a bound).
// Close writes what is left and stops the goroutine.
type Writer struct {
	store *Store
	log   *slog.Logger
	opts  WriterOptions

	mu      sync.Mutex
	pending []Record
	dropped int
	closed  bool
	flushed []chan struct{} // Flush callers waiting for the next write

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

// NewWriter starts a writer into store. The writer does not own the store: close
// the writer first, then the store.
func NewWriter(store *Store, opts WriterOptions) *Writer {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = DefaultMaxAge
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	w := &Writer{store: store, log: opts.Logger, opts: opts,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w
}

// Add queues a record. It never blocks and never fails the call it records.
func (w *Writer) Add(r Record) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		w.log.Warn("audit record after close, not kept", "agent", r.Agent, "tool", r.Tool)
		return
	}
	if len(w.pending) >= maxPending {
		w.pending = w.pending[1:]
		w.dropped++
	}
	w.pending = append(w.pending, r)
	full := len(w.pending) >= batchSize
	w.mu.Unlock()
	if full {
		w.poke()
	}
}

func (w *Writer) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Flush waits until what was added before it has been written (or tried), or ctx
// ends: for a reader that must see the latest records (tests, the status page).
func (w *Writer) Flush(ctx context.Context) error {
	ch := make(chan struct{})
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	w.flushed = append(w.flushed, ch)
	w.mu.Unlock()
	w.poke()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close writes every queued record, then stops the writer's goroutine and waits
// for it. A clean shutdown loses nothing (unless the store is down: then what
// could not be written is logged as lost).
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	w.closed = true
	w.mu.Unlock()
	close(w.stop)
	<-w.done
	return nil
}

func (w *Writer) loop() {
	defer close(w.done)
	tick := time.NewTicker(flushEvery)
	defer tick.Stop()
	w.prune()
	lastPrune := time.Now()
	failing := false
	for {
		stopping := false
		select {
		case <-w.stop:
			stopping = true
		case <-tick.C:
		case <-w.wake:
		}
		w.mu.Lock()
		batch, dropped, waiters := w.pending, w.dropped, w.flushed
		w.pending, w.dropped, w.flushed = nil, 0, nil
		w.mu.Unlock()
		if dropped > 0 {
			w.log.Error("audit: records dropped: the store has been failing and too many waited", "dropped", dropped, "store", w.store.Where())
		}
		if err := w.write(batch); err != nil {
			if !failing || stopping {
				w.log.Error("audit: writing the trail failed; records wait and are retried", "err", err, "records", len(batch))
			}
			failing = true
			if stopping {
				w.log.Error("audit: records lost at shutdown: the store is failing", "records", len(batch))
			} else {
				w.requeue(batch)
			}
		} else if failing {
			w.log.Info("audit: the store works again", "store", w.store.Where())
			failing = false
		}
		for _, ch := range waiters {
			close(ch)
		}
		if stopping {
			return
		}
		if time.Since(lastPrune) > pruneEvery {
			w.prune()
			lastPrune = time.Now()
		}
	}
}

// write writes a batch with a bounded wait: a store that hangs must not hold the
// records behind it (nor Close) forever.
func (w *Writer) write(batch []Record) error {
	if len(batch) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return w.store.Write(ctx, batch)
}

// requeue puts a batch that failed back in front of what arrived since.
func (w *Writer) requeue(batch []Record) {
	w.mu.Lock()
	defer w.mu.Unlock()
	all := append(batch, w.pending...)
	if over := len(all) - maxPending; over > 0 {
		all = all[over:]
		w.dropped += over
	}
	w.pending = all
}

func (w *Writer) prune() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := w.store.Prune(ctx, time.Now(), w.opts.MaxAge, w.opts.MaxBytes)
	if err != nil {
		w.log.Warn("audit: pruning the trail failed", "err", err)
		return
	}
	if n > 0 {
		w.log.Info("audit: old records pruned", "records", n, "maxAge", w.opts.MaxAge, "maxBytes", w.opts.MaxBytes)
	}
}
