package secrets

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zalando/go-keyring"

	"github.com/nexus-mcp/nexus/internal/skips"
)

// fakeBackend stands in for go-keyring: it can block until released, or fail.
type fakeBackend struct {
	release chan struct{} // when non-nil, calls block until it is closed
	err     error
	mu      sync.Mutex
	calls   int
}

func (b *fakeBackend) do() error {
	b.mu.Lock()
	b.calls++
	b.mu.Unlock()
	if b.release != nil {
		<-b.release
	}
	return b.err
}
func (b *fakeBackend) Get(service, user string) (string, error) { return "", b.do() }
func (b *fakeBackend) Set(service, user, pw string) error       { return b.do() }
func (b *fakeBackend) Delete(service, user string) error        { return b.do() }

func TestKeyringTimeout(t *testing.T) {
	fb := &fakeBackend{release: make(chan struct{})}
	defer close(fb.release)
	k := &Keyring{Timeout: 50 * time.Millisecond, backend: fb}
	ctx := context.Background()

	start := time.Now()
	_, err := k.Get(ctx, "github/TOKEN")
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Get on a wedged keychain: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Get took %v with a 50ms timeout", d)
	}
	if !strings.Contains(err.Error(), "did not answer within 50ms") {
		t.Errorf("error does not say what happened: %v", err)
	}

	// The first call is still stuck: later ones queue behind it, time out, and do
	// not pile more goroutines into the keychain.
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			if err := k.Set(ctx, "github/TOKEN", "v"); !errors.Is(err, ErrUnavailable) {
				t.Errorf("Set behind a stuck call: %v, want ErrUnavailable", err)
			}
		})
	}
	wg.Wait()
	fb.mu.Lock()
	calls := fb.calls
	fb.mu.Unlock()
	if calls != 1 {
		t.Errorf("%d calls reached the wedged keychain, want 1", calls)
	}
}

func TestKeyringCallerCancel(t *testing.T) {
	fb := &fakeBackend{release: make(chan struct{})}
	defer close(fb.release)
	k := &Keyring{Timeout: time.Minute, backend: fb}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err := k.Get(ctx, "a")
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("Get with a canceled context: %v, want context.Canceled and not ErrUnavailable", err)
	}
}

func TestKeyringErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		backendErr error
		getIs      error
		deleteNil  bool
	}{
		{keyring.ErrNotFound, ErrNotFound, true},
		{errors.New(`exec: "dbus-launch": executable file not found in $PATH`), ErrUnavailable, false},
	} {
		k := &Keyring{backend: &fakeBackend{err: tc.backendErr}}
		if _, err := k.Get(ctx, "a"); !errors.Is(err, tc.getIs) {
			t.Errorf("Get with backend error %q: %v, want %v", tc.backendErr, err, tc.getIs)
		}
		if err := k.Delete(ctx, "a"); (err == nil) != tc.deleteNil {
			t.Errorf("Delete with backend error %q: %v", tc.backendErr, err)
		}
	}
	k := &Keyring{backend: &fakeBackend{err: keyring.ErrSetDataTooBig}}
	if err := k.Set(ctx, "a", "v"); !errors.Is(err, ErrValueTooLarge) {
		t.Errorf("Set refused by the keychain as too big: %v, want ErrValueTooLarge", err)
	}
}

// TestOpenNoKeychain is the no-keychain path: no session bus at all.
//
// godbus caches one session-bus connection per process, so once any test has reached
// a real keychain, changing DBUS_SESSION_BUS_ADDRESS changes nothing. The checks
// therefore run in a fresh copy of the test binary.
func TestOpenNoKeychain(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the unreachable Secret Service is simulated through D-Bus, which only Linux uses")
	}
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent")
	if os.Getenv(noBusChild) == "1" {
		testOpenNoKeychain(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenNoKeychain$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), noBusChild+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("in a child process:\n%s", out)
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestOpenNoKeychain")) {
		t.Fatalf("the child failed: %v", err)
	}
}

const noBusChild = "NEXUS_SECRETS_TEST_NO_BUS_CHILD"

func testOpenNoKeychain(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "secrets", "secrets.json")

	start := time.Now()
	s, err := Open(ctx, Options{FilePath: path, Timeout: 2 * time.Second})
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("Open took %v; it must fail fast when there is no bus", d)
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Open = %v, %v; want ErrUnavailable", s, err)
	}
	t.Logf("Open without a keychain (%v): %v", time.Since(start), err)
	for _, hint := range []string{"Secret Service", "--insecure-file-store", "${env:NAME}"} {
		if !strings.Contains(err.Error(), hint) {
			t.Errorf("the error does not mention %q:\n%v", hint, err)
		}
	}

	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	s, err = Open(ctx, Options{FilePath: path, InsecureFile: true, Timeout: 2 * time.Second, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := s.(*File); !ok || f.Path != path {
		t.Fatalf("Open with InsecureFile = %#v, want *File at %s", s, path)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), path) {
		t.Errorf("no warning naming the file was logged: %q", logs.String())
	}
	if err := s.Set(ctx, "a/B", "value"); err != nil {
		t.Fatal(err)
	}
}

// TestOpenKeyring runs only with a real keychain (see .ci/keyring-session).
func TestOpenKeyring(t *testing.T) {
	if !realKeyring() {
		skips.Need(t, "a keychain", "run under .ci/keyring-session, which sets NEXUS_TEST_KEYRING=1", "set NEXUS_TEST_KEYRING=1 to test the real OS keychain")
	}
	s, err := Open(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*Keyring); !ok {
		t.Fatalf("Open = %T, want *Keyring", s)
	}
}
