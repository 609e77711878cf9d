package clients

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/secrets"
)

// connectFixture is a client file, a personal Nexus config and a file secret store,
// all in temporary directories.
type connectFixture struct {
	client, personal string
	store            *secrets.File
	imp              *Importer
}

func newConnectFixture(t *testing.T, storeErr error) *connectFixture {
	t.Helper()
	dir := t.TempDir()
	f := &connectFixture{
		client:   copyFile(t, "testdata/claude_desktop_config.json"),
		personal: filepath.Join(dir, "config.json"),
		store:    &secrets.File{Path: filepath.Join(dir, "secrets", "secrets.json")},
	}
	f.imp = &Importer{
		Config: f.personal,
		Store: func(context.Context) (secrets.Store, error) {
			if storeErr != nil {
				return nil, storeErr
			}
			return f.store, nil
		},
		StoreName: func() string { return "the test file store" },
	}
	return f
}

func (f *connectFixture) connect(t *testing.T, move ...string) (*Connection, error) {
	t.Helper()
	cfg, err := config.Load([]string{f.personal}, map[string]bool{f.personal: true})
	return f.imp.Connect(context.Background(), f.client, NexusEntry("/opt/nexus", ""),
		ConnectOptions{Format: FormatMCPServers, Move: move, Config: cfg, ConfigErr: err})
}

func (f *connectFixture) nexusServers(t *testing.T) map[string]*config.Server {
	t.Helper()
	cfg, err := config.Load([]string{f.personal}, map[string]bool{f.personal: true})
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Servers
}

func TestConnectMovesServersAndSecrets(t *testing.T) {
	f := newConnectFixture(t, nil)
	conn, err := f.connect(t, "github", "My Files_2")
	if err != nil {
		t.Fatal(err)
	}
	if !conn.Changed || conn.Backup == "" {
		t.Errorf("connection: %+v", conn)
	}
	left := serverNames(t, f.client)
	if slices.Contains(left, "github") || slices.Contains(left, "My Files_2") || !slices.Contains(left, "nexus") || !slices.Contains(left, "pg") {
		t.Errorf("client servers after the move: %v", left)
	}
	srv := f.nexusServers(t)
	gh := srv["github"]
	if gh == nil || srv["my-files-2"] == nil {
		t.Fatalf("Nexus servers: %v", srv)
	}
	ref := gh.Env["GITHUB_PERSONAL_ACCESS_TOKEN"]
	if !strings.HasPrefix(ref, "${keyring:") {
		t.Errorf("the token is in the config as %q, not a reference", ref)
	}
	if v, err := f.store.Get(context.Background(), "github/env/GITHUB_PERSONAL_ACCESS_TOKEN"); err != nil || v != "ghp_exampleexampleexample" {
		t.Errorf("store holds %q, %v", v, err)
	}
	data, _ := os.ReadFile(f.personal)
	if strings.Contains(string(data), "ghp_") {
		t.Error("the token reached the Nexus config")
	}
	var stayed []string
	for _, s := range conn.Stayed {
		stayed = append(stayed, s.Name)
	}
	if !slices.Equal(stayed, []string{"pg", "remote-docs"}) {
		t.Errorf("stayed: %v", stayed)
	}
}

// TestConnectWithoutAStore: a server whose secrets cannot be stored stays in the
// client, with the store's advice; the others still move.
func TestConnectWithoutAStore(t *testing.T) {
	f := newConnectFixture(t, errors.New("no keychain\nTo fix: unlock it"))
	conn, err := f.connect(t, "github", "My Files_2")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(conn.Moved, func(r ImportResult) bool { return r.Original == "github" })
	if i < 0 || conn.Moved[i].Status != StatusStayed || conn.Moved[i].Fix != "unlock it" {
		t.Fatalf("github: %+v", conn.Moved)
	}
	left := serverNames(t, f.client)
	if !slices.Contains(left, "github") || slices.Contains(left, "My Files_2") {
		t.Errorf("client servers: %v", left)
	}
	if srv := f.nexusServers(t); srv["github"] != nil || srv["my-files-2"] == nil {
		t.Errorf("Nexus servers: %v", srv)
	}
}

// editingStore corrupts the client file when the first secret is stored: the
// client changed the file between the dry run and the write.
type editingStore struct {
	*secrets.File
	client string
}

func (s editingStore) Set(ctx context.Context, name, value string) error {
	if err := os.WriteFile(s.client, []byte("{ not json"), 0o644); err != nil {
		return err
	}
	return s.File.Set(ctx, name, value)
}

// TestConnectUndoesTheImport: when the client file cannot be written after the
// servers went into Nexus, they and their secrets are taken out again.
func TestConnectUndoesTheImport(t *testing.T) {
	f := newConnectFixture(t, nil)
	f.imp.Store = func(context.Context) (secrets.Store, error) { return editingStore{f.store, f.client}, nil }
	if _, err := f.connect(t, "github"); err == nil || !strings.Contains(err.Error(), "the Nexus config is as it was") {
		t.Fatalf("err = %v", err)
	}
	if srv := f.nexusServers(t); len(srv) != 0 {
		t.Errorf("servers left in the Nexus config: %v", srv)
	}
	if names, _ := f.store.Names(context.Background()); len(names) != 0 {
		t.Errorf("secrets left in the store: %v", names)
	}
}

func TestConnectDryRunWritesNothing(t *testing.T) {
	f := newConnectFixture(t, nil)
	orig, _ := os.ReadFile(f.client)
	conn, err := f.imp.Connect(context.Background(), f.client, NexusEntry("/opt/nexus", ""),
		ConnectOptions{Move: []string{"github"}, DryRun: true, Config: &config.Config{}})
	if err != nil {
		t.Fatal(err)
	}
	if conn.Diff == "" || len(conn.Moved) != 1 || conn.Moved[0].Store == "" {
		t.Errorf("dry run: %+v", conn)
	}
	if now, _ := os.ReadFile(f.client); string(now) != string(orig) {
		t.Error("the client file changed")
	}
	if _, err := os.Stat(f.personal); err == nil {
		t.Error("the Nexus config was written")
	}
	if _, err := f.imp.Connect(context.Background(), f.client, NexusEntry("/opt/nexus", ""),
		ConnectOptions{Move: []string{"nope"}, Config: &config.Config{}}); err == nil || !strings.Contains(err.Error(), `no server "nope"`) {
		t.Errorf("unknown server: %v", err)
	}
}
