package secrets

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nexus-mcp/nexus/internal/skips"
)

// TestStoreContract runs one suite over every Store. The real keychain joins when
// NEXUS_TEST_KEYRING=1 (set by .ci/keyring-session, which provides a private,
// throw-away Secret Service).
func TestStoreContract(t *testing.T) {
	stores := map[string]func(t *testing.T) Store{
		"Fake": func(t *testing.T) Store { return NewFake() },
		"File": func(t *testing.T) Store {
			return &File{Path: filepath.Join(t.TempDir(), "secrets", "secrets.json")}
		},
		"Keyring": func(t *testing.T) Store {
			if !realKeyring() {
				skips.Need(t, "a keychain", "run under .ci/keyring-session, which sets NEXUS_TEST_KEYRING=1", "set NEXUS_TEST_KEYRING=1 (or run under .ci/keyring-session) to test the real OS keychain")
			}
			return &Keyring{}
		},
	}
	for _, kind := range []string{"Fake", "File", "Keyring"} {
		t.Run(kind, func(t *testing.T) { testStore(t, stores[kind](t)) })
	}
}

func testStore(t *testing.T, s Store) {
	ctx := context.Background()
	// Names unique to this run, so a real keychain shared with other runs is safe,
	// and removed at the end.
	prefix := fmt.Sprintf("nexus-test-%d/", os.Getpid())
	name := func(n string) string { return prefix + n }
	t.Cleanup(func() {
		for _, n := range []string{"a", "b", "big", "max", "uni"} {
			s.Delete(ctx, name(n))
		}
		for i := range 8 {
			s.Delete(ctx, name(fmt.Sprint("c", i)))
		}
	})

	t.Run("NotFound", func(t *testing.T) {
		_, err := s.Get(ctx, name("a"))
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get of an absent name: %v, want ErrNotFound", err)
		}
		if !strings.Contains(err.Error(), "nexus secrets set "+name("a")) {
			t.Errorf("error does not say how to set it: %v", err)
		}
	})
	t.Run("RoundTrip", func(t *testing.T) {
		if err := s.Set(ctx, name("a"), "first"); err != nil {
			t.Fatal(err)
		}
		if v, err := s.Get(ctx, name("a")); err != nil || v != "first" {
			t.Fatalf("Get = %q, %v; want first", v, err)
		}
		if err := s.Set(ctx, name("a"), "second"); err != nil {
			t.Fatal(err)
		}
		if v, err := s.Get(ctx, name("a")); err != nil || v != "second" {
			t.Fatalf("Get after overwrite = %q, %v; want second", v, err)
		}
		if err := s.Delete(ctx, name("a")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, name("a")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
		}
		if err := s.Delete(ctx, name("a")); err != nil {
			t.Fatalf("Delete of an absent name: %v, want nil", err)
		}
	})
	t.Run("Unicode", func(t *testing.T) {
		for _, v := range []string{"päss wörd ✓ 🔑", "line1\nline2\n", "  spaced  ", `quote"back\slash`, ""} {
			if err := s.Set(ctx, name("uni"), v); err != nil {
				t.Fatalf("Set(%q): %v", v, err)
			}
			if got, err := s.Get(ctx, name("uni")); err != nil || got != v {
				t.Fatalf("Get = %q, %v; want %q", got, err, v)
			}
		}
	})
	t.Run("MaxValueBytes", func(t *testing.T) {
		max := strings.Repeat("x", MaxValueBytes)
		if err := s.Set(ctx, name("max"), max); err != nil {
			t.Fatalf("Set of exactly MaxValueBytes: %v", err)
		}
		if v, err := s.Get(ctx, name("max")); err != nil || v != max {
			t.Fatalf("Get of the largest value: len %d, %v", len(v), err)
		}
		err := s.Set(ctx, name("big"), max+"x")
		if !errors.Is(err, ErrValueTooLarge) || !strings.Contains(err.Error(), "2560") {
			t.Fatalf("Set over the limit: %v, want ErrValueTooLarge naming the limit", err)
		}
		if _, err := s.Get(ctx, name("big")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a refused value was stored: %v", err)
		}
	})
	t.Run("InvalidName", func(t *testing.T) {
		for _, n := range []string{"", "a b", "a:b", "é", strings.Repeat("a", MaxNameBytes+1)} {
			if err := s.Set(ctx, n, "v"); !errors.Is(err, ErrInvalidName) {
				t.Errorf("Set(%q): %v, want ErrInvalidName", n, err)
			}
			if _, err := s.Get(ctx, n); !errors.Is(err, ErrInvalidName) {
				t.Errorf("Get(%q): %v, want ErrInvalidName", n, err)
			}
			if err := s.Delete(ctx, n); !errors.Is(err, ErrInvalidName) {
				t.Errorf("Delete(%q): %v, want ErrInvalidName", n, err)
			}
		}
	})
	t.Run("Concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				n := name(fmt.Sprint("c", i))
				for j := range 5 {
					v := fmt.Sprint("value-", i, "-", j)
					if err := s.Set(ctx, n, v); err != nil {
						t.Error(err)
						return
					}
					if got, err := s.Get(ctx, n); err != nil || got != v {
						t.Errorf("Get(%s) = %q, %v; want %q", n, got, err, v)
						return
					}
				}
				if err := s.Delete(ctx, n); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	})
}

func realKeyring() bool { return os.Getenv("NEXUS_TEST_KEYRING") == "1" }
