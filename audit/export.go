package audit

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
)

// exportQueue bounds the lines waiting for the file; past it lines are dropped
// (and counted in the log), so a stuck disk cannot grow the gateway's memory.
const exportQueue = 10_000

// Exporter appends entries to a JSON Lines file from a goroutine of its own, so a
// call never waits for the disk. Past MaxBytes the file is rotated: path.1 is the
// previous file, path.2 the one before, up to Keep of them. A shipper that follows
// the file by name (Filebeat, Fluent Bit, Vector, the OpenTelemetry collector's
// filelog receiver) sees each rotation.
type Exporter struct {
	path     string
	maxBytes int64
	keep     int
	log      *slog.Logger

	lines chan []byte
	done  chan struct{}

	mu      sync.Mutex
	closed  bool
	dropped int

	f    *os.File
	size int64
}

// NewExporter opens (creating, private to the user) the file at path for appending.
func NewExporter(path string, maxBytes int64, keep int, log *slog.Logger) (*Exporter, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("audit export: %w", err)
	}
	x := &Exporter{path: path, maxBytes: maxBytes, keep: keep, log: log,
		lines: make(chan []byte, exportQueue), done: make(chan struct{})}
	if err := x.open(); err != nil {
		return nil, err
	}
	go x.loop()
	return x, nil
}

func (x *Exporter) open() error {
	f, err := os.OpenFile(x.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("audit export: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("audit export: %w", err)
	}
	x.f, x.size = f, st.Size()
	return nil
}

// Add queues e. It never blocks.
func (x *Exporter) Add(e Entry) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return
	}
	select {
	case x.lines <- e.Line():
	default:
		x.dropped++
	}
}

func (x *Exporter) loop() {
	defer close(x.done)
	for line := range x.lines {
		x.write(line)
	}
	if x.f != nil {
		_ = x.f.Sync()
		_ = x.f.Close()
	}
}

func (x *Exporter) write(line []byte) {
	x.mu.Lock()
	dropped := x.dropped
	x.dropped = 0
	x.mu.Unlock()
	if dropped > 0 {
		x.log.Error("audit export: lines dropped: the file could not keep up", "dropped", dropped, "file", x.path)
	}
	if x.f != nil && x.maxBytes > 0 && x.size > 0 && x.size+int64(len(line)) > x.maxBytes {
		x.rotate()
	}
	if x.f == nil {
		if err := x.open(); err != nil {
			x.log.Warn("audit export: a line is lost", "err", err)
			return
		}
	}
	n, err := x.f.Write(line)
	x.size += int64(n)
	if err != nil {
		x.log.Warn("audit export: writing failed", "err", err, "file", x.path)
	}
}

// rotate shifts path.k to path.k+1 (dropping the oldest past keep), path to
// path.1, and opens a new path.
func (x *Exporter) rotate() {
	_ = x.f.Close()
	x.f = nil
	if x.keep <= 0 {
		_ = os.Remove(x.path)
	} else {
		_ = os.Remove(fmt.Sprintf("%s.%d", x.path, x.keep))
		for k := x.keep - 1; k >= 1; k-- {
			_ = os.Rename(fmt.Sprintf("%s.%d", x.path, k), fmt.Sprintf("%s.%d", x.path, k+1))
		}
		if err := os.Rename(x.path, x.path+".1"); err != nil {
			x.log.Warn("audit export: rotating failed", "err", err, "file", x.path)
		}
	}
	if err := x.open(); err != nil {
		x.log.Warn("audit export: reopening failed", "err", err)
	}
}

// Close writes what is queued and closes the file.
func (x *Exporter) Close() error {
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return ErrClosed
	}
	x.closed = true
	close(x.lines)
	x.mu.Unlock()
	<-x.done
	return nil
}
