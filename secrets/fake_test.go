package secrets

import (
	"context"
	"fmt"
	"sort"
	"sync"
)

// Fake is an in-memory Store for tests, safe for concurrent use; the zero value is empty. It applies the same
// name and size rules as the real stores. (go-keyring's MockInit is a process-wide map
// that is not goroutine-safe, so tests using it fail under -race.)
type Fake struct {
	mu sync.Mutex
	m  map[string]string
}

var _ Store = (*Fake)(nil)

// NewFake returns an empty Fake.
func NewFake() *Fake { return &Fake{m: map[string]string{}} }

// Get returns the value stored under name.
func (f *Fake) Get(ctx context.Context, name string) (string, error) {
	if err := ValidateName(name); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.m[name]
	if !ok {
		return "", fmt.Errorf("%w: %s; set it with `nexus secrets set %s`", ErrNotFound, name, name)
	}
	return v, nil
}

// Set stores value under name.
func (f *Fake) Set(ctx context.Context, name, value string) error {
	if err := checkSet(name, value); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]string{}
	}
	f.m[name] = value
	return nil
}

// Delete removes name; an absent name is not an error.
func (f *Fake) Delete(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, name)
	return nil
}

// Names lists the stored names, sorted, so tests can check that nothing was left
// behind (for example after `nexus remove`).
func (f *Fake) Names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]string, 0, len(f.m))
	for n := range f.m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
