package catalog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/secrets"
)

func TestWrite(t *testing.T) {
	c, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	entry, _ := c.Get("doc-kg")
	dir := t.TempDir()
	store := &secrets.File{Path: filepath.Join(dir, "secrets", "secrets.json")}
	open := func(context.Context) (secrets.Store, error) { return store, nil }
	path := filepath.Join(dir, "config.json")
	// The user set a ttl of their own, which the hints must not override.
	if err := os.WriteFile(path, []byte(`{"ttl": {"docs.doc_kg_search": "1s"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	inst, err := entry.Install("docs", map[string]string{"url": "https://d.example/mcp", "token": "tok-1"}, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	t.Run("all", func(t *testing.T) {
		w, err := inst.Write(ctx, path, "docs", open, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load([]string{path}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Servers["docs"] == nil {
			t.Fatal("server not written")
		}
		if got := string(cfg.TTL["docs.doc_kg_search"]); got != `"1s"` {
			t.Errorf("the user's ttl became %s", got)
		}
		if len(cfg.TTL) != 1 {
			t.Errorf("the catalog's lifetimes were copied into the config: %v", cfg.TTL)
		}
		if got := cfg.Servers["docs"].Catalog; got != "doc-kg" {
			t.Errorf("the server entry names catalog entry %q, want doc-kg", got)
		}
		// The entry's lifetimes apply from the catalog, under the server's name.
		life, err := entry.Lifetimes("docs")
		if err != nil || life["docs.*"].D.Minutes() != 10 || life["docs.doc_kg_status"].D.Minutes() != 1 {
			t.Errorf("Lifetimes = %v, %v", life, err)
		}
		_ = w
		if v, err := store.Get(ctx, "docs/header/Authorization"); err != nil || v != "tok-1" {
			t.Errorf("stored secret: %q %v", v, err)
		}
		data, _ := os.ReadFile(path)
		if strings.Contains(string(data), "tok-1") {
			t.Error("the token reached the config file")
		}
	})

	t.Run("nothing when the config cannot be written", func(t *testing.T) {
		before, _ := store.Names(ctx)
		bad := filepath.Join(dir, "broken.json")
		if err := os.WriteFile(bad, []byte(`{"servers": `), 0o600); err != nil {
			t.Fatal(err)
		}
		other, _ := entry.Install("docs2", map[string]string{"url": "https://d.example/mcp", "token": "tok-2"}, "")
		if _, err := other.Write(ctx, bad, "docs2", open, nil); err == nil {
			t.Fatal("written into a broken config")
		}
		if after, _ := store.Names(ctx); len(after) != len(before) {
			t.Errorf("secrets left behind: %v -> %v", before, after)
		}
	})

	t.Run("no store, no write", func(t *testing.T) {
		p := filepath.Join(dir, "fresh.json")
		noStore := func(context.Context) (secrets.Store, error) { return nil, errors.New("locked") }
		if _, err := inst.Write(ctx, p, "docs", noStore, nil); err == nil || !strings.Contains(err.Error(), "nothing was written") {
			t.Fatalf("err = %v", err)
		}
		if _, err := os.Stat(p); err == nil {
			t.Error("the config was written without its secrets")
		}
	})
}
