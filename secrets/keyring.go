package secrets

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/zalando/go-keyring"
)

// Keyring is the OS keychain, through github.com/zalando/go-keyring: service
// "nexus", account = the secret's name.
//
// go-keyring has no timeouts, and on Linux a wedged bus or a locked keyring waiting
// for a user who is not there blocks forever, so every call runs in its own goroutine
// bounded by Timeout. A call that times out leaves that goroutine behind until the
// keychain answers; calls are serialized so that at most one is ever stuck, and the
// ones queued behind it time out too, reporting ErrUnavailable. A Set or Delete that
// timed out may still take effect when the keychain wakes up; callers should treat it
// as "unknown", not "not done".
//
// The zero value is ready to use. A Keyring must not be copied after first use.
type Keyring struct {
	// Timeout bounds each call, including the wait for an earlier stuck call;
	// zero means DefaultTimeout.
	Timeout time.Duration

	backend backend // nil means go-keyring; tests substitute a fake

	once sync.Once
	sem  chan struct{} // one token: the right to call the backend
}

var _ Store = (*Keyring)(nil)

// backend is the part of go-keyring that Keyring uses, so tests can stand in a
// keychain that blocks or fails.
type backend interface {
	Get(service, user string) (string, error)
	Set(service, user, password string) error
	Delete(service, user string) error
}

type goKeyring struct{}

func (goKeyring) Get(service, user string) (string, error) { return keyring.Get(service, user) }
func (goKeyring) Set(service, user, pw string) error       { return keyring.Set(service, user, pw) }
func (goKeyring) Delete(service, user string) error        { return keyring.Delete(service, user) }

// Get returns the value stored under name.
func (k *Keyring) Get(ctx context.Context, name string) (string, error) {
	if err := ValidateName(name); err != nil {
		return "", err
	}
	return k.get(ctx, name)
}

func (k *Keyring) get(ctx context.Context, name string) (string, error) {
	return k.getAs(ctx, name, "reading "+name)
}

// getAs is get with the wording of errors chosen by the caller (Open's probe is not
// a read of anything the user knows).
func (k *Keyring) getAs(ctx context.Context, name, what string) (string, error) {
	var v string
	err := k.call(ctx, what, func(b backend) (err error) {
		v, err = b.Get(Service, name)
		return err
	})
	if errors.Is(err, keyring.ErrNotFound) {
		return "", fmt.Errorf("%w: %s is not in the OS keychain; set it with `nexus secrets set %s`", ErrNotFound, name, name)
	}
	if err != nil {
		return "", err
	}
	return v, nil
}

// Set stores value under name, replacing any previous value.
func (k *Keyring) Set(ctx context.Context, name, value string) error {
	if err := checkSet(name, value); err != nil {
		return err
	}
	err := k.call(ctx, "writing "+name, func(b backend) error { return b.Set(Service, name, value) })
	if errors.Is(err, keyring.ErrSetDataTooBig) {
		// macOS counts the encoded value plus service and account; we checked the
		// value alone.
		return fmt.Errorf("%w: the OS keychain refused %s (%d bytes) as too large; store a shorter value", ErrValueTooLarge, name, len(value))
	}
	return err
}

// Delete removes name; an absent name is not an error.
func (k *Keyring) Delete(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	err := k.call(ctx, "deleting "+name, func(b backend) error { return b.Delete(Service, name) })
	if errors.Is(err, keyring.ErrNotFound) {
		return nil
	}
	return err
}

// call runs f against the backend within the timeout. Errors other than go-keyring's
// sentinels are returned wrapping ErrUnavailable: whatever the cause, the keychain
// could not be used. f's result is delivered through a buffered channel, so a call
// that gave up never races with the goroutine that eventually returns.
func (k *Keyring) call(ctx context.Context, what string, f func(backend) error) error {
	k.once.Do(func() { k.sem = make(chan struct{}, 1) })
	timeout := k.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	b := k.backend
	if b == nil {
		b = goKeyring{}
	}
	// done carries f's result and the values f set are published by the send.
	done := make(chan error, 1)
	select {
	case k.sem <- struct{}{}:
	case <-ctx.Done():
		return ctxErr(ctx, what, timeout, "an earlier keychain call is still stuck")
	}
	go func() {
		defer func() { <-k.sem }()
		done <- f(b)
	}()
	select {
	case err := <-done:
		if err == nil || errors.Is(err, keyring.ErrNotFound) || errors.Is(err, keyring.ErrSetDataTooBig) {
			return err
		}
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
	case <-ctx.Done():
		return ctxErr(ctx, what, timeout, "the keychain did not answer")
	}
}

// ctxErr tells the caller's own cancellation apart from our timeout: only the latter
// means the keychain is unusable.
func ctxErr(ctx context.Context, what string, timeout time.Duration, why string) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// Our deadline or a shorter one of the caller's: either way, no answer in time.
		return fmt.Errorf("%w: %s: %s within %v (is it locked, or is the Secret Service wedged?)", ErrUnavailable, what, why, timeout)
	}
	return fmt.Errorf("%s in the OS keychain: %w", what, ctx.Err())
}
