package config

import (
	"context"
	"os"
	"time"
)

// Watch calls changed whenever one of the files is created, removed or modified,
// checking every interval until ctx ends. Polling the modification time and size is
// plain and works the same on every platform and on network file systems, where
// change events are unreliable; a config file is small and read rarely.
func Watch(ctx context.Context, files []string, interval time.Duration, changed func()) {
	type stamp struct {
		mod  time.Time
		size int64
		ok   bool
	}
	look := func() []stamp {
		out := make([]stamp, len(files))
		for i, f := range files {
			if fi, err := os.Stat(f); err == nil {
				out[i] = stamp{fi.ModTime(), fi.Size(), true}
			}
		}
		return out
	}
	last := look()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := look()
		for i := range now {
			if now[i] != last[i] {
				last = now
				changed()
				break
			}
		}
	}
}
