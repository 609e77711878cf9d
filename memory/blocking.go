package memory

import "context"

type beforeBlockingKey struct{}

// WithBeforeBlocking returns a context whose calls tell f before memory waits on
// something that may take long (an identical call in flight, a remote embedder), so
// that a caller running on a goroutine others depend on (a front's reader) can hand
// its duty on first. f may be called more than once.
func WithBeforeBlocking(ctx context.Context, f func()) context.Context {
	return context.WithValue(ctx, beforeBlockingKey{}, f)
}

func beforeBlocking(ctx context.Context) {
	if f, ok := ctx.Value(beforeBlockingKey{}).(func()); ok {
		f()
	}
}
